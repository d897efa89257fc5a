package http1

import (
	"bytes"
	"errors"
	"math/bits"
	"net"
	"strings"
)

// Errors of the parsers. Callers map them to their replies: ErrMalformed to 400 downstream
// (upstream_cx_protocol_error upstream), ErrUnsupportedCoding to 501, ErrTooManyFields to 431.
var (
	ErrMalformed         = errors.New("malformed HTTP/1 message")
	ErrUnsupportedCoding = errors.New("unsupported transfer-coding")
	ErrTooManyFields     = errors.New("too many header fields")
)

// HeadEnd finds the end of a head in b: it returns the offset just past the empty line
// (CRLF CRLF) ending it, or -1 when b does not hold all of it yet. from is how many bytes of
// b an earlier call already scanned. While the end is missing, a bare LF or CR is reported as
// ErrMalformed at once rather than leaving the reader waiting for a CRLF CRLF that a bare-LF
// client never sends; in a complete head, ParseRequestHead finds them.
func HeadEnd(b []byte, from int) (int, error) {
	from = max(from-3, 0)
	// The first CRLF CRLF is the one whose first LF comes first: LFs are searched for and
	// the bytes around each compared (a search for the whole CRLF CRLF stopped at every CR
	// and cost about 500 instructions of a short request head).
	for i := from + 1; i < len(b); {
		lf := bytes.IndexByte(b[i:], '\n')
		if lf < 0 {
			break
		}
		i += lf
		if i+2 < len(b) && b[i-1] == '\r' && b[i+1] == '\r' && b[i+2] == '\n' {
			return i + 3, nil
		}
		i++
	}
	if bareLineEnd(b, from) {
		return -1, ErrMalformed
	}
	return -1, nil
}

// bareLineEnd reports whether b, from offset from, holds an LF not preceded by CR or a CR
// not followed by LF (a CR that ends b may still be followed by its LF).
func bareLineEnd(b []byte, from int) bool {
	for i := max(from-1, 0); i < len(b); i++ {
		switch b[i] {
		case '\n':
			if i == 0 || b[i-1] != '\r' {
				return true
			}
		case '\r':
			if i+1 < len(b) && b[i+1] != '\n' {
				return true
			}
		}
	}
	return false
}

// CutLine returns the first CRLF-terminated line of s and the rest. ok is false when s holds
// no CRLF, or a bare LF comes first.
func CutLine(s string) (line, rest string, ok bool) {
	i := strings.IndexByte(s, '\n')
	if i <= 0 || s[i-1] != '\r' {
		return "", "", false
	}
	return s[:i-1], s[i+1:], true
}

// SplitField splits a field line "name: value", trimming the value's optional whitespace.
// It refuses obsolete line folding, a name that is not a token (including whitespace before
// the colon, RFC 9112 §5.1) and a value with a control character.
func SplitField[T text](line T) (name, value T, err error) {
	colon := 0
	for colon < len(line) && tokenChars[line[colon]] {
		colon++
	}
	// A folded line starts with SP or HTAB, so it has no name.
	if colon == 0 || colon == len(line) || line[colon] != ':' {
		return line[:0], line[:0], ErrMalformed
	}
	value = TrimOWS(line[colon+1:])
	if !ValidValue(value) {
		return line[:0], line[:0], ErrMalformed
	}
	return line[:colon], value, nil
}

