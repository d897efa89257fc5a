package httpproxy

import (
	"strconv"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/http1"
)

// An HTTP/1 response whose header nobody but the codec reads is written straight from the
// upstream's fields ("direct"), without the header map: filling the map, canonicalizing each
// name and ranging over it was about 1,900 instructions of a proxied request, a sixteenth of
// all (bench/callgrind.sh, PROTO=h1). The map is the interface of everything that may read or change the response header
// (filters, route header mutations, stream hooks, upstream filters, tracing, access logs,
// cookies the router adds), so a response takes this path only when none of them is present
// (headDirect); what the map path does to the header, the direct one does the same
// (upstreamFieldKind, appendDirectHead), and TestDirectResponseHeadMatchesMapped holds them
// equal.

// headDirect reports whether the response to this stream may be written without its header
// map. m is the route the request took.
func (s *stream) headDirect(m *route.Match) bool {
	h := s.h
	return s.h2w == nil && !s.respSpelled && !s.tunnel &&
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

// upstreamFieldKind classifies an upstream response field by its name (any case): the names
// skipResponseHeader drops and those the connection manager or the router may set. The first
// byte and the length pick the one name to compare: most fields are kept after those two
// checks alone.
func upstreamFieldKind(name []byte) fieldKind {
	if len(name) < 2 {
		return fieldKept
	}
	lower, kind := "", fieldDropped
	switch n := len(name); name[0] | 0x20 {
	case 'c':
		switch n {
		case len("connection"):
			lower = "connection"
		case len("content-length"):
			lower = "content-length"
		}
	case 'd':
		if n == len("date") {
			lower = "date"
		}
	case 'k':
		if n == len("keep-alive") {
			lower = "keep-alive"
		}
	case 'p':
		if n == len("proxy-connection") {
			lower = "proxy-connection"
		}
	case 's':
		if n == len("server") {
			lower, kind = "server", fieldServer
		}
	case 't':
		switch n {
		case len("te"):
			lower = "te"
		case len("transfer-encoding"):
			lower = "transfer-encoding"
		}
	case 'u':
		if n == len("upgrade") {
			lower = "upgrade"
		}
	case 'x':
		switch n {
		case len("x-request-id"):
			lower, kind = "x-request-id", fieldRequestID
		case len("x-envoy-attempt-count"):
			lower, kind = "x-envoy-attempt-count", fieldAttempts
		case len("x-envoy-upstream-service-time"):
			lower, kind = "x-envoy-upstream-service-time", fieldSvcTime
		}
	}
	if lower == "" || !http1.EqualFold(name, lower) {
		return fieldKept
	}
	return kind
}

// appendDirectHead appends the header lines of a direct response (headDirect): the upstream's
// fields the map path keeps, in their order, then the fields the connection manager and the
// router add. Framing (content-length, transfer-encoding, connection) follows, as on the map
// path.
func (s *stream) appendDirectHead(dst []byte, m *route.Match) []byte {
	h := s.h
	cfg := h.cfg
	nc := s.respCase()
	setID := cfg.AlwaysSetRequestIDInResponse && s.requestID != ""
	setAttempts := m != nil && m.Route != nil && m.Route.AttemptCountInResponse
	setSvcTime := !cfg.Router.SuppressEnvoyHeaders
	upServer := false
	for i := range s.upResp.Header {
		f := &s.upResp.Header[i]
		switch upstreamFieldKind(f.Name) {
		case fieldDropped:
			continue
		case fieldServer:
			upServer = true
			if cfg.ServerHeader == config.ServerHeaderOverwrite {
				continue
			}
		case fieldRequestID:
			if setID {
				continue
			}
		case fieldAttempts:
			if setAttempts {
				continue
			}
		case fieldSvcTime:
			if setSvcTime {
				continue
			}
		}
		dst = config.AppendNameBytes(dst, f.Name, nc)
		dst = append(dst, ": "...)
		dst = append(dst, f.Value...)
		dst = append(dst, '\r', '\n')
	}
	proper := nc == config.HeaderCaseProper
	if cfg.ServerHeader == config.ServerHeaderOverwrite ||
		cfg.ServerHeader == config.ServerHeaderAppendIfAbsent && !upServer {
		dst = appendAdded(dst, proper, addedServer)
		dst = append(dst, cfg.ServerName...)
		dst = append(dst, '\r', '\n')
	}
	dst = appendAdded(dst, proper, addedDate)
	dst = append(dst, h.sh.dates.get(s.start)...)
	dst = append(dst, '\r', '\n')
	if setID {
		dst = appendAdded(dst, proper, addedRequestID)
		dst = append(dst, s.requestID...)
		dst = append(dst, '\r', '\n')
	}
	if setAttempts {
		dst = appendAdded(dst, proper, addedAttempts)
		dst = strconv.AppendInt(dst, int64(s.attempts), 10)
		dst = append(dst, '\r', '\n')
	}
	if setSvcTime {
		dst = appendAdded(dst, proper, addedSvcTime)
		dst = strconv.AppendInt(dst, s.upRx.Sub(s.upTx).Milliseconds(), 10)
		dst = append(dst, '\r', '\n')
	}
	return dst
}

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
