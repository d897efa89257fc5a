package httpproxy

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"unsafe"

	"github.com/legateproxy/legate/stats"
)

// Errors of the HTTP/1.1 request parser; each maps to Envoy's local reply for a codec error.
var (
	errHeadTooLarge = errors.New("request headers too large")
	errBadRequest   = errors.New("malformed HTTP/1 request")
	errTooManyHdrs  = errors.New("too many request headers")
	errNotImpl      = errors.New("unsupported transfer-encoding")
)

// readBufferSize is the read buffer each HTTP/1 connection keeps while idle. Larger heads
// grow it up to max_request_headers_kb for one request.
const readBufferSize = 2048

// reader buffers a downstream connection's input. It belongs to the connection's goroutine.
type reader struct {
	conn net.Conn
	buf  []byte
	r, w int
	max  int // the largest head accepted
	rx   *stats.Counter
	// scanned is how many buffered bytes from r are known not to end a request head.
	scanned int
}

func (rd *reader) buffered() int { return rd.w - rd.r }

// fill reads at least one more byte, compacting the buffer and growing it up to max (or up
// to need bytes of room) when it is full.
func (rd *reader) fill() error {
	if rd.r == rd.w {
		rd.r, rd.w = 0, 0
	}
	if rd.w == len(rd.buf) {
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
	}
	for {
		n, err := rd.conn.Read(rd.buf[rd.w:])
		rd.w += n
		if n > 0 {
			rd.rx.Add(uint64(n))
			return nil
		}
		if err != nil {
			return err
		}
	}
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

var crlfcrlf = []byte("\r\n\r\n")

// nextHead returns the next request head, up to and including the CRLF of its last header
// line, when the buffer holds all of it; otherwise nil (and errHeadTooLarge when it cannot
// fit). The bytes stay valid until the next fill. Empty lines before a request are skipped
// (RFC 9112 §2.2).
func (rd *reader) nextHead() ([]byte, error) {
	if rd.scanned == 0 {
		for rd.r < rd.w && (rd.buf[rd.r] == '\r' || rd.buf[rd.r] == '\n') {
			rd.r++
		}
	}
	b := rd.buf[rd.r:rd.w]
	from := max(rd.scanned-3, 0)
	if i := bytes.Index(b[from:], crlfcrlf); i >= 0 {
		end := from + i
		rd.r += end + 4
		rd.scanned = 0
		return b[:end+2], nil
	}
	rd.scanned = len(b)
	if len(b) >= rd.max {
		return nil, errHeadTooLarge
	}
	return nil, nil
}

// requestHead is what the connection manager needs from an HTTP/1 request head beyond its
// header map.
type requestHead struct {
	method, target string
	minor          int
	host           string
	hasHost        bool
	contentLength  int64 // -1 when absent
	chunked        bool
	close          bool // Connection: close, or HTTP/1.0 without keep-alive
	expect100      bool
	absolute       bool // the target was in absolute form
	teTrailers     bool // TE lists "trailers": the client takes a chunked trailer section

	// What upgrade.go decides an upgrade from.
	upgrade     string // the Upgrade header's value
	connUpgrade bool   // Connection lists "upgrade"
}

// hasTrailersToken reports whether a TE value lists "trailers" (RFC 9110 §10.1.4).
func hasTrailersToken(v string) bool {
	for v != "" {
		var t string
		t, v, _ = strings.Cut(v, ",")
		if t, _, _ = strings.Cut(t, ";"); equalFold(strings.Trim(t, " \t"), "trailers") {
			return true
		}
	}
	return false
}

// Canonical names of the headers the codec interprets.
const (
	hdrHost             = "Host"
	hdrContentLength    = "Content-Length"
	hdrTransferEncoding = "Transfer-Encoding"
	hdrConnection       = "Connection"
	hdrExpect           = "Expect"
	hdrKeepAlive        = "Keep-Alive"
	hdrProxyConnection  = "Proxy-Connection"
	hdrUpgrade          = "Upgrade"
	hdrTE               = "Te"
	hdrTrailer          = "Trailer"
)

// parseHead parses a request head (as returned by readHead, copied to stable memory) into
// head and h. Header values are substrings of s; vals is per-stream storage for one-value
// slices, so that the common case does not allocate.
func parseHead(s string, h http.Header, vals *[]string, maxHeaders int) (requestHead, error) {
	head := requestHead{contentLength: -1}
	line, rest, ok := cutCRLF(s)
	if !ok {
		return head, errBadRequest
	}
	if err := parseRequestLine(line, &head); err != nil {
		return head, err
	}
	var connTokens string
	n := 0
	for rest != "" {
		line, rest, ok = cutCRLF(rest)
		if !ok {
			return head, errBadRequest
		}
		if line == "" {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			return head, errBadRequest // obsolete line folding
		}
		colon := indexByte(line, ':')
		if colon <= 0 || !validToken(line[:colon]) {
			return head, errBadRequest
		}
		if n++; n > maxHeaders {
			return head, errTooManyHdrs
		}
		key := canonicalKey(line[:colon])
		value := trimOWS(line[colon+1:])
		if !validValue(value) {
			return head, errBadRequest
		}
		switch key {
		case hdrHost:
			if head.absolute {
				continue // the target's authority wins (RFC 9112 §3.2.2)
			}
			if head.hasHost && head.host != value {
				return head, errBadRequest
			}
			head.host, head.hasHost = value, true
			continue
		case hdrContentLength:
			cl, err := strconv.ParseInt(value, 10, 64)
			if err != nil || cl < 0 || (head.contentLength >= 0 && cl != head.contentLength) {
				return head, errBadRequest
			}
			head.contentLength = cl
		case hdrTransferEncoding:
			if !equalFold(value, "chunked") || head.chunked {
				return head, errNotImpl
			}
			head.chunked = true
			continue
		case hdrConnection:
			if connTokens == "" {
				connTokens = value
			} else {
				connTokens += "," + value
			}
			continue
		case hdrExpect:
			if equalFold(value, "100-continue") {
				head.expect100 = true
				continue
			}
		case hdrTE:
			head.teTrailers = head.teTrailers || hasTrailersToken(value)
			continue // hop-by-hop: not forwarded
		case hdrUpgrade:
			head.upgrade = value
			continue // hop-by-hop: forwarded only by an upgrade (upgrade.go)
		case hdrKeepAlive, hdrProxyConnection:
			continue // hop-by-hop: not forwarded
		}
		addValue(h, vals, key, value)
	}
	if head.chunked && head.contentLength >= 0 {
		return head, errBadRequest // RFC 9112 §6.3: a request with both is an attack vector
	}
	if head.chunked {
		h.Del(hdrContentLength)
	}
	head.close = head.minor == 0
	for connTokens != "" {
		var tok string
		tok, connTokens = cutComma(connTokens)
		switch {
		case equalFold(tok, "close"):
			head.close = true
		case equalFold(tok, "keep-alive"):
			if head.minor == 0 {
				head.close = false
			}
		case equalFold(tok, "upgrade"):
			head.connUpgrade = true
		case tok != "" && validToken(tok):
			h.Del(tok) // a header named by Connection is hop-by-hop
		}
	}
	return head, nil
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

func parseRequestLine(line string, head *requestHead) error {
	sp1 := indexByte(line, ' ')
	if sp1 <= 0 {
		return errBadRequest
	}
	head.method = line[:sp1]
	if !validToken(head.method) {
		return errBadRequest
	}
	line = line[sp1+1:]
	sp2 := indexByte(line, ' ')
	if sp2 <= 0 {
		return errBadRequest
	}
	head.target = line[:sp2]
	switch line[sp2+1:] {
	case "HTTP/1.1":
		head.minor = 1
	case "HTTP/1.0":
		head.minor = 0
	default:
		return errBadRequest
	}
	t := head.target
	switch {
	case head.method == http.MethodConnect:
		return parseConnectTarget(head) // authority-form (RFC 9112 §3.2.3)
	case t[0] == '/':
	case t == "*" && head.method == http.MethodOptions:
	case hasPrefixFold(t, "http://") || hasPrefixFold(t, "https://"):
		// absolute-form: the authority comes from the target (RFC 9112 §3.2.2).
		rest := t[indexByte(t, ':')+3:]
		slash := indexByte(rest, '/')
		if slash < 0 {
			head.host, head.target = rest, "/"
		} else {
			head.host, head.target = rest[:slash], rest[slash:]
		}
		head.hasHost, head.absolute = true, true
	default:
		return errBadRequest
	}
	for i := 0; i < len(head.target); i++ {
		if c := head.target[i]; c <= ' ' || c == 0x7f {
			return errBadRequest
		}
	}
	return nil
}

func cutCRLF(s string) (line, rest string, ok bool) {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '\r' {
			if s[i+1] != '\n' {
				return "", "", false
			}
			return s[:i], s[i+2:], true
		}
		if s[i] == '\n' {
			return "", "", false
		}
	}
	return "", "", false
}

func cutComma(s string) (tok, rest string) {
	i := indexByte(s, ',')
	if i < 0 {
		return trimOWS(s), ""
	}
	return trimOWS(s[:i]), s[i+1:]
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func trimOWS(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// tokenChars marks the characters allowed in an HTTP token (RFC 9110 §5.6.2).
var tokenChars = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tokenChars[s[i]] {
			return false
		}
	}
	return true
}

func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && equalFold(s[:len(prefix)], prefix)
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// commonKeys interns the canonical form of frequent header names so that lower-case names
// (HTTP/2 clients, curl's custom headers) canonicalise without allocating.
var commonKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Cache-Control",
		"Connection", "Content-Length", "Content-Type", "Cookie", "Date", "Etag", "Expect",
		"Host", "If-Modified-Since", "If-None-Match", "Keep-Alive", "Last-Modified", "Location",
		"Origin", "Pragma", "Proxy-Connection", "Range", "Referer", "Server", "Set-Cookie", "Te",
		"Transfer-Encoding", "Upgrade", "User-Agent", "Via", "X-Forwarded-For",
		"X-Forwarded-Proto", "X-Request-Id", "X-Envoy-Internal", "X-Envoy-Expected-Rq-Timeout-Ms",
		"X-Envoy-Upstream-Service-Time", "X-Envoy-Retry-On", "X-Envoy-Max-Retries",
		"X-Envoy-Upstream-Rq-Timeout-Ms", "X-Envoy-Original-Path", "Grpc-Status", "Grpc-Message",
	} {
		m[k] = k
	}
	return m
}()

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
	if k, ok := commonKeys[string(buf)]; ok {
		return k
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
