package h2client

import (
	"strconv"
	"strings"

	"github.com/legateproxy/legate/internal/h2wire"
)

// Field is one request header field. Names may be in any case; the encoder writes them in
// lower case, as HTTP/2 requires.
type Field struct {
	Name, Value string
}

// The head is written without a dynamic table (h2wire's encoder, shared with the server).

// appendRequestHead encodes the header block of r.
func appendRequestHead(b []byte, r *Request) []byte {
	switch r.Method {
	case "GET":
		b = h2wire.AppendIndexed(b, h2wire.IdxMethod)
	case "POST":
		b = h2wire.AppendIndexed(b, h2wire.IdxMethodPOST)
	default:
		b = h2wire.AppendIndexedName(b, h2wire.IdxMethod, r.Method)
	}
	if r.Method != "CONNECT" {
		if r.Scheme == "https" {
			b = h2wire.AppendIndexed(b, h2wire.IdxSchemeTLS)
		} else {
			b = h2wire.AppendIndexed(b, h2wire.IdxSchemeHTTP)
		}
		if r.Path == "/" {
			b = h2wire.AppendIndexed(b, h2wire.IdxPath)
		} else {
			b = h2wire.AppendIndexedName(b, h2wire.IdxPath, r.Path)
		}
	}
	b = h2wire.AppendIndexedName(b, h2wire.IdxAuthority, r.Authority)
	for _, f := range r.Header {
		switch {
		case skipField(f.Name):
		case equalFold(f.Name, "te"):
			if equalFold(f.Value, "trailers") {
				b = h2wire.AppendLiteral(b, "te", "trailers")
			}
		default:
			b = h2wire.AppendLiteral(b, f.Name, f.Value)
		}
	}
	for k := range r.Trailer {
		if SendableTrailer(k) {
			b = h2wire.AppendLiteral(b, "trailer", k)
		}
	}
	if sendContentLength(r) {
		var n [20]byte
		digits := strconv.AppendInt(n[:0], r.ContentLength, 10)
		b = h2wire.AppendInt(b, 4, 0, h2wire.IdxContentLen)
		b = h2wire.AppendInt(b, 7, 0, uint64(len(digits)))
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
			b = h2wire.AppendLiteral(b, k, v)
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
