package http1

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseRequestHead(t *testing.T) {
	tests := []struct {
		name   string
		head   string
		want   RequestHead
		fields []string
		err    error
	}{
		{
			name:   "origin form",
			head:   "GET /a?b=c HTTP/1.1\r\nHost: example.com\r\nUser-Agent: t\r\naccept:  */* \r\n",
			want:   RequestHead{RequestLine: RequestLine{Method: "GET", Target: "/a?b=c", Minor: 1}, Host: "example.com", HasHost: true},
			fields: []string{"User-Agent=t", "accept=*/*"},
		},
		{
			name: "absolute form wins over Host",
			head: "GET http://other.example:8080/x HTTP/1.1\r\nHost: ignored\r\n",
			want: RequestHead{RequestLine: RequestLine{Method: "GET", Target: "/x", Authority: "other.example:8080", Absolute: true, Minor: 1},
				Host: "other.example:8080", HasHost: true},
		},
		{
			name: "absolute form without path",
			head: "GET HTTPS://h HTTP/1.1\r\n",
			want: RequestHead{RequestLine: RequestLine{Method: "GET", Target: "/", Authority: "h", Absolute: true, Minor: 1}, Host: "h", HasHost: true},
		},
		{
			name: "http/1.0 without Host closes",
			head: "OPTIONS * HTTP/1.0\r\n",
			want: RequestHead{RequestLine: RequestLine{Method: "OPTIONS", Target: "*"}, Close: true, Framing: Framing{Close: true}},
		},
		{
			name: "framing fields",
			head: "POST /p HTTP/1.1\r\nHost: h\r\nConnection: close, X-Hop\r\nContent-Length: 5\r\nContent-Length: 5\r\nExpect: 100-continue\r\nTE: trailers;q=1\r\n",
			want: RequestHead{RequestLine: RequestLine{Method: "POST", Target: "/p", Minor: 1}, Host: "h", HasHost: true,
				Framing: Framing{Mode: Length, Length: 5, Close: true}, Close: true, Expect100: true, TETrailers: true, Connection: "close, X-Hop"},
			fields: []string{"Content-Length=5", "Content-Length=5"},
		},
		{
			name: "chunked",
			head: "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n",
			want: RequestHead{RequestLine: RequestLine{Method: "POST", Target: "/", Minor: 1}, Host: "h", HasHost: true, Framing: Framing{Mode: Chunked}},
		},
		{
			name: "CONNECT",
			head: "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n",
			want: RequestHead{RequestLine: RequestLine{Method: "CONNECT", Authority: "example.com:443", Absolute: true, Minor: 1}, Host: "example.com:443", HasHost: true},
		},
		{
			name: "upgrade",
			head: "GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n",
			want: RequestHead{RequestLine: RequestLine{Method: "GET", Target: "/ws", Minor: 1}, Host: "h", HasHost: true, Connection: "Upgrade", Upgrade: "websocket", ConnUpgrade: true},
		},
		{name: "CONNECT without port", head: "CONNECT example.com HTTP/1.1\r\nHost: h\r\n", err: ErrMalformed},
		{name: "CONNECT with userinfo", head: "CONNECT u@example.com:443 HTTP/1.1\r\nHost: h\r\n", err: ErrMalformed},
		{name: "missing Host", head: "GET / HTTP/1.1\r\n", err: ErrMalformed},
		{name: "two Hosts", head: "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n", err: ErrMalformed},
		{name: "Host with userinfo", head: "GET / HTTP/1.1\r\nHost: user@evil\r\n", err: ErrMalformed},
		{name: "Host with space", head: "GET / HTTP/1.1\r\nHost: a b\r\n", err: ErrMalformed},
		{name: "absolute form with userinfo", head: "GET http://user:pw@evil.example/ HTTP/1.1\r\nHost: a\r\n", err: ErrMalformed},
		{name: "absolute form with empty authority", head: "GET http:///x HTTP/1.1\r\n", err: ErrMalformed},
		{name: "conflicting lengths", head: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n", err: ErrMalformed},
		{name: "signed length", head: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +1\r\n", err: ErrMalformed},
		{name: "length and chunked", head: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n", err: ErrMalformed},
		{name: "gzip coding", head: "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n", err: ErrUnsupportedCoding},
		{name: "chunked twice", head: "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", err: ErrUnsupportedCoding},
		{name: "http/1.0 chunked", head: "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n", err: ErrMalformed},
		{name: "bad target", head: "GET x HTTP/1.1\r\nHost: h\r\n", err: ErrMalformed},
		{name: "method not a token", head: "GE(T / HTTP/1.1\r\nHost: h\r\n", err: ErrMalformed},
		{name: "version", head: "GET / HTTP/1.2\r\nHost: h\r\n", err: ErrMalformed},
		{name: "control in value", head: "GET / HTTP/1.1\r\nHost: h\r\nA: b\x01\r\n", err: ErrMalformed},
		{name: "bare CR in value", head: "GET / HTTP/1.1\r\nHost: h\r\nA: b\rc\r\n", err: ErrMalformed},
		{name: "folded line", head: "GET / HTTP/1.1\r\nHost: h\r\nA: b\r\n c\r\n", err: ErrMalformed},
		{name: "space before colon", head: "GET / HTTP/1.1\r\nHost : h\r\n", err: ErrMalformed},
		{name: "bare LF", head: "GET / HTTP/1.1\nHost: h\r\n", err: ErrMalformed},
		{name: "too many fields", head: "GET / HTTP/1.1\r\nHost: h\r\n" + strings.Repeat("A: 1\r\n", 6), err: ErrTooManyFields},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fields []string
			got, err := ParseRequestHead(tt.head, 6, false, func(name, value string, _ Known) { fields = append(fields, name+"="+value) })
			if !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
				t.Fatalf("ParseRequestHead() error = %v; want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseRequestHead() (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.fields, fields); diff != "" {
				t.Errorf("fields passed on (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHeadEnd(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int
		err  error
	}{
		{name: "complete", in: "GET / HTTP/1.1\r\nHost: a\r\n\r\nNEXT", want: len("GET / HTTP/1.1\r\nHost: a\r\n\r\n")},
		{name: "partial", in: "GET / HTTP/1.1\r\nHost: a\r\n", want: -1},
		{name: "ends in CR", in: "GET / HTTP/1.1\r", want: -1},
		{name: "bare LF head", in: "GET / HTTP/1.1\nHost: a\n\n", want: -1, err: ErrMalformed},
		{name: "bare CR", in: "GET / HTTP/1.1\rHost: a", want: -1, err: ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Scanning in steps must give what one scan gives.
			b := []byte(tt.in)
			got, err, scanned := -1, error(nil), 0
			for n := 1; n <= len(b); n++ {
				if got, err = HeadEnd(b[:n], scanned); got >= 0 || err != nil {
					break
				}
				scanned = n
			}
			if got != tt.want || !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
				t.Errorf("HeadEnd(%q) = %d, %v; want %d, %v", tt.in, got, err, tt.want, tt.err)
			}
		})
	}
}

// parseStatusLineBefore is ParseStatusLine as it was before it compared the version as one
// word: the reference FuzzParseStatusLine holds it to.
func parseStatusLineBefore(line []byte) (status, minor int, err error) {
	if len(line) < 12 || string(line[:7]) != "HTTP/1." || line[8] != ' ' ||
		(len(line) > 12 && line[12] != ' ') {
		return 0, 0, ErrMalformed
	}
	switch line[7] {
	case '0':
	case '1':
		minor = 1
	default:
		return 0, 0, ErrMalformed
	}
	for i := 9; i < 12; i++ {
		c := line[i]
		if c < '0' || c > '9' {
			return 0, 0, ErrMalformed
		}
		status = status*10 + int(c-'0')
	}
	if status < 100 {
		return 0, 0, ErrMalformed
	}
	return status, minor, nil
}

// FuzzParseStatusLine holds ParseStatusLine, on bytes and on a string, to
// parseStatusLineBefore.
func FuzzParseStatusLine(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK", "HTTP/1.0 404", "HTTP/1.1 099 X", "HTTP/1.2 200 OK", "HTTP/1.1 20",
		"HTTP/1.1 2000 OK", "http/1.1 200 OK", "HTTP/1.1 1/0 X", "HTTP/1.1 :00 X", "HTTP/1.1 100",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		ws, wm, werr := parseStatusLineBefore(line)
		for _, p := range []func([]byte) (int, int, error){ParseStatusLine[[]byte], func(b []byte) (int, int, error) { return ParseStatusLine(string(b)) }} {
			if s, m, err := p(line); s != ws || m != wm || (err == nil) != (werr == nil) {
				t.Errorf("ParseStatusLine(%q) = %d, %d, %v; want %d, %d, %v", line, s, m, err, ws, wm, werr)
			}
		}
	})
}

func TestParseStatusLine(t *testing.T) {
	for _, tt := range []struct {
		line          string
		status, minor int
		ok            bool
	}{
		{"HTTP/1.1 200 OK", 200, 1, true},
		{"HTTP/1.0 404", 404, 0, true},
		{"HTTP/1.1 101 Switching Protocols", 101, 1, true},
		{"HTTP/1.1 099 X", 0, 0, false},
		{"HTTP/1.2 200 OK", 0, 0, false},
		{"HTTP/1.1 20", 0, 0, false},
		{"HTTP/1.1 2000 OK", 0, 0, false},
		{"HTTP/2.0 200 OK", 0, 0, false},
	} {
		status, minor, err := ParseStatusLine(tt.line)
		if status != tt.status || minor != tt.minor || (err == nil) != tt.ok {
			t.Errorf("ParseStatusLine(%q) = %d, %d, %v; want %d, %d, ok %v", tt.line, status, minor, err, tt.status, tt.minor, tt.ok)
		}
	}
}

func TestValidators(t *testing.T) {
	for _, tt := range []struct {
		name string
		fn   func(string) bool
		in   string
		want bool
	}{
		{"token", ValidToken[string], "GET", true},
		{"token with space", ValidToken[string], "GET /evil", false},
		{"empty token", ValidToken[string], "", false},
		{"target", func(s string) bool { return ValidTarget(s) }, "/a?b=%20", true},
		{"target with space", func(s string) bool { return ValidTarget(s) }, "/x HTTP/1.1", false},
		{"target with CRLF", func(s string) bool { return ValidTarget(s) }, "/x\r\nA: b", false},
		{"authority", ValidAuthority[string], "[::1]:8080", true},
		{"authority with userinfo", ValidAuthority[string], "user:pw@evil.example", false},
		{"authority with slash", ValidAuthority[string], "a/b", false},
		{"value with tab and obs-text", ValidValue[string], "a\tb\xff", true},
		{"value with NUL", ValidValue[string], "a\x00", false},
		{"value with DEL", ValidValue[string], "a\x7f", false},
	} {
		if got := tt.fn(tt.in); got != tt.want {
			t.Errorf("%s: valid(%q) = %v; want %v", tt.name, tt.in, got, tt.want)
		}
	}
	if !HasToken("gzip, Close ;x=1", "close") || HasToken("closed", "close") {
		t.Error("HasToken does not find exactly the listed tokens")
	}
	if got := TrimOWS(" \ta b\t "); got != "a b" {
		t.Errorf("TrimOWS = %q; want %q", got, "a b")
	}
	if _, _, err := SplitField(strings.Repeat("x", 3)); err == nil {
		t.Error("SplitField accepted a line without a colon")
	}
}

// TestValidValueWordwise checks the eight-bytes-at-once value check against the byte-wise
// rule for every byte value at every position of values 1 to 17 bytes long, so that each
// byte is seen in a whole word and in the tail, next to allowed and refused neighbours.
func TestValidValueWordwise(t *testing.T) {
	byteWise := func(b []byte) bool {
		for _, c := range b {
			if (c < ' ' && c != '\t') || c == 0x7f {
				return false
			}
		}
		return true
	}
	checkEveryByte(t, "ValidValue", []byte{'a', '\t', 0xff, ' ', '~'}, byteWise, ValidValue[[]byte], ValidValue[string])
}

// cutFieldByLines is what CutField must agree with: the line's end found by a search for
// LF, the line then split and checked by SplitField.
func cutFieldByLines(b []byte) (name, value []byte, next int, ok bool) {
	nl := bytes.IndexByte(b, '\n')
	if nl <= 0 || b[nl-1] != '\r' {
		return nil, nil, 0, false
	}
	name, value, err := SplitField(b[:nl-1])
	if err != nil {
		return nil, nil, 0, false
	}
	return name, value, nl + 1, true
}

// checkCutField fails t when CutField, on b as bytes and as a string, disagrees with
// cutFieldByLines, or its Known with the byte-by-byte reference (knownByName).
func checkCutField(t *testing.T, b []byte) {
	t.Helper()
	name, value, next, ok := cutFieldByLines(b)
	ne, vs, ve, n, k, got := CutField(b)
	if got != ok || ok && (string(b[:ne]) != string(name) || string(b[vs:ve]) != string(value) || n != next) {
		t.Fatalf("CutField(%q) = %q, %q, %d, %v; want %q, %q, %d, %v", b, b[:ne], b[vs:ve], n, got, name, value, next, ok)
	}
	if want := knownByName(name); ok && k != want {
		t.Fatalf("CutField(%q) found name %q known as %v; want %v", b, name, k, want)
	}
	sne, svs, sve, sn, sk, sok := CutField(string(b))
	if sne != ne || svs != vs || sve != ve || sn != n || sk != k || sok != got {
		t.Fatalf("CutField(string %q) = %d, %d, %d, %d, %v, %v; bytes gave %d, %d, %d, %d, %v, %v", b, sne, svs, sve, sn, sk, sok, ne, vs, ve, n, k, got)
	}
}

// TestCutFieldWordwise checks CutField's eight-bytes-at-once name and value checks against
// the line-by-line reading for every byte value at every position of names and values of 1
// to 17 bytes, so that each byte is seen in a whole word and in the tail, before the line's
// end and past it.
func TestCutFieldWordwise(t *testing.T) {
	for _, fill := range []string{"a", "Z", "-", "9", "_"} {
		for n := 1; n <= 17; n++ {
			line := []byte(strings.Repeat(fill, n) + ": value\r\nNext: x\r\n")
			for i := range n + 4 {
				for c := range 256 {
					old := line[i]
					line[i] = byte(c)
					checkCutField(t, line)
					checkCutField(t, line[:i+1]) // cut short
					line[i] = old
				}
			}
		}
	}
	for _, fill := range []byte{'a', '\t', 0xff, ' ', '~'} {
		for n := 1; n <= 17; n++ {
			line := append(append([]byte("X-Name: "), bytes.Repeat([]byte{fill}, n)...), "\r\nA: b\r\n"...)
			for i := len("X-Name:"); i < len(line); i++ {
				for c := range 256 {
					old := line[i]
					line[i] = byte(c)
					checkCutField(t, line)
					line[i] = old
				}
			}
		}
	}
}

// TestCutFieldKnown checks CutField's Known, found by comparing the words of a name of a
// known one's slot (knownWords), against the byte-by-byte reference for every known name in
// lower, upper and mixed case, every one-byte change of it, names one byte shorter or
// longer, and each of those cut short at every length, so that a name is seen with its four
// words in b and too close to b's end for them.
func TestCutFieldKnown(t *testing.T) {
	for k := Known(1); k < NumKnown; k++ {
		lower := k.String()
		for _, name := range []string{lower, strings.ToUpper(lower), mixedCase(lower), lower[:len(lower)-1], lower + "s", "x" + lower} {
			line := []byte(name + ": v\r\nNext-Field: some value\r\n")
			for n := 0; n <= len(line); n++ {
				checkCutField(t, line[:n])
			}
			for i := range len(name) + 1 {
				for c := range 256 {
					old := line[i]
					line[i] = byte(c)
					checkCutField(t, line)
					checkCutField(t, line[:len(name)+5])
					line[i] = old
				}
			}
		}
	}
}

// FuzzCutField holds CutField to the line-by-line reading of a field line.
func FuzzCutField(f *testing.F) {
	for _, s := range []string{
		"Host: example.com\r\n", "a:b\r\n\r\n", "X-Long-Name-Of-Field: \t v a l \t\r\nY: z\r\n",
		"A : b\r\n", " A: b\r\n", "A: b\nC: d\r\n", "A: b\rc\r\n", "A: b\x00\r\n", "A: \xff\x7f\r\n",
		"\r\n", "A: b", "A: b\r", "Content-Length: 5\r\n", "x_y.z~!#$%&'*+^`|: v\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkCutField(t, b) })
}

// headEndBefore is HeadEnd as it was before it searched for LFs: the reference
// FuzzHeadEnd holds HeadEnd to.
func headEndBefore(b []byte, from int) (int, error) {
	from = max(from-3, 0)
	if i := bytes.Index(b[from:], []byte("\r\n\r\n")); i >= 0 {
		return from + i + 4, nil
	}
	if bareLineEnd(b, from) {
		return -1, ErrMalformed
	}
	return -1, nil
}

// FuzzHeadEnd holds HeadEnd to the search for the whole CRLF CRLF, from every offset an
// earlier call may have scanned to.
func FuzzHeadEnd(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: h\r\n\r\n", "GET / HTTP/1.1\r\nHost: h\r\n\r", "\r\n\r\n", "\n\r\n\r\n",
		"a\r\n\r\r\n\r\n", "GET / HTTP/1.1\nHost: h\n\n", "x\r\n\r\nGET / HTTP/1.1\r\n\r\n", "\r\r\n\n\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for from := 0; from <= len(b); from++ {
			end, err := HeadEnd(b, from)
			wantEnd, wantErr := headEndBefore(b, from)
			if end != wantEnd || err != wantErr {
				t.Fatalf("HeadEnd(%q, %d) = %d, %v; want %d, %v", b, from, end, err, wantEnd, wantErr)
			}
		}
	})
}