// CutField parses the field line "name: value" CRLF at the start of b in one pass, the way
// SplitField and a search for the line's end would together: the name must be a token
// followed by a colon, the value (its optional whitespace trimmed) must hold no control
// character but HTAB and no DEL, and the line must end in CRLF. It also finds which known
// name the name is (KnownName). The colon is searched for first, eight bytes at a time; a
// name of a known one's first letter and length is compared with it (a word at a time), and
// when it is that name it is a token: only the other names are checked a character at a
// time (eight at once for letters, digits and dashes). Checking every name's characters
// first, then finding which known name it was, was about 60 instructions more of a known
// name. The value is checked eight bytes at a time too, and the first byte it may not hold
// must be the line's CR: the line's end is found by the check itself rather than by a scan
// of its own. It returns the name's end, the value's bounds, the offset just past the CRLF
// and the name's Known; ok is false when b does not start with such a line (an empty line,
// a malformed one, one ending in a bare LF, or one not whole in b), which the caller then
// reads the way it reads any line.
func CutField[T text](b T) (nameEnd, valueStart, valueEnd, next int, k Known, ok bool) {
	i := 0
	for {
		if i+8 > len(b) {
			for i < len(b) && b[i] != ':' {
				i++
			}
			break
		}
		if m := colonBytes(load64(b[i : i+8])); m != 0 {
			i += bits.TrailingZeros64(m) >> 3
			break
		}
		i += 8
	}
	if i == len(b) || i == 0 {
		return 0, 0, 0, 0, Unknown, false
	}
	if slot := knownSlot(b[0], i); int(knownLens[slot]) == i {
		// The words from the name's start, the bytes past the name masked off
		// (knownWords): one for most names, two, or four; a name too close to b's end for
		// them is compared the long way.
		w := &knownWords[slot]
		var d uint64
		switch {
		case i <= 8 && len(b) >= 8:
			d = (load64(b[0:8])&w[0].mask | w[0].fold) ^ w[0].want
		case i <= 16 && len(b) >= 16:
			d = ((load64(b[0:8]) | w[0].fold) ^ w[0].want) | ((load64(b[8:16])&w[1].mask | w[1].fold) ^ w[1].want)
		case len(b) >= maxFoldName:
			d = ((load64(b[0:8]) | w[0].fold) ^ w[0].want) | ((load64(b[8:16]) | w[1].fold) ^ w[1].want) |
				((load64(b[16:24])&w[2].mask | w[2].fold) ^ w[2].want) | ((load64(b[24:32])&w[3].mask | w[3].fold) ^ w[3].want)
		default:
			d = uint64(b2u(KnownName(b[:i]) == Unknown))
		}
		if d == 0 {
			k = knownSlots[slot].known
		}
	}
	if k == Unknown && !validName(b[:i]) {
		return 0, 0, 0, 0, Unknown, false
	}
	nameEnd = i
	i++
	for i < len(b) && b[i] <= ' ' && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	valueStart = i
	for {
		if i+8 > len(b) {
			if len(b) < 8 {
				for i < len(b) && !((b[i] < ' ' && b[i] != '\t') || b[i] == 0x7f) {
					i++
				}
				break
			}
			// The last eight bytes, those before i shifted out: the value's last bytes,
			// the line's end among them, are checked at once rather than one by one.
			if m := controlBytes(load64(b[len(b)-8:])) >> (8 * (i + 8 - len(b))); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				if b[i] == '\t' {
					i++
					continue
				}
			} else {
				i = len(b)
			}
			break
		}
		x := load64(b[i : i+8])
		if m := controlBytes(x); m != 0 {
			shift := bits.TrailingZeros64(m) &^ 7
			i += shift >> 3
			if uint16(x>>shift) == '\r'|'\n'<<8 {
				goto crlf // the line's end, both bytes in the word
			}
			if byte(x>>shift) != '\t' {
				break
			}
			i++ // HTAB, which a value may hold: the scan goes on past it
			continue
		}
		i += 8
	}
	if i+1 >= len(b) || b[i] != '\r' || b[i+1] != '\n' {
		return 0, 0, 0, 0, Unknown, false
	}
crlf:
	valueEnd = i
	// The value's last byte is SP or HTAB, or printable (no other byte below SP is in it).
	for valueEnd > valueStart && b[valueEnd-1] <= ' ' {
		valueEnd--
	}
	return nameEnd, valueStart, valueEnd, i + 2, k, true
}

// b2u is 1 for true, 0 for false.
func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// validName reports whether name, not empty, is a token: letters, digits and dashes are
// checked eight at a time (notNameBytes), the token's other characters one at a time.
func validName[T text](name T) bool {
	i := 0
	for i+8 <= len(name) {
		if m := notNameBytes(load64(name[i : i+8])); m != 0 {
			i += bits.TrailingZeros64(m) >> 3
			break
		}
		i += 8
	}
	for i < len(name) && tokenChars[name[i]] {
		i++
	}
	return i == len(name)
}

// RequestLine is a parsed request line (RFC 9112 §3).
type RequestLine struct {
	Method string
	// Target is the request target in origin form ("/path?query"), or "*" for OPTIONS; an
	// absolute-form target is reduced to its path and query, its authority going to Authority.
	// A CONNECT's authority-form target goes to Authority, leaving Target empty.
	Target    string
	Authority string // the authority of an absolute-form target
	Absolute  bool   // the target was in absolute form
	Minor     int    // 0 for HTTP/1.0, 1 for HTTP/1.1
}

// ParseRequestLine parses "method SP target SP HTTP/1.x". Only origin, absolute (http and
// https), authority (CONNECT) and asterisk (OPTIONS) forms are accepted; an absolute form with userinfo is refused
// (RFC 9112 §3.2.2 and RFC 9110 §4.2.4: its authority would become the Host).
func ParseRequestLine(line string) (RequestLine, error) {
	var rl RequestLine
	_, err := rl.parse(line, false)
	return rl, err
}

