package pbjson

import (
	"encoding/base64"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// appendDouble formats a double as protobuf C++ does: %.15g when that reads
// back as the same value, else %.17g; NaN and infinities as quoted strings.
// Go's 'g' verb with an explicit precision follows C's %g rules (exponent
// form when the exponent is < -4 or >= the precision, trailing zeros removed,
// at least two exponent digits).
func appendDouble(b []byte, v float64) []byte {
	if s, ok := nonFinite(v); ok {
		return append(b, s...)
	}
	n := len(b)
	b = strconv.AppendFloat(b, v, 'g', 15, 64)
	if back, err := strconv.ParseFloat(string(b[n:]), 64); err == nil && back == v {
		return b
	}
	return strconv.AppendFloat(b[:n], v, 'g', 17, 64)
}

// appendFloat32 formats a float as protobuf C++ does: %.6g, else %.9g.
func appendFloat32(b []byte, v float32) []byte {
	if s, ok := nonFinite(float64(v)); ok {
		return append(b, s...)
	}
	n := len(b)
	b = strconv.AppendFloat(b, float64(v), 'g', 6, 32)
	if back, err := strconv.ParseFloat(string(b[n:]), 32); err == nil && float32(back) == v {
		return b
	}
	return strconv.AppendFloat(b[:n], float64(v), 'g', 9, 32)
}

func nonFinite(v float64) (string, bool) {
	switch {
	case math.IsNaN(v):
		return `"NaN"`, true
	case math.IsInf(v, 1):
		return `"Infinity"`, true
	case math.IsInf(v, -1):
		return `"-Infinity"`, true
	}
	return "", false
}

// appendBase64 writes standard base64 with padding, quoted.
func appendBase64(b []byte, data []byte) []byte {
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, data)
	return append(b, '"')
}

// asciiEscape holds, for each ASCII byte, its escape: a short escape, "u"
// for a \u00XX escape, or "" when the byte is written as is.
var asciiEscape = func() (t [utf8.RuneSelf]string) {
	for c := range 0x20 {
		t[c] = "u"
	}
	t[0x7f] = "u"
	t['<'], t['>'] = "u", "u"
	t['\n'], t['\r'], t['\t'], t['\f'], t['\b'] = `\n`, `\r`, `\t`, `\f`, `\b`
	t['"'], t['\\'] = `\"`, `\\`
	return t
}()

// badUTF8 marks a byte sequence that does not decode.
const badUTF8 rune = -1

// appendQuoted writes s as a JSON string with protobuf C++'s escaping:
// short escapes for " \ \n \r \t \f \b; \uXXXX (lowercase hex, surrogate
// pairs above the BMP) for controls, < and >, and a list of invisible or
// formatting code points; a single space for each sequence that does not
// decode. '/' is not escaped.
func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		var r rune
		n := 1
		if c < utf8.RuneSelf {
			if asciiEscape[c] == "" {
				i++
				continue
			}
			r = rune(c)
		} else {
			r, n = decodeScalar(s[i:])
			if r != badUTF8 && !mustEscape(r) {
				i += n
				continue
			}
		}
		b = append(b, s[start:i]...)
		b = appendEscape(b, r)
		i += n
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func appendEscape(b []byte, r rune) []byte {
	if r == badUTF8 {
		return append(b, ' ')
	}
	if r < utf8.RuneSelf {
		if esc := asciiEscape[r]; esc != "u" {
			return append(b, esc...)
		}
	}
	if r < 0x10000 {
		return appendUEscape(b, uint16(r))
	}
	hi := uint16((r >> 10) + 0xd800 - (0x10000 >> 10))
	lo := uint16((r & 0x3ff) + 0xdc00)
	return appendUEscape(appendUEscape(b, hi), lo)
}

func appendUEscape(b []byte, v uint16) []byte {
	const hex = "0123456789abcdef"
	return append(b, '\\', 'u', hex[v>>12], hex[v>>8&0xf], hex[v>>4&0xf], hex[v&0xf])
}

// decodeScalar decodes one multi-byte sequence the way protobuf C++'s JSON
// writer does. It checks only the shape of the sequence (a lead byte with 2,
// 3 or 4 leading ones, then as many continuation bytes) and the upper bound
// U+10FFFF; overlong forms and surrogates decode. On failure it returns
// badUTF8 and consumes the lead byte plus every byte examined, including the
// first one that is not a continuation byte.
func decodeScalar(s string) (rune, int) {
	lead := s[0]
	var follow int
	r := rune(lead)
	switch bits.LeadingZeros8(^lead) {
	case 2:
		follow, r = 1, r&0x1f
	case 3:
		follow, r = 2, r&0x0f
	case 4:
		follow, r = 3, r&0x07
	default:
		return badUTF8, 1
	}
	n := 1
	for range follow {
		if n >= len(s) {
			return badUTF8, n
		}
		c := s[n]
		n++
		if c>>6 != 2 {
			return badUTF8, n
		}
		r = r<<6 | rune(c&0x3f)
	}
	if r > utf8.MaxRune {
		return badUTF8, n
	}
	return r, n
}

// mustEscape reports whether a decoded non-ASCII-byte sequence is written as
// a \u escape. Overlong encodings of ASCII characters decode to ASCII and
// follow the ASCII rules.
func mustEscape(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiEscape[r] != ""
	}
	switch {
	case r <= 0x9f, r == 0xad,
		r >= 0x600 && r <= 0x603, r == 0x6dd, r == 0x70f,
		r == 0x17b4, r == 0x17b5,
		r >= 0x200b && r <= 0x200f, r >= 0x2028 && r <= 0x202e,
		r >= 0x2060 && r <= 0x2064, r >= 0x206a && r <= 0x206f,
		r == 0xfeff, r >= 0xfff9 && r <= 0xfffb,
		r >= 0x1d173 && r <= 0x1d17a,
		r == 0xe0001, r >= 0xe0020 && r <= 0xe007f:
		return true
	}
	return false
}
