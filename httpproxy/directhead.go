package httpproxy

import (
	"strconv"
	"time"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/h2wire"
	"github.com/legateproxy/legate/internal/http1"
)

// A response whose header nobody but the codec reads is written straight from the
// upstream's fields ("direct"), without the header map: filling the map, canonicalizing each
// name and ranging over it was about 1,900 instructions of a proxied request, a sixteenth of
// all (bench/callgrind.sh, PROTO=h1). The map is the interface of everything that may read or change the response header
// (filters, route header mutations, stream hooks, upstream filters, tracing, access logs,
// cookies the router adds), so a response takes this path only when none of them is present
// (headDirect); what the map path does to the header, the direct one does the same
// (knownKinds, appendDirectHead), and TestDirectResponseHeadMatchesMapped holds them
// equal.

// headDirect reports whether the response to this stream may be written without its header
// map. m is the route the request took.
func (s *stream) headDirect(m *route.Match) bool {
	h := s.h
	return !s.respSpelled && !s.tunnel &&
		len(h.filters) == 0 && len(s.chain) == 0 && len(h.logs) == 0 &&
		!s.tr.active && len(s.fstreams) == 0 && len(s.setCookies) == 0 &&
		(s.attempt == nil || s.attempt.filters == nil) &&
		(m == nil || !m.HasResponseHeaderOps())
}

// fieldKind is what the connection manager does with an upstream response field.
type fieldKind uint8

const (
	fieldKept      fieldKind = iota
	fieldDropped             // hop-by-hop, or framing and Date, which the codec writes itself
	fieldServer              // replaced or kept by server_header_transformation
	fieldRequestID           // replaced when always_set_request_id_in_response
	fieldAttempts            // replaced when the route sets x-envoy-attempt-count
	fieldSvcTime             // replaced unless the router suppresses Envoy's headers
)

// knownKinds are what the connection manager does with an upstream response field whose
// name is a known one (pool.RawField.Known, found as the pool parsed the head), by
// http1.Known: the names skipResponseHeader drops and those the connection manager or the
// router may set. Other names are kept.
var knownKinds = [...]fieldKind{
	http1.KnownConnection:       fieldDropped,
	http1.KnownContentLength:    fieldDropped,
	http1.KnownTransferEncoding: fieldDropped,
	http1.KnownDate:             fieldDropped,
	http1.KnownKeepAlive:        fieldDropped,
	http1.KnownProxyConnection:  fieldDropped,
	http1.KnownTE:               fieldDropped,
	http1.KnownUpgrade:          fieldDropped,
	http1.KnownServer:           fieldServer,
	http1.KnownRequestID:        fieldRequestID,
	http1.KnownAttemptCount:     fieldAttempts,
	http1.KnownServiceTime:      fieldSvcTime,
	http1.KnownTrailer:          fieldKept,
}

// knownBit is a known name's bit in a directPlan's sets of names.
func knownBit(k http1.Known) uint32 { return 1 << (k & 31) }

// kindNames are the known names of each kind, a bit each (knownBit).
var kindNames = func() (m [fieldSvcTime + 1]uint32) {
	for k, kind := range knownKinds {
		m[kind] |= knownBit(http1.Known(k))
	}
	m[fieldKept] = 0 // the Unknown names are kept
	return m
}()

// directPlan is what a direct head does besides the upstream fields it keeps: the fields the
// connection manager and the router set, which replace the upstream's of the same name.
type directPlan struct {
	setID, setAttempts, setSvcTime bool
	setIDIf                        bool // always_set_request_id_in_response: setID when the request has an id
	server                         config.ServerHeaderTransformation
	// drop are the known names of the upstream fields not written, a bit each; seen those
	// of the upstream's fields (keep saw them). A bit a name was about 20 instructions a
	// field less than a switch on its kind.
	drop, seen uint32
}