// parse is ParseRequestLine into rl, which is zero. With crlf, s is a whole head: the line
// ends in CRLF right after the version, and rest is what follows. The line's end is not
// searched for first: that search (strings.IndexByte) was about 70 instructions of a short
// request line, and a line whose method and target are valid cannot hold an LF before its
// version. The method is found and checked in one pass (GET by one comparison), the target
// too, and the version is compared as one word: a search for each space, then checks of
// the method and the target and a comparison of the version as a string, were about 180
// instructions of "GET / HTTP/1.1".
func (rl *RequestLine) parse(s string, crlf bool) (rest string, err error) {
	var sp1 int
	if len(s) >= 4 && load32(s) == 'G'|'E'<<8|'T'<<16|' '<<24 {
		sp1 = 3
	} else {
		for sp1 < len(s) && tokenChars[s[sp1]] {
			sp1++
		}
		if sp1 == 0 || sp1 == len(s) || s[sp1] != ' ' {
			return "", ErrMalformed
		}
	}
	rl.Method, s = s[:sp1], s[sp1+1:]
	// The target ends at its first space; a control byte, DEL or the end of s before it
	// make the line malformed (ValidTarget).
	sp2 := 0
	for sp2 < len(s) && s[sp2] > ' ' && s[sp2] != 0x7f {
		sp2++
	}
	if sp2 == 0 || sp2 == len(s) || s[sp2] != ' ' {
		return "", ErrMalformed
	}
	rl.Target, s = s[:sp2], s[sp2+1:]
	if crlf {
		if len(s) < len("HTTP/1.1\r\n") || s[8] != '\r' || s[9] != '\n' {
			return "", ErrMalformed
		}
		s, rest = s[:8], s[10:]
	} else if len(s) != len("HTTP/1.1") {
		return "", ErrMalformed
	}
	switch load64(s) {
	case http11:
		rl.Minor = 1
	case http10:
	default:
		return "", ErrMalformed
	}
	if rl.Target[0] == '/' && rl.Method != "CONNECT" {
		return rest, nil // origin form, nearly every request's
	}
	if err := rl.form(); err != nil {
		return "", err
	}
	return rest, nil
}

// form interprets a request target that is not in origin form, or a CONNECT's (whose
// authority form may start with '/' only to be refused).
func (rl *RequestLine) form() error {
	t := rl.Target
	switch {
	case rl.Method == "CONNECT":
		// authority-form (RFC 9112 §3.2.3): host:port is the authority; there is no path.
		host, port, err := net.SplitHostPort(t)
		if err != nil || host == "" || port == "" || !ValidAuthority(t) {
			return ErrMalformed
		}
		rl.Authority, rl.Target, rl.Absolute = t, "", true
	case t == "*" && rl.Method == "OPTIONS":
	case hasPrefixFold(t, "http://") || hasPrefixFold(t, "https://"):
		after := t[indexByte(t, ':')+3:] // past "://"
		end := len(after)
		for i := 0; i < len(after); i++ {
			if after[i] == '/' || after[i] == '?' {
				end = i
				break
			}
		}
		rl.Authority, rl.Target, rl.Absolute = after[:end], after[end:], true
		switch {
		case rl.Target == "":
			rl.Target = "/"
		case rl.Target[0] == '?':
			return ErrMalformed // keeps the target allocation-free: "/?q" would need a copy
		}
		if rl.Authority == "" || !ValidAuthority(rl.Authority) {
			return ErrMalformed
		}
	default:
		return ErrMalformed
	}
	return nil
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && EqualFold(s[:len(prefix)], prefix)
}

// RequestHead is what a server needs from a request head beyond its other fields.
type RequestHead struct {
	RequestLine
	Host    string // the target's authority, else the Host field's value
	HasHost bool
	Framing Framing
	// Close is set when the connection ends after this request: "Connection: close", or
	// HTTP/1.0 without "keep-alive".
	Close      bool
	Expect100  bool   // Expect: 100-continue
	TETrailers bool   // TE lists "trailers": the client takes a chunked trailer section
	Connection string // the Connection field's values, joined by commas
	// What an upgrade is decided from (RFC 9110 §7.8).
	Upgrade     string // the Upgrade field's value
	ConnUpgrade bool   // Connection lists "upgrade"
}

// ParseRequestHead parses a request head s: the request line and field lines, each ending in
// CRLF (the final empty line may be left off). It interprets the framing fields (Host,
// Content-Length, Transfer-Encoding, Connection, Expect: 100-continue, TE, Upgrade) and passes every
// other field, and Content-Length, to add in order, with the Known its name is (KnownName),
// so that the caller need not look at a known name again; add must not keep name or value
// beyond s.
// An HTTP/1.1 request without Host, or with a Host that is not a valid authority or that
// disagrees with another Host field, is malformed (RFC 9112 §3.2). More than maxFields
// fields give ErrTooManyFields. chunkedLength is Envoy's allow_chunked_length: a request
// with both Transfer-Encoding: chunked and Content-Length is read as chunked (its
// Content-Length, passed to add, is the caller's to drop) rather than refused.
func ParseRequestHead(s string, maxFields int, chunkedLength bool, add func(name, value string, k Known)) (RequestHead, error) {
	var rh RequestHead
	err := rh.Parse(s, maxFields, chunkedLength, add)
	return rh, err
}