// parseRequestHeadBefore is ParseRequestHead as it was before it took field lines with
// CutField: each line cut at its LF, then split by SplitField. FuzzParseRequestHead holds
// ParseRequestHead to it.
func parseRequestHeadBefore(s string, maxFields int, chunkedLength bool, add func(name, value string, k Known)) (RequestHead, error) {
	var rh RequestHead
	line, rest, ok := CutLine(s)
	if !ok {
		return rh, ErrMalformed
	}
	var err error
	if rh.RequestLine, err = ParseRequestLine(line); err != nil {
		return rh, err
	}
	if rh.Absolute {
		rh.Host, rh.HasHost = rh.Authority, true
	}
	var f Fields
	f.Reset()
	f.chunkedLength = chunkedLength
	for n := 0; rest != ""; n++ {
		if line, rest, ok = CutLine(rest); !ok {
			return rh, ErrMalformed
		}
		if line == "" {
			break
		}
		if n == maxFields {
			return rh, ErrTooManyFields
		}
		name, value, err := SplitField(line)
		if err != nil {
			return rh, err
		}
		// The name's Known by the byte-by-byte reference, not CutField's.
		if err := rh.field(&f, name, value, knownByName([]byte(name)), add); err != nil {
			return rh, err
		}
	}
	if !rh.HasHost && rh.Minor == 1 {
		return rh, ErrMalformed
	}
	if rh.Framing, err = f.Request(rh.Minor); err != nil {
		return rh, err
	}
	rh.Close = rh.Framing.Close
	return rh, nil
}

