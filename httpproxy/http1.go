package httpproxy

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"unsafe"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/http1"
	"github.com/legateproxy/legate/internal/procpin"
	"github.com/legateproxy/legate/internal/sockio"
	"github.com/legateproxy/legate/stats"
)

// errHeadTooLarge is a request head larger than max_request_headers_kb (431).
var errHeadTooLarge = errors.New("request headers too large")

// readBufferSize is the read buffer each HTTP/1 connection keeps while idle. Larger heads
// grow it up to max_request_headers_kb for one request.
const readBufferSize = 2048

// reader buffers a downstream connection's input. It belongs to the connection's goroutine.
type reader struct {
	conn net.Conn
	buf  []byte
	r, w int
	max  int        // the largest head accepted
	st   *hcmStats  // downstream_cx_rx_bytes_total is counted in it
	line stats.Line // the connection's goroutine adds on it: its last stream's (serveH1 sets it)
	// scanned is how many buffered bytes from r are known not to end a request head.
	scanned int

	// raw is the plain socket under conn (nil for TLS and for connections without one);
	// drained is set once a read of conn returned less than the room it had, after which conn
	// keeps no bytes of its own (the listener's peeked bytes are gone) and the socket may be
	// read directly, inside a raw read (serverConn.waitRaw).
	raw     syscall.RawConn
	drained bool
}

// idleBuffers hold the read buffers of connections waiting for their next request: a
// buffer is returned when a read finds nothing and taken again when bytes come, so an idle
// connection keeps none (10,000 idle keep-alive connections held 20 MB of them). Under load
// that is a return and a take per request, hence a per-P cache (procpin.Cache), not a
// sync.Pool. Its bound is the rig's 64 connections a P: a response batch of the poller gives
// back up to that many before the next takes them, and what a smaller stack spilled went to
// the sync.Pool after all (Bound 16 saved a third of what 64 does). 64 buffers, 128 KiB, per
// P at most stay in it for good.
var idleBuffers = procpin.Cache[[readBufferSize]byte]{New: func() *[readBufferSize]byte { return new([readBufferSize]byte) }, Bound: 64}

func getReadBuffer() []byte { return idleBuffers.Get()[:] }

// init makes rd read conn, whose plain socket is raw (nil when conn is not one).
func (rd *reader) init(conn net.Conn, raw syscall.RawConn, max int, st *hcmStats) {
	*rd = reader{conn: conn, raw: raw, buf: getReadBuffer(), max: max, st: st, line: stats.ThisLine()}
}

// rawReady reports whether the next bytes may be read from the socket itself.
func (rd *reader) rawReady() bool { return rd.raw != nil && rd.drained }

// readSocket reads the socket fd (inside a raw read) into the buffer, taking a buffer first
// when it was given back. short reports a read that left room: the socket held nothing more
// at that instant. A socket with nothing to read returns syscall.EAGAIN, the client's close
// io.EOF.
func (rd *reader) readSocket(fd uintptr) (short bool, err error) {
	if rd.buf == nil {
		rd.buf = getReadBuffer()
	}
	if err := rd.makeRoom(); err != nil {
		return false, err
	}
	room := len(rd.buf) - rd.w
	n, err := sockio.Recv(int(fd), rd.buf[rd.w:])
	switch {
	case err != nil:
		return false, err
	case n == 0:
		return false, io.EOF
	}
	rd.w += n
	rd.st.rq.On(rd.line).rx.Add(uint64(n))
	return n < room, nil
}

// release gives the read buffer back to idleBuffers when nothing is buffered, before the
// connection waits for its next request.
func (rd *reader) release() {
	if rd.buffered() == 0 && len(rd.buf) == readBufferSize {
		idleBuffers.Put((*[readBufferSize]byte)(rd.buf))
		rd.buf, rd.r, rd.w = nil, 0, 0
	}
}

func (rd *reader) buffered() int { return rd.w - rd.r }

