package h2client

import (
	"strconv"
	"strings"
)

// Field is one request header field. Names may be in any case; the encoder writes them in
// lower case, as HTTP/2 requires.
type Field struct {
	Name, Value string
}

// HPACK static table indexes (RFC 7541 appendix A) of the fields a request head starts with.
const (
	idxAuthority  = 1
	idxMethodGET  = 2
	idxMethodPOST = 3
	idxPath       = 4
	idxPathRoot   = 4 // ":path: /" is the entry itself
	idxSchemeHTTP = 6
	idxSchemeTLS  = 7
	idxMethod     = 2
	idxContentLen = 28
)

// The encoder writes every field without indexing: Legate keeps no HPACK dynamic table for
// what it sends, so no header string outlives the request that lent it (the caller reuses the
// memory behind them), nothing is allocated, and the peer's decoder does no table work. The
// cost is a few bytes a field on the loopback or LAN links upstreams sit on; nginx's gRPC
// proxy makes the same trade.

// appendIndexed appends an indexed field (RFC 7541 §6.1).
func appendIndexed(b []byte, idx uint64) []byte {
	return appendInt(b, 7, 0x80, idx)
}

// appendIndexedName appends a literal field without indexing whose name is a static table
// entry (RFC 7541 §6.2.2).
func appendIndexedName(b []byte, idx uint64, value string) []byte {
	b = appendInt(b, 4, 0, idx)
	return appendString(b, value)
}

// appendLiteral appends a literal field without indexing with a literal name, written in lower
// case (RFC 7541 §6.2.2).
func appendLiteral(b []byte, name, value string) []byte {
	b = append(b, 0)
	b = appendInt(b, 7, 0, uint64(len(name)))
	b = append(b, name...)
	tail := b[len(b)-len(name):]
	for i, c := range tail { // copied whole, then lowered in place: names are mostly lower case
		if c-'A' < 26 {
			tail[i] = c + 'a' - 'A'
		}
	}
	return appendString(b, value)
}

// appendString appends a string literal without Huffman coding.
func appendString(b []byte, s string) []byte {
	b = appendInt(b, 7, 0, uint64(len(s)))
	return append(b, s...)
}

// appendInt appends an HPACK integer with an n-bit prefix; first holds the bits above it.
func appendInt(b []byte, n uint, first byte, v uint64) []byte {
	limit := uint64(1)<<n - 1
	if v < limit {
		return append(b, first|byte(v))
	}
	b = append(b, first|byte(limit))
	v -= limit
	for v >= 128 {
		b = append(b, byte(v&0x7f|0x80))
		v >>= 7
	}
	return append(b, byte(v))
}

// appendRequestHead encodes the header block of r.
func appendRequestHead(b []byte, r *Request) []byte {
	switch r.Method {
	case "GET":
		b = appendIndexed(b, idxMethodGET)
	case "POST":
		b = appendIndexed(b, idxMethodPOST)
	default:
		b = appendIndexedName(b, idxMethod, r.Method)
	}
	if r.Method != "CONNECT" {
		if r.Scheme == "https" {
			b = appendIndexed(b, idxSchemeTLS)
		} else {
			b = appendIndexed(b, idxSchemeHTTP)
		}
		if r.Path == "/" {
			b = appendIndexed(b, idxPathRoot)
		} else {
			b = appendIndexedName(b, idxPath, r.Path)
		}
	}
	b = appendIndexedName(b, idxAuthority, r.Authority)
	for _, f := range r.Header {
		switch {
		case skipField(f.Name):
		case equalFold(f.Name, "te"):
			if equalFold(f.Value, "trailers") {
				b = appendLiteral(b, "te", "trailers")
			}
		default:
			b = appendLiteral(b, f.Name, f.Value)
		}
	}
	for k := range r.Trailer {
		if SendableTrailer(k) {
			b = appendLiteral(b, "trailer", k)
		}
	}
	if sendContentLength(r) {
		var n [20]byte
		digits := strconv.AppendInt(n[:0], r.ContentLength, 10)
		b = appendInt(b, 4, 0, idxContentLen)
		b = appendInt(b, 7, 0, uint64(len(digits)))
		b = append(b, digits...)
	}
	return b
}

// sendContentLength reports whether the head announces content-length: for a known non-empty
// body, and for an empty one of the methods that usually carry one.
func sendContentLength(r *Request) bool {
	switch {
	case r.ContentLength > 0:
		return true
	case r.ContentLength < 0:
		return false
	}
	switch r.Method {
	case "POST", "PUT", "PATCH":
		return true
	}
	return false
}

// appendTrailers encodes the trailer section from the fields of t that may be trailers.
func appendTrailers(b []byte, t map[string][]string) []byte {
	for k, vs := range t {
		if !SendableTrailer(k) {
			continue
		}
		for _, v := range vs {
			b = appendLiteral(b, k, v)
		}
	}
	return b
}

// skipField reports the fields the encoder leaves out: those the head's pseudo-fields or
// framing carry (host, content-length, transfer-encoding), the connection-specific ones
// HTTP/2 forbids, and pseudo-fields the caller passed by mistake.
func skipField(name string) bool {
	if name == "" || name[0] == ':' {
		return true
	}
	for _, s := range [...]string{"host", "content-length", "transfer-encoding", "connection", "keep-alive", "proxy-connection", "upgrade"} {
		if equalFold(name, s) {
			return true
		}
	}
	return false
}

// SendableTrailer reports whether a field may be sent as a trailer (RFC 9110 §6.5.1: not
// framing, routing, authentication or connection fields).
func SendableTrailer(k string) bool {
	if skipField(k) {
		return false
	}
	for _, s := range [...]string{"te", "trailer", "authorization", "cache-control", "content-encoding", "content-range", "content-type", "expect", "max-forwards", "pragma", "proxy-authenticate", "proxy-authorization", "range", "www-authenticate"} {
		if equalFold(k, s) {
			return false
		}
	}
	return !strings.HasPrefix(k, ":")
}

// equalFold compares ASCII strings case-insensitively.
func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if x|0x20 != y|0x20 || (x|0x20) < 'a' || (x|0x20) > 'z' {
			return false
		}
	}
	return true
}