// splitRequestLineBefore is how RequestLine.parse took a request line apart before it
// checked the method and the target as it found their ends: each space searched for, then
// the method and the target checked, the version compared as a string. A target that is not
// in origin form is then interpreted as parse does (form).
func splitRequestLineBefore(s string, crlf bool) (rl RequestLine, rest string, err error) {
	sp1 := strings.IndexByte(s, ' ')
	if sp1 <= 0 || !ValidToken(s[:sp1]) {
		return rl, "", ErrMalformed
	}
	rl.Method, s = s[:sp1], s[sp1+1:]
	sp2 := strings.IndexByte(s, ' ')
	if sp2 <= 0 {
		return rl, "", ErrMalformed
	}
	rl.Target, s = s[:sp2], s[sp2+1:]
	if crlf {
		if len(s) < len("HTTP/1.1\r\n") || s[8] != '\r' || s[9] != '\n' {
			return rl, "", ErrMalformed
		}
		s, rest = s[:8], s[10:]
	}
	switch s {
	case "HTTP/1.1":
		rl.Minor = 1
	case "HTTP/1.0":
	default:
		return rl, "", ErrMalformed
	}
	if !ValidTarget(rl.Target) {
		return rl, "", ErrMalformed
	}
	if rl.Method == "CONNECT" || rl.Target[0] != '/' {
		err = rl.form()
	}
	return rl, rest, err
}