func (s *stream) planDirect(m *route.Match) directPlan {
	p := s.h.directPlan // the connection manager's part, planned once (planDirectFor)
	if p.setIDIf && s.requestID != "" {
		p.setID = true
		p.drop |= 1 << http1.KnownRequestID
	}
	if m != nil && m.Route != nil && m.Route.AttemptCountInResponse {
		p.setAttempts = true
		p.drop |= 1 << http1.KnownAttemptCount
	}
	return p
}

// planDirectFor is the part of a direct plan cfg alone decides, planned once for the handler
// (each request's was about 20 instructions more).
func planDirectFor(cfg *config.HTTPConnectionManager) directPlan {
	p := directPlan{
		setIDIf:    cfg.AlwaysSetRequestIDInResponse,
		setSvcTime: !cfg.Router.SuppressEnvoyHeaders,
		server:     cfg.ServerHeader,
		drop:       kindNames[fieldDropped],
	}
	// The names of the kinds the connection manager or the router sets are each one name
	// (TestKindNames), whose bits are constants here.
	if p.server == config.ServerHeaderOverwrite {
		p.drop |= 1 << http1.KnownServer
	}
	if p.setSvcTime {
		p.drop |= 1 << http1.KnownServiceTime
	}
	return p
}

// keep reports whether an upstream field whose name is k is written, as the map path would.
// It is inlined.
func (p *directPlan) keep(k http1.Known) bool {
	bit := knownBit(k)
	p.seen |= bit
	return p.drop&bit == 0
}

// addServer reports whether the connection manager's Server field is written, once keep has
// seen every upstream field.
func (p *directPlan) addServer() bool {
	return p.server == config.ServerHeaderOverwrite ||
		p.server == config.ServerHeaderAppendIfAbsent && p.seen&(1<<http1.KnownServer) == 0
}

// appendDirectHead appends the header lines of a direct HTTP/1 response (headDirect): the
// upstream's fields the map path keeps, in their order, then the fields the connection
// manager and the router add. Framing (content-length, transfer-encoding, connection)
// follows, as on the map path.
func (s *stream) appendDirectHead(dst []byte, m *route.Match) []byte {
	nc := s.respCase()
	p := s.planDirect(m)
	// Read once: through s, the slice was loaded again for each field (dst's appends might
	// have changed it, for all the compiler knows).
	hdr := s.upResp.Header
	for i := range hdr {
		f := &hdr[i]
		if !p.keep(f.Known) {
			continue
		}
		dst = config.AppendNameBytes(dst, f.Name, nc)
		dst = append(dst, ": "...)
		dst = append(dst, f.Value...)
		dst = append(dst, '\r', '\n')
	}
	proper := nc == config.HeaderCaseProper
	if p.addServer() {
		// The Server line and the Date line, spelled out once a second for the handler:
		// five appends were one.
		dst = append(dst, s.h.serverDateLine(b2i(proper), s.start)...)
	} else {
		dst = appendAdded(dst, proper, addedDate)
		dst = append(dst, s.h.sh.dates.get(s.start)...)
		dst = append(dst, '\r', '\n')
	}
	if p.setID {
		dst = appendAdded(dst, proper, addedRequestID)
		dst = append(dst, s.requestID...)
		dst = append(dst, '\r', '\n')
	}
	if p.setAttempts {
		dst = appendAdded(dst, proper, addedAttempts)
		dst = strconv.AppendInt(dst, int64(s.attempts), 10)
		dst = append(dst, '\r', '\n')
	}
	if p.setSvcTime {
		dst = appendAdded(dst, proper, addedSvcTime)
		dst = strconv.AppendInt(dst, time.Duration(s.upRx-s.upTx).Milliseconds(), 10)
		dst = append(dst, '\r', '\n')
	}
	return dst
}

// serverDate spells out the Server line a direct head adds for cfg (its server_name) and the
// name of the Date line after it, in lower case then in proper case.
func serverDate(cfg *config.HTTPConnectionManager) [2]string {
	var sd [2]string
	for i, proper := range [...]bool{false, true} {
		sd[i] = string(appendAdded(nil, proper, addedServer)) + cfg.ServerName + "\r\n" +
			string(appendAdded(nil, proper, addedDate))
	}
	return sd
}

