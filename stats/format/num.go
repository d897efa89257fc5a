package format

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// appendShortest formats v like fmt's "{}" for doubles: shortest round-trip
// digits, fixed notation for decimal exponents in [-4, 16), else 1e+16 style;
// nan and inf spelled out.
func appendShortest(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, "nan"...)
	case math.IsInf(v, 1):
		return append(b, "inf"...)
	case math.IsInf(v, -1):
		return append(b, "-inf"...)
	}
	if v == 0 {
		return strconv.AppendFloat(b, v, 'f', -1, 64)
	}
	if e := exp10(v); e >= -4 && e < 16 {
		return strconv.AppendFloat(b, v, 'f', -1, 64)
	}
	return strconv.AppendFloat(b, v, 'e', -1, 64)
}

// exp10 is the decimal exponent of v's shortest representation.
func exp10(v float64) int {
	var buf [32]byte
	s := strconv.AppendFloat(buf[:0], v, 'e', -1, 64)
	i := len(s) - 1
	for s[i] != 'e' {
		i--
	}
	e, _ := strconv.Atoi(string(s[i+1:]))
	return e
}

// appendJSONDouble formats v as libc++'s std::to_chars shortest form, which
// Envoy's JSON streamer uses: the shorter of fixed and scientific notation,
// fixed on a tie (300000 → 3e+05, 10000 → 10000); NaN is null.
func appendJSONDouble(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, "null"...)
	}
	var fb, eb [64]byte
	f := strconv.AppendFloat(fb[:0], v, 'f', -1, 64)
	e := strconv.AppendFloat(eb[:0], v, 'e', -1, 64)
	if len(e) < len(f) {
		return append(b, e...)
	}
	return append(b, f...)
}

// appendG formats v like C's printf("%.<prec>g"); nan for NaN.
func appendG(b []byte, v float64, prec int) []byte {
	if math.IsNaN(v) {
		return append(b, "nan"...)
	}
	if math.IsInf(v, 0) {
		if v > 0 {
			return append(b, "inf"...)
		}
		return append(b, "-inf"...)
	}
	return strconv.AppendFloat(b, v, 'g', prec, 64)
}

// appendJSONString writes s as a JSON string the way Envoy's streamer does:
// short escapes for " \ \b \f \n \r \t, \u00XX for other controls and for
// each byte of invalid UTF-8; valid non-ASCII is written as is.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] != '"' && s[i] != '\\' && s[i] < utf8.RuneSelf {
		i++
	}
	b = append(b, s[:i]...)
	for i < len(s) {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			b = append(b, c)
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = appendU00(b, c)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch c {
		case '"':
			b = append(b, `\"`...)
		case '\\':
			b = append(b, `\\`...)
		case '\b':
			b = append(b, `\b`...)
		case '\f':
			b = append(b, `\f`...)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		default:
			b = appendU00(b, c)
		}
		i++
	}
	return append(b, '"')
}

func appendU00(b []byte, c byte) []byte {
	const hex = "0123456789abcdef"
	return append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
}