// FuzzRequestLine holds RequestLine.parse, with and without the CRLF, to
// splitRequestLineBefore: the same line, the same rest, the same error.
func FuzzRequestLine(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: h\r\n", "GET /a?b HTTP/1.0\r\n", "POST /x HTTP/1.1", "GET  / HTTP/1.1\r\n",
		"GET / HTTP/1.2\r\n", "GE\tT / HTTP/1.1\r\n", "GET /\x7f HTTP/1.1\r\n", "GET /\r\n HTTP/1.1\r\n",
		"CONNECT h:443 HTTP/1.1\r\n", "CONNECT /x HTTP/1.1\r\n", "OPTIONS * HTTP/1.1\r\n", "GET * HTTP/1.1\r\n",
		"GET http://h/p?q HTTP/1.1\r\n", "GET HTTPS://h HTTP/1.1\r\n", "GET http://u@h/ HTTP/1.1\r\n", "GET / HTTP/1.1",
		"GET ", "GET", " / HTTP/1.1\r\n", "M-SEARCH * HTTP/1.1\r\n", "GET / HTTP/1.1\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, crlf := range []bool{true, false} {
			var rl RequestLine
			rest, err := rl.parse(s, crlf)
			want, wantRest, wantErr := splitRequestLineBefore(s, crlf)
			if err != wantErr || err == nil && (rl != want || rest != wantRest) {
				t.Fatalf("parse(%q, %v) = %+v, %q, %v; want %+v, %q, %v", s, crlf, rl, rest, err, want, wantRest, wantErr)
			}
		}
	})
}