// serverDateLine is serverDate[i] followed by the Date of now's second (the shared
// dateCache's) and its line end, made once a second.
func (h *Handler) serverDateLine(i int, now time.Time) string {
	sec := now.Unix()
	if v := h.serverDateLines[i].Load(); v != nil && v.sec == sec {
		return v.s
	}
	v := &dateValue{sec: sec, s: h.serverDate[i] + h.sh.dates.get(now) + "\r\n"}
	h.serverDateLines[i].Store(v)
	return v.s
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// appendDirectHeadH2 is appendDirectHead for an HTTP/2 response: the same fields, HPACK
// encoded (h2wire, no dynamic table) into the stream's pre-encoded block (h2stream.pre).
// HTTP/2 announces no trailers, so a Trailer field is left out as the map path's encoder
// (h2conn.appendHeaders) leaves it out.
func (s *stream) appendDirectHeadH2(b []byte, m *route.Match) []byte {
	p := s.planDirect(m)
	p.drop |= knownBit(http1.KnownTrailer)
	hdr := s.upResp.Header
	for i := range hdr {
		f := &hdr[i]
		if !p.keep(f.Known) {
			continue
		}
		v := bytesString(f.Value)
		if idx := h2wire.StaticName(knownResponseKey(f.Name)); idx != 0 {
			b = h2wire.AppendIndexedName(b, idx, v)
		} else {
			b = h2wire.AppendLiteral(b, bytesString(f.Name), v)
		}
	}
	// The Server and Date fields are encoded once (for the handler, and for each second), the
	// service time's name once for all: encoding them for each response, and the service
	// time's string, were about 400 instructions a response.
	if p.addServer() {
		b = append(b, s.h.serverH2...)
	}
	b = append(b, s.h.sh.dates.getH2(s.start)...)
	if p.setID {
		b = h2wire.AppendLiteral(b, "x-request-id", s.requestID)
	}
	if p.setAttempts {
		b = h2wire.AppendLiteral(b, "x-envoy-attempt-count", s.itoa(int64(s.attempts)))
	}
	if p.setSvcTime {
		var d [20]byte
		b = append(b, svcTimeH2...)
		b = h2wire.AppendString(b, bytesString(strconv.AppendInt(d[:0], time.Duration(s.upRx-s.upTx).Milliseconds(), 10)))
	}
	return b
}

// svcTimeH2 is the start of an HPACK literal field without indexing named
// x-envoy-upstream-service-time (h2wire.AppendLiteral's), its value to follow.
var svcTimeH2 = string(h2wire.AppendString([]byte{0}, "x-envoy-upstream-service-time"))

// The fields appendDirectHead adds, by index in addedNames.
const (
	addedServer = iota
	addedDate
	addedRequestID
	addedAttempts
	addedSvcTime
)

// addedNames spell the added fields' names with their separator, in proper case (the
// canonical key, which is what config.AppendName makes of it) and in lower case:
// TestAddedNamesAreAppendNames holds them to AppendName.
var addedNames = [...]struct{ proper, lower string }{
	addedServer:    {"Server: ", "server: "},
	addedDate:      {"Date: ", "date: "},
	addedRequestID: {"X-Request-Id: ", "x-request-id: "},
	addedAttempts:  {"X-Envoy-Attempt-Count: ", "x-envoy-attempt-count: "},
	addedSvcTime:   {"X-Envoy-Upstream-Service-Time: ", "x-envoy-upstream-service-time: "},
}

// appendAdded appends the name and separator of added field i in proper or lower case,
// without AppendName's table lookup (about 85 instructions a name).
func appendAdded(dst []byte, proper bool, i int) []byte {
	if proper {
		return append(dst, addedNames[i].proper...)
	}
	return append(dst, addedNames[i].lower...)
}