// fill reads at least one more byte, compacting the buffer and growing it up to max (or up
// to need bytes of room) when it is full.
func (rd *reader) fill() error {
	if err := rd.makeRoom(); err != nil {
		return err
	}
	for {
		room := len(rd.buf) - rd.w
		n, err := rd.conn.Read(rd.buf[rd.w:])
		rd.w += n
		if n < room {
			rd.drained = true
		}
		if n > 0 {
			rd.st.rq.On(rd.line).rx.Add(uint64(n))
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// makeRoom makes room for more bytes at the end of the buffer: it compacts the buffer, and
// grows it up to max when it is full.
func (rd *reader) makeRoom() error {
	if rd.r == rd.w {
		rd.r, rd.w = 0, 0
	}
	if rd.w < len(rd.buf) {
		return nil
	}
	switch {
	case rd.r > 0:
		rd.w = copy(rd.buf, rd.buf[rd.r:rd.w])
		rd.r = 0
	case len(rd.buf) < rd.max:
		nb := make([]byte, min(2*len(rd.buf), rd.max))
		rd.w = copy(nb, rd.buf[rd.r:rd.w])
		rd.r = 0
		rd.buf = nb
	default:
		return errHeadTooLarge
	}
	return nil
}

// shrink returns to the idle buffer size after a large head, keeping buffered bytes.
func (rd *reader) shrink() {
	if len(rd.buf) > readBufferSize && rd.buffered() <= readBufferSize {
		nb := make([]byte, readBufferSize)
		rd.w = copy(nb, rd.buf[rd.r:rd.w])
		rd.r = 0
		rd.buf = nb
	}
}

// Buffered, Discard and Fill make the reader the source of a request body (http1.Source).
func (rd *reader) Buffered() []byte { return rd.buf[rd.r:rd.w] }
func (rd *reader) Discard(n int)    { rd.r += n }
func (rd *reader) Fill() error      { return rd.fill() }

// nextHead returns the next request head, up to and including the CRLF of its last header
// line, when the buffer holds all of it; otherwise nil (and errHeadTooLarge when it cannot
// fit, http1.ErrMalformed as soon as a bare line end shows). The bytes stay valid until the
// next fill. Empty lines before a request are skipped (RFC 9112 §2.2).
func (rd *reader) nextHead() ([]byte, error) {
	if rd.scanned == 0 {
		for rd.r < rd.w && (rd.buf[rd.r] == '\r' || rd.buf[rd.r] == '\n') {
			rd.r++
		}
	}
	b := rd.buf[rd.r:rd.w]
	if len(b) == 0 {
		// The loop asks again after each request, mostly of an empty buffer.
		rd.scanned = 0
		return nil, nil
	}
	end, err := http1.HeadEnd(b, rd.scanned)
	switch {
	case err != nil:
		return nil, err
	case end >= 0:
		rd.r += end
		rd.scanned = 0
		return b[:end-2], nil
	}
	rd.scanned = len(b)
	if len(b) >= rd.max {
		return nil, errHeadTooLarge
	}
	return nil, nil
}

// Canonical names of the headers the codec and the stream treat specially.
const (
	hdrHost             = "Host"
	hdrContentLength    = "Content-Length"
	hdrTransferEncoding = "Transfer-Encoding"
	hdrConnection       = "Connection"
	hdrKeepAlive        = "Keep-Alive"
	hdrProxyConnection  = "Proxy-Connection"
	hdrUpgrade          = "Upgrade"
	hdrTE               = "Te"
	hdrTrailer          = "Trailer"
)

// parseHead parses a request head (as returned by nextHead, copied to stable memory) and
// fills h with its end-to-end fields, or, while idx is lazy, only idx (idx.fill fills h when
// it is needed). Header values are substrings of s; vals is per-stream
// storage for one-value slices, so that the common case does not allocate. o are the
// connection manager's HTTP/1 options; with preserve_case, names receives each field name
// as the client spelled it. The head goes to rh, the caller's (not returned: it is about
// twenty words).
func parseHead(rh *http1.RequestHead, s string, h http.Header, idx *inIndex, vals *[]string, maxHeaders int, o *config.HTTP1Options, names *[]string) error {
	spell := o.HeaderCase == config.HeaderCasePreserve
	err := rh.Parse(s, maxHeaders, o.AllowChunkedLength, func(name, value string, k http1.Known) {
		// A known name's key and bit are the table's (canonicalizing "user-agent" and
		// computing its bit were about 100 instructions); the hop-by-hop names, which are
		// known, are not forwarded.
		key := knownKeys[k]
		if k == http1.Unknown {
			key = newLookupKey(canonicalKey(name))
		} else if key.name == "" {
			return
		}
		if !idx.lazy {
			addValue(h, vals, key.name, value)
		}
		idx.addKey(key, value)
		if spell {
			*names = append(*names, name)
		}
	})
	if err != nil {
		return err
	}
	if rh.Framing.Mode == http1.Chunked {
		idx.fill(h, vals)
		delete(h, hdrContentLength) // allow_chunked_length: chunked wins, as in Envoy
		idx.changed()
	}
	for c := rh.Connection; c != ""; {
		var tok string
		tok, c = http1.CutList(c)
		if tok != "" && http1.ValidToken(tok) && !http1.EqualFold(tok, "close") && !http1.EqualFold(tok, "keep-alive") {
			idx.fill(h, vals)
			h.Del(tok) // a header named by Connection is hop-by-hop
			idx.changed()
		}
	}
	return nil
}

// knownKeys are the canonical keys of the known names (http1.Known) with their bits, but
// for the hop-by-hop Keep-Alive and Proxy-Connection, which a request's header does not
// keep, and Unknown.
var knownKeys = func() (t [http1.NumKnown]lookupKey) {
	for k := http1.Known(1); k < http1.NumKnown; k++ {
		if key := http.CanonicalHeaderKey(k.String()); key != hdrKeepAlive && key != hdrProxyConnection {
			t[k] = newLookupKey(key)
		}
	}
	return t
}()

// refusal is why the connection manager's HTTP/1 options refuse a parsed request, in
// Envoy's order: the codec's version check (426, closing the connection), then the
// connection manager's host and path checks. It fills in default_host_for_http_10.
func refusal(rh *http1.RequestHead, o *config.HTTP1Options) (status int, details string) {
	if rh.Minor == 0 {
		if !o.AcceptHTTP10 {
			return http.StatusUpgradeRequired, "low_version"
		}
		if !rh.HasHost && o.DefaultHostForHTTP10 != "" {
			rh.Host, rh.HasHost = o.DefaultHostForHTTP10, true
		}
	}
	switch {
	case !rh.HasHost:
		return http.StatusBadRequest, "missing_host_header"
	case rh.Absolute && rh.Method != http.MethodConnect && o.NoAbsoluteURL:
		// Without allow_absolute_url Envoy keeps the whole target as the path, which is not
		// relative.
		return http.StatusNotFound, "absolute_path"
	}
	return 0, ""
}

// addValue appends value to h[key] without allocating for the first value.
func addValue(h http.Header, vals *[]string, key, value string) {
	if old, ok := h[key]; ok {
		h[key] = append(old, value)
		return
	}
	*vals = append(*vals, value)
	n := len(*vals)
	h[key] = (*vals)[n-1 : n : n]
}

// commonKeys are the canonical forms of frequent header names, interned so that lower-case
// names (HTTP/2 clients, curl's custom headers) canonicalise without allocating. Each is
// canonical (TestCommonKeysAreCanonical).
var commonKeys = [...]string{
	"Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Cache-Control",
	"Connection", "Content-Length", "Content-Type", "Cookie", "Date", "Etag", "Expect",
	"Host", "If-Modified-Since", "If-None-Match", "Keep-Alive", "Last-Modified", "Location",
	"Origin", "Pragma", "Proxy-Connection", "Range", "Referer", "Server", "Set-Cookie", "Te",
	"Transfer-Encoding", "Upgrade", "User-Agent", "Via", "X-Forwarded-For",
	"X-Forwarded-Proto", "X-Request-Id", "X-Envoy-Internal", "X-Envoy-Expected-Rq-Timeout-Ms",
	"X-Envoy-Upstream-Service-Time", "X-Envoy-Retry-On", "X-Envoy-Max-Retries",
	"X-Envoy-Upstream-Rq-Timeout-Ms", "X-Envoy-Original-Path", "Grpc-Status", "Grpc-Message",
}

// commonByShape finds commonKeys by a name's length and first letter (either case), each
// with its lower-case spelling: a name that is not canonical is compared only with the one
// key of its shape (for "user-agent", one comparison), or, where several keys share a shape,
// with the keys of its length (sharedShape), instead of being canonicalized into a buffer that is
// then hashed to look it up (about 330 instructions). Looking the shape up rather than going
// through the keys of the name's length was about 50 instructions less for "user-agent".
var commonByShape = func() (t struct {
	index [32][32]uint8 // 1 + the key's index in keys; 0: none; sharedShape: several
	keys  [len(commonKeys)]knownKey
	byLen [32][]knownKey
}) {
	for i, k := range commonKeys {
		t.keys[i] = knownKey{k, strings.ToLower(k)}
		t.byLen[len(k)] = append(t.byLen[len(k)], t.keys[i])
		if x := &t.index[len(k)][k[0]&31]; *x == 0 {
			*x = uint8(i + 1)
		} else {
			*x = sharedShape
		}
	}
	return t
}()

// sharedShape marks a shape of commonByShape several keys have.
const sharedShape = 255

// commonKey returns the key of commonKeys that name spells in any case, or "".
func commonKey(name string) string {
	if len(name) == 0 || len(name) >= len(commonByShape.index) {
		return ""
	}
	t := &commonByShape
	switch i := t.index[len(name)][name[0]&31]; i {
	case 0:
		return ""
	case sharedShape:
		c := name[0] | 0x20 // a letter in lower case
		for _, k := range t.byLen[len(name)] {
			if k.lower[0] == c && (name == k.lower || http1.EqualFold(name, k.lower)) {
				return k.key
			}
		}
	default:
		if k := &t.keys[i-1]; name == k.lower || http1.EqualFold(name, k.lower) {
			return k.key
		}
	}
	return ""
}

// knownResponseKey returns the canonical key of a frequent response header name, matched
// without regard to case, as a constant: such a name needs neither a copy into the arena nor
// canonicalKey (together about 140 instructions a field). "" for other names.
func knownResponseKey(name []byte) string {
	var k knownKey
	switch len(name) {
	case len("date"):
		k = knownKey{hdrDate, "date"}
	case len("server"):
		k = knownKey{hdrServer, "server"}
	case len("connection"):
		k = knownKey{hdrConnection, "connection"}
		if name[0]|0x20 == 's' {
			k = knownKey{"Set-Cookie", "set-cookie"}
		}
	case len("content-type"):
		k = knownKey{hdrContentType, "content-type"}
	case len("cache-control"):
		k = knownKey{"Cache-Control", "cache-control"}
		if name[0]|0x20 == 'l' {
			k = knownKey{"Last-Modified", "last-modified"}
		}
	case len("content-length"):
		k = knownKey{hdrContentLength, "content-length"}
	case len("transfer-encoding"):
		k = knownKey{hdrTransferEncoding, "transfer-encoding"}
	default:
		return ""
	}
	// Upstreams mostly send the canonical or the lower-case spelling, which one comparison
	// each finds (byte by byte, a name cost about 90 instructions).
	if string(name) != k.key && string(name) != k.lower && !http1.EqualFold(name, k.lower) {
		return ""
	}
	return k.key
}

// knownKey is a header name's canonical key and its lower-case form.
type knownKey struct{ key, lower string }

// canonicalKey returns the canonical MIME form of a valid token header name (net/http's
// form, which the route package expects). Already canonical names are returned as they are.
func canonicalKey(name string) string {
	upper := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (upper && 'a' <= c && c <= 'z') || (!upper && 'A' <= c && c <= 'Z') {
			return canonicalSlow(name)
		}
		upper = c == '-'
	}
	return name
}

func canonicalSlow(name string) string {
	if k := commonKey(name); k != "" {
		return k
	}
	var stack [64]byte
	var buf []byte
	if len(name) <= len(stack) {
		buf = stack[:len(name)]
	} else {
		buf = make([]byte, len(name))
	}
	upper := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
		upper = c == '-'
	}
	return string(buf)
}

// bytesString views b as a string without copying. The caller guarantees b is not modified
// while the string is in use.
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