// FuzzParseRequestHead holds ParseRequestHead to parseRequestHeadBefore: the same head,
// error and fields passed on, for every field limit up to the fields there are.
func FuzzParseRequestHead(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: h\r\nuser-agent: x\r\n",
		"POST /p HTTP/1.1\r\nHost: h\r\nConnection: close, X-Hop\r\nContent-Length: 5\r\nTE: trailers\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nA: b\r\n c\r\n", "GET / HTTP/1.1\r\nHost: h\r\nA : b\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nA: b\nC: d\r\n", "GET / HTTP/1.1\r\nHost: h\r\nA: b\x00\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nA: b\rc\r\n", "GET / HTTP/1.1\r\nHost: h\r\nA: b",
		"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n",
		"POST / HTTP/1.1\r\nhOST: h\r\nEXPECT: 100-Continue\r\nUpgrade: x\r\nConnection: upgrade\r\nExpect: other\r\nte: trailers\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nHost: h\r\nContent-Type: a\r\nUser-Agent: b\r\nHosts: c\r\nExpects: d\r\n",
	} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, chunkedLength bool) {
		for maxFields := 0; maxFields <= strings.Count(s, "\n"); maxFields++ {
			var got, want []string
			rh, err := ParseRequestHead(s, maxFields, chunkedLength, func(n, v string, k Known) { got = append(got, n+"="+v+" "+k.String()) })
			wantRH, wantErr := parseRequestHeadBefore(s, maxFields, chunkedLength, func(n, v string, k Known) { want = append(want, n+"="+v+" "+k.String()) })
			if err != wantErr {
				t.Fatalf("ParseRequestHead(%q, %d) error = %v; want %v", s, maxFields, err, wantErr)
			}
			if diff := cmp.Diff(wantRH, rh); err == nil && diff != "" {
				t.Fatalf("ParseRequestHead(%q, %d) head (-want +got):\n%s", s, maxFields, diff)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("ParseRequestHead(%q, %d) fields (-want +got):\n%s", s, maxFields, diff)
			}
		}
	})
}