// Parse is ParseRequestHead into rh, which it sets whole: the head (about twenty words) is
// not copied out, nor the request line into it, which was about 50 instructions a request
// before its caller copied it on again.
func (rh *RequestHead) Parse(s string, maxFields int, chunkedLength bool, add func(name, value string, k Known)) error {
	*rh = RequestHead{}
	rest, err := rh.RequestLine.parse(s, true)
	if err != nil {
		return err
	}
	if rh.Absolute {
		rh.Host, rh.HasHost = rh.Authority, true
	}
	var f Fields
	f.Reset()
	f.chunkedLength = chunkedLength
	for n := 0; rest != ""; n++ {
		var name, value string
		// A field line is taken in one pass (CutField); any other line, the empty one
		// included, is cut and split apart, which finds what is wrong with it.
		nameEnd, valueStart, valueEnd, next, k, ok := CutField(rest)
		if ok {
			if n == maxFields {
				return ErrTooManyFields
			}
			name, value, rest = rest[:nameEnd], rest[valueStart:valueEnd], rest[next:]
		} else {
			var line string
			if line, rest, ok = CutLine(rest); !ok {
				return ErrMalformed
			}
			if line == "" {
				break
			}
			if n == maxFields {
				return ErrTooManyFields
			}
			if name, value, err = SplitField(line); err != nil {
				return err
			}
			k = KnownName(name)
		}
		if err := rh.field(&f, name, value, k, add); err != nil {
			return err
		}
	}
	if !rh.HasHost && rh.Minor == 1 {
		return ErrMalformed
	}
	if rh.Framing, err = f.Request(rh.Minor); err != nil {
		return err
	}
	rh.Close = rh.Framing.Close
	return nil
}

// field interprets one field of a request head, whose name is k.
func (rh *RequestHead) field(f *Fields, name, value string, k Known, add func(name, value string, k Known)) error {
	switch k {
	case KnownHost:
		return rh.host(value)
	case KnownTE:
		rh.TETrailers = rh.TETrailers || HasToken(value, "trailers")
		return nil
	case KnownExpect:
		if EqualFold(value, "100-continue") {
			rh.Expect100 = true
			return nil
		}
	case KnownUpgrade:
		rh.Upgrade = value
		return nil
	case KnownConnection:
		rh.ConnUpgrade = f.Connection(value) || rh.ConnUpgrade
		if rh.Connection == "" {
			rh.Connection = value
		} else {
			rh.Connection += "," + value
		}
		return nil
	case KnownContentLength:
		if err := f.ContentLength(value); err != nil {
			return err
		}
	case KnownTransferEncoding:
		f.TransferEncoding(value)
		return nil
	}
	add(name, value, k)
	return nil
}

// host takes a Host field's value.
func (rh *RequestHead) host(value string) error {
	if !ValidAuthority(value) {
		return ErrMalformed
	}
	switch {
	case rh.Absolute: // the target's authority wins (RFC 9112 §3.2.2)
	case rh.HasHost && rh.Host != value:
		return ErrMalformed
	default:
		rh.Host, rh.HasHost = value, true
	}
	return nil
}

// ParseStatusLine parses "HTTP/1.x NNN reason" and returns the status code and the minor
// version. The version is compared as one word and the three digits without a loop: a
// comparison of the prefix, a switch on the minor version and a loop over the digits were
// about 70 instructions.
func ParseStatusLine[T text](line T) (status, minor int, err error) {
	if len(line) < 12 || line[8] != ' ' || (len(line) > 12 && line[12] != ' ') {
		return 0, 0, ErrMalformed
	}
	switch load64(line) {
	case http11:
		minor = 1
	case http10:
	default:
		return 0, 0, ErrMalformed
	}
	// Each digit's value, as unsigned: a byte below '0' wraps to a large one. A first digit
	// of 0 is a status below 100.
	d0, d1, d2 := uint(line[9])-'0', uint(line[10])-'0', uint(line[11])-'0'
	if d0-1 > 8 || d1 > 9 || d2 > 9 {
		return 0, 0, ErrMalformed
	}
	return int(d0*100 + d1*10 + d2), minor, nil
}

// http11 and http10 are "HTTP/1.1" and "HTTP/1.0" as load64 reads them.
const (
	http11 = 'H' | 'T'<<8 | 'T'<<16 | 'P'<<24 | '/'<<32 | '1'<<40 | '.'<<48 | '1'<<56
	http10 = 'H' | 'T'<<8 | 'T'<<16 | 'P'<<24 | '/'<<32 | '1'<<40 | '.'<<48 | '0'<<56
)
