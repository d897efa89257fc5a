package http1

// text is what the parsers take: the downstream reader hands out strings viewing its buffer,
// the upstream one byte slices of its bufio.Reader.
type text interface{ ~string | ~[]byte }

// tokenChars marks the characters allowed in a token (RFC 9110 §5.6.2).
var tokenChars = alnumAnd("!#$%&'*+-.^_`|~")

// authorityChars marks the characters of a URI authority without userinfo (RFC 3986 §3.2:
// unreserved, pct-encoded, sub-delims, ':' and the brackets of an IP literal).
var authorityChars = alnumAnd("-._~%!$&'()*+,;=:[]")

// alnumAnd returns a table marking ASCII letters and digits and the characters of extra.
func alnumAnd(extra string) (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range extra {
		t[c] = true
	}
	return t
}

// IsTokenChar reports whether c may appear in a token.
func IsTokenChar(c byte) bool { return tokenChars[c] }

// ValidToken reports whether s is a non-empty token: a method, a field name, a coding.
func ValidToken[T text](s T) bool {
	if len(s) == 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tokenChars[s[i]] {
			return false
		}
	}
	return true
}

// ValidValue reports whether s may be a field value: no control character other than HTAB,
// and no DEL (RFC 9110 §5.5; obs-text is allowed). Eight bytes are checked at once
// (badValueBytes): byte by byte, the check was most of a field's parsing cost.
func ValidValue[T text](s T) bool {
	for len(s) >= 8 {
		x := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		if badValueBytes(x) != 0 {
			return false
		}
		s = s[8:]
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// load64 reads b's eight bytes as a little-endian word (one load: the compiler merges them).
func load64[T text](b T) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// notNameBytes sets the high bit of each byte of x that is not an ASCII letter, digit or
// '-', the characters of nearly every field name (the other token characters are left to
// tokenChars). As in badValueBytes, each test runs on the low seven bits, where no addition
// carries into the next byte, and bytes with the high bit set are never name bytes.
func notNameBytes(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	low := x &^ highs
	folded := low | 0x20*ones // letters in lower case
	letter := (folded + (0x80-'a')*ones) &^ (folded + (0x80-'z'-1)*ones)
	digit := (low + (0x80-'0')*ones) &^ (low + (0x80-'9'-1)*ones)
	dash := ^((low ^ '-'*ones) + 0x7f*ones)
	return ^((letter | digit | dash) &^ x) & highs
}

// colonBytes sets the high bit of the first byte of x that is ':' (and maybe of bytes after
// it: a borrow from the first carries into the next byte).
func colonBytes(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	y := x ^ ':'*ones
	return (y - ones) &^ y & highs
}

// notHostBytes sets the high bit of each byte of x that is not an ASCII letter, digit, '.',
// '-' or ':', the characters of nearly every Host (the other authority characters are left
// to authorityChars). The tests run on the low seven bits, as in notNameBytes.
func notHostBytes(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	low := x &^ highs
	folded := low | 0x20*ones // letters in lower case
	letter := (folded + (0x80-'a')*ones) &^ (folded + (0x80-'z'-1)*ones)
	punct := (low + (0x80-'-')*ones) &^ (low + (0x80-':'-1)*ones) // '-' to ':': "-./0123456789:"
	slash := ^((low ^ '/'*ones) + 0x7f*ones)
	return ^((letter | punct&^slash) &^ x) & highs
}

// badValueBytes sets the high bit of each byte of x that a field value may not hold: below
// SP but not HTAB, or DEL. Bytes with the high bit set (obs-text) are allowed, so the tests
// run on the low seven bits, where adding at most 0x80 carries into no other byte.
func badValueBytes(x uint64) uint64 {
	return controlBytes(x) &^ tabBytes(x)
}

// controlBytes sets the high bit of each byte of x below SP or DEL: badValueBytes with HTAB
// too, which CutField tells apart at the one byte it finds (most values have no HTAB, and
// leaving it out of the word's test saves four operations a word).
func controlBytes(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	low := x &^ highs
	return (^(low + (0x80-' ')*ones) | (low + ones)) & highs &^ x
}

// tabBytes sets the high bit of each byte of x that is HTAB.
func tabBytes(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	low := x &^ highs
	return ^((low ^ '\t'*ones) + 0x7f*ones) & highs &^ x
}

// ValidTarget reports whether s may be written as a request target: not empty, and without
// a space or control character, which would end the request line early or smuggle another
// line (what nghttp2 checks of an HTTP/2 :path).
func ValidTarget(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// ValidAuthority reports whether s may be a Host or :authority value: host and optional
// port, without userinfo (RFC 9112 §3.2, RFC 9110 §4.2.4: "user:pw@" is refused, since it
// would reach the upstream as part of the host). The empty value is valid (RFC 9112 §3.2 for
// targets without an authority).
func ValidAuthority[T text](s T) bool {
	if n := len(s); n >= 8 {
		// Most hosts are letters, digits, dots, dashes and a colon, which are tested eight
		// bytes at a time (notHostBytes), the last word overlapping the one before: the
		// table lookups below were about 120 instructions of "127.0.0.1:28302", a Host on
		// every request. A word with another byte is left to them.
		i := 0
		for i+8 <= n && notHostBytes(load64(s[i:i+8])) == 0 {
			i += 8
		}
		if i == n || (i+8 > n && notHostBytes(load64(s[n-8:])) == 0) {
			return true
		}
	}
	// Four bytes are looked up at once, their entries and-ed for one test: a test a byte was
	// about 130 instructions of "127.0.0.1:8080".
	i := 0
	for ; i+4 <= len(s); i += 4 {
		if authorityBytes[s[i]]&authorityBytes[s[i+1]]&authorityBytes[s[i+2]]&authorityBytes[s[i+3]] == 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if !authorityChars[s[i]] {
			return false
		}
	}
	return true
}

// authorityBytes is authorityChars as bytes (1 for true), which can be and-ed.
var authorityBytes = func() (t [256]uint8) {
	for c, ok := range authorityChars {
		if ok {
			t[c] = 1
		}
	}
	return t
}()

// EqualFold reports whether s equals the lower-case ASCII string lower, ignoring case.
func EqualFold[T text](s T, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != lower[i] && !('A' <= c && c <= 'Z' && c+'a'-'A' == lower[i]) {
			return false
		}
	}
	return true
}

// TrimOWS removes optional whitespace (SP and HTAB) around s.
func TrimOWS[T text](s T) T {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// CutList returns the first element of a comma-separated list, trimmed, and the rest.
func CutList[T text](s T) (elem, rest T) {
	for i := 0; i < len(s); i++ {
		if s[i] == ',' {
			return TrimOWS(s[:i]), s[i+1:]
		}
	}
	return TrimOWS(s), s[len(s):]
}

// HasToken reports whether the comma-separated list s holds token (lower case), ignoring
// case and parameters after ';'.
func HasToken[T text](s T, token string) bool {
	for len(s) > 0 {
		var e T
		e, s = CutList(s)
		if EqualFold(TrimOWS(cutParams(e)), token) {
			return true
		}
	}
	return false
}

func cutParams[T text](s T) T {
	for i := 0; i < len(s); i++ {
		if s[i] == ';' {
			return s[:i]
		}
	}
	return s
}

func indexByte[T text](s T, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}