// TestValidAuthorityWordwise checks ValidAuthority's four-bytes-at-once lookup against the
// byte-wise table for every byte value at every position of authorities of 1 to 17 bytes.
func TestValidAuthorityWordwise(t *testing.T) {
	byteWise := func(b []byte) bool {
		for _, c := range b {
			if !authorityChars[c] {
				return false
			}
		}
		return true
	}
	checkEveryByte(t, "ValidAuthority", []byte{'a', 'Z', '0', '.', ':', '-', '['}, byteWise, ValidAuthority[[]byte], ValidAuthority[string])
}

// checkEveryByte fails t when check, on bytes or on a string, disagrees with byteWise for any
// byte value at any position of 1 to 17 copies of each fill byte, so that each byte is seen in
// a whole word and in the tail, next to allowed and refused neighbours.
func checkEveryByte(t *testing.T, name string, fills []byte, byteWise, check func([]byte) bool, checkString func(string) bool) {
	t.Helper()
	for _, fill := range fills {
		for n := 1; n <= 17; n++ {
			b := bytes.Repeat([]byte{fill}, n)
			for i := range n {
				for c := range 256 {
					b[i] = byte(c)
					want := byteWise(b)
					if got := check(b); got != want {
						t.Fatalf("%s(%q) = %v; want %v", name, b, got, want)
					}
					if got := checkString(string(b)); got != want {
						t.Fatalf("%s(string %q) = %v; want %v", name, b, got, want)
					}
				}
				b[i] = fill
			}
		}
	}
}
