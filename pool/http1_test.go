package pool

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/http1"
)

// parsed is what a test expects from one raw response.
type parsed struct {
	Status    int
	Minor     int
	Header    []string // "name: value"
	Length    int64
	Body      string
	KeepAlive bool
	Reusable  bool     // the body ended cleanly and the connection may be reused
	Trailer   []string // "name: value"
}

func parse(raw string, head bool) (parsed, error) {
	// The buffer is small, so that lines span reads; a line of chunked framing must fit in it.
	br := bufio.NewReaderSize(iotest.HalfReader(strings.NewReader(raw)), 32)
	var resp Response
	f, err := readResponseHead(br, &resp, head, defaultHeadLimits)
	if err != nil {
		return parsed{}, err
	}
	var b body
	b.reset(br, f, &resp)
	got, err := io.ReadAll(&b)
	if err != nil {
		return parsed{}, err
	}
	p := parsed{Status: resp.StatusCode, Minor: resp.ProtoMinor, Length: resp.ContentLength, Body: string(got),
		KeepAlive: !f.Close, Reusable: b.complete() && !f.Close}
	for _, h := range resp.Header {
		p.Header = append(p.Header, string(h.Name)+": "+string(h.Value))
	}
	for _, h := range resp.Trailer {
		p.Trailer = append(p.Trailer, string(h.Name)+": "+string(h.Value))
	}
	return p, nil
}

func TestReadResponse(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		head bool
		want parsed
	}{
		{
			name: "content-length",
			raw:  "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A:  b c \r\n\r\nhelloEXTRA",
			want: parsed{Status: 200, Minor: 1, Header: []string{"Content-Length: 5", "X-A: b c"}, Length: 5, Body: "hello", KeepAlive: true, Reusable: true},
		},
		{
			name: "chunked with extension and trailers",
			raw:  "HTTP/1.1 201 Created\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3;ext=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nTrailer: x\r\nGrpc-Status: 0\r\nbad line\r\nContent-Length: 3\r\nGrpc-Message:  ok \r\n\r\n",
			want: parsed{Status: 201, Minor: 1, Header: []string{"Transfer-Encoding: gzip, chunked"}, Length: -1, Body: "abc0123456789abcdef", KeepAlive: true, Reusable: true,
				Trailer: []string{"grpc-status: 0", "grpc-message: ok"}},
		},
		{
			name: "until close",
			raw:  "HTTP/1.1 200 OK\r\n\r\nall of it",
			want: parsed{Status: 200, Minor: 1, Length: -1, Body: "all of it"},
		},
		{
			name: "interim responses skipped",
			raw:  "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\nHTTP/1.1 204 No Content\r\nA: 1\r\n\r\n",
			want: parsed{Status: 204, Minor: 1, Header: []string{"A: 1"}, Length: -1, KeepAlive: true, Reusable: true},
		},
		{
			name: "HEAD ignores content-length",
			raw:  "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n",
			head: true,
			want: parsed{Status: 200, Minor: 1, Header: []string{"Content-Length: 99"}, Length: 99, KeepAlive: true, Reusable: true},
		},
		{
			name: "connection close",
			raw:  "HTTP/1.1 200 OK\r\nConnection: foo, Close\r\nContent-Length: 0\r\n\r\n",
			want: parsed{Status: 200, Minor: 1, Header: []string{"Connection: foo, Close", "Content-Length: 0"}, Length: 0},
		},
		{
			name: "HTTP/1.0 keep-alive",
			raw:  "HTTP/1.0 200 OK\nConnection: keep-alive\nContent-Length: 1\n\nx",
			want: parsed{Status: 200, Minor: 0, Header: []string{"Connection: keep-alive", "Content-Length: 1"}, Length: 1, Body: "x", KeepAlive: true, Reusable: true},
		},
		{
			name: "HTTP/1.0 closes by default",
			raw:  "HTTP/1.0 404 Not Found\r\nContent-Length: 1\r\n\r\nx",
			want: parsed{Status: 404, Minor: 0, Header: []string{"Content-Length: 1"}, Length: 1, Body: "x"},
		},
		{
			name: "status line without reason",
			raw:  "HTTP/1.1 503\r\nContent-Length: 0\r\n\r\n",
			want: parsed{Status: 503, Minor: 1, Header: []string{"Content-Length: 0"}, Length: 0, KeepAlive: true, Reusable: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parse(tt.raw, tt.head)
			if err != nil {
				t.Fatalf("parse = %v; want nil", err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("parse (-want +got):\n%s", d)
			}
		})
	}
}

func TestReadResponseErrors(t *testing.T) {
	tests := []struct {
		name     string
		raw      string
		protocol bool // want ErrProtocol; otherwise an unexpected EOF
	}{
		{name: "bad version", raw: "HTTP/2.0 200 OK\r\n\r\n", protocol: true},
		{name: "short status", raw: "HTTP/1.1 20\r\n\r\n", protocol: true},
		{name: "status below 100", raw: "HTTP/1.1 099 X\r\n\r\n", protocol: true},
		{name: "folded header", raw: "HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n", protocol: true},
		{name: "space before colon", raw: "HTTP/1.1 200 OK\r\nA : b\r\n\r\n", protocol: true},
		{name: "conflicting content-length", raw: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", protocol: true},
		{name: "negative content-length", raw: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", protocol: true},
		{name: "bad chunk size", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", protocol: true},
		{name: "chunk without CRLF", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n0\r\n\r\n", protocol: true},
		{name: "trailer line longer than the buffer", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nA: " + strings.Repeat("x", 40) + "\r\n\r\n", protocol: true},
		{name: "header too large", raw: "HTTP/1.1 200 OK\r\nA: " + strings.Repeat("x", defaultHeadLimits.bytes) + "\r\n\r\n", protocol: true},
		{name: "too many headers", raw: "HTTP/1.1 200 OK\r\n" + strings.Repeat("A: b\r\n", maxHeaders+1) + "\r\n", protocol: true},
		{name: "truncated body", raw: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"},
		{name: "truncated head", raw: "HTTP/1.1 200 OK\r\nA: b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(tt.raw, false)
			if tt.protocol && !errors.Is(err, ErrProtocol) {
				t.Errorf("parse = %v; want ErrProtocol", err)
			}
			if !tt.protocol && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
				t.Errorf("parse = %v; want an unexpected EOF", err)
			}
		})
	}
}

// headPaths are responses for TestBufferedHeadMatchesLines and the seeds of
// FuzzBufferedHeadMatchesLines: heads parseBufferedHead takes, refuses, or leaves to
// readHeadLines.
var headPaths = []string{
	"HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello",
	"HTTP/1.1 204 No Content\r\n\r\n",
	"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nA: 1\r\n\r\n",
	"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx",
	"HTTP/1.1 200 OK\r\nConnection: Keep-Alive, close\r\nContent-Length: 1\r\n\r\nx",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX:  spaced \t\r\nEmpty:\r\n\r\n",
	"HTTP/1.1 200 OK\nA: b\n\n",             // bare LF throughout: left to readHeadLines
	"HTTP/1.1 200 OK\r\nA: b\nC: d\r\n\r\n", // one bare LF: left to readHeadLines
	"HTTP/1.1 200 OK\r\nA: b\n\r\n\r\nX",    // bare LF ends the head before the CRLF CRLF
	"HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n",    // bare CR in a value
	"HTTP/1.1 200 OK\r\nA : b\r\n\r\n",      // space before the colon
	"HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n", // folded
	"HTTP/1.1 2x0 OK\r\n\r\n",               // bad status
	"\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",       // empty status line
	"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
	"HTTP/1.1 200 OK\r\n" + strings.Repeat("A: b\r\n", maxHeaders+1) + "\r\n",
	"HTTP/1.1 200 OK\r\n" + strings.Repeat("A: b\r\n", maxHeaders) + "\r\n",
	"HTTP/1.1 200 OK\r\nA: " + strings.Repeat("x", 200) + "\r\n\r\n", // over the test's byte limit
	"HTTP/1.1 200 OK\r\nA: b\r\n",                                    // not whole
}

// headOutcome describes what reading one head gave: its fields, framing and error, and how
// many bytes it left unread.
func headOutcome(read func(*bufio.Reader, *Response, bool, headLimits) (http1.Framing, error), raw string, head bool) string {
	return headOutcomeWith(read, raw, head, 0)
}

// headOutcomeWith is headOutcome with a response whose storage has room for rawCap bytes
// already, as a reused one has: parseBufferedHead parses a copy that long, and a head cut
// short by it again from a whole copy.
func headOutcomeWith(read func(*bufio.Reader, *Response, bool, headLimits) (http1.Framing, error), raw string, head bool, rawCap int) string {
	br := bufio.NewReaderSize(strings.NewReader(raw), 4096)
	br.Peek(1)
	var resp Response
	resp.raw = make([]byte, 0, rawCap)
	resp.reset()
	lim := headLimits{fields: maxHeaders, bytes: 128 + 6*maxHeaders}
	f, err := read(br, &resp, head, lim)
	if err != nil {
		return "error: " + err.Error()
	}
	out := fmt.Sprintf("%d 1.%d %+v length %d left %d;", resp.StatusCode, resp.ProtoMinor, f, resp.ContentLength, br.Buffered())
	for _, h := range resp.Header {
		out += fmt.Sprintf(" %q=%q(%v)", h.Name, h.Value, h.Known)
	}
	return out
}

// TestBufferedHeadMatchesLines: a head parsed from the reader's buffer in one pass
// (parseBufferedHead, through readOneHead) comes out as the line-by-line reader
// (readHeadLines) reads it, refused or not, with the same bytes consumed.
func TestBufferedHeadMatchesLines(t *testing.T) {
	for _, raw := range headPaths {
		for _, head := range []bool{false, true} {
			lines := headOutcome(readHeadLines, raw, head)
			// Storage too short for any head, cut inside this one, and room for all of it.
			for _, rawCap := range []int{0, 8, len(raw) / 2, 4096} {
				if one := headOutcomeWith(readOneHead, raw, head, rawCap); one != lines {
					t.Errorf("head %q (HEAD %v, storage for %d bytes):\none pass:   %s\nline by line: %s", raw, head, rawCap, one, lines)
				}
			}
		}
	}
	// The common head is taken by the one-pass path, which builds the header itself.
	br := bufio.NewReader(strings.NewReader(headPaths[0]))
	br.Peek(1)
	var resp Response
	if _, ok, err := parseBufferedHead(br, &resp, false, defaultHeadLimits); !ok || err != nil || len(resp.Header) != 4 {
		t.Errorf("parseBufferedHead = %v, %v, %d fields; want true, nil, 4", ok, err, len(resp.Header))
	}
}

// FuzzBufferedHeadMatchesLines holds the one-pass head parser to the line-by-line one.
func FuzzBufferedHeadMatchesLines(f *testing.F) {
	for _, raw := range headPaths {
		f.Add(raw, false)
	}
	f.Fuzz(func(t *testing.T, raw string, head bool) {
		lines := headOutcome(readHeadLines, raw, head)
		for _, rawCap := range []int{0, 1, len(raw) / 3, len(raw) - 20, len(raw), 4096} {
			if one := headOutcomeWith(readOneHead, raw, head, max(rawCap, 0)); one != lines {
				t.Errorf("head %q (storage for %d bytes):\none pass:   %s\nline by line: %s", raw, rawCap, one, lines)
			}
		}
	})
}

func TestWriteRequest(t *testing.T) {
	proper := &config.HTTP1Options{HeaderCase: config.HeaderCaseProper}
	preserve := &config.HTTP1Options{HeaderCase: config.HeaderCasePreserve}
	tests := []struct {
		name string
		req  Request
		opts *config.HTTP1Options
		want string
	}{
		{
			name: "GET",
			req:  Request{Method: "GET", Path: "/a?b", Host: "h", Header: []Field{{Name: "X", Value: "1"}, {Name: "content-length", Value: "9"}, {Name: "Host", Value: "other"}, {Name: "Transfer-Encoding", Value: "chunked"}}},
			want: "GET /a?b HTTP/1.1\r\nhost: h\r\nx: 1\r\n\r\n",
		},
		{
			name: "POST without body",
			req:  Request{Method: "POST", Path: "/"},
			want: "POST / HTTP/1.1\r\nhost: 10.0.0.1:80\r\ncontent-length: 0\r\n\r\n",
		},
		{
			name: "content-length body",
			req:  Request{Method: "PUT", Path: "/", Host: "h", Body: strings.NewReader("hello"), ContentLength: 5},
			want: "PUT / HTTP/1.1\r\nhost: h\r\ncontent-length: 5\r\n\r\nhello",
		},
		{
			name: "chunked body",
			req:  Request{Method: "POST", Path: "/", Host: "h", Body: iotest.OneByteReader(strings.NewReader("ab")), ContentLength: -1},
			want: "POST / HTTP/1.1\r\nhost: h\r\ntransfer-encoding: chunked\r\n\r\n1\r\na\r\n1\r\nb\r\n0\r\n\r\n",
		},
		{
			name: "chunked body without enable_trailers drops the trailers",
			req: Request{Method: "POST", Path: "/", Host: "h", Body: strings.NewReader("ab"), ContentLength: -1,
				Trailer: map[string][]string{"Checksum": {"x"}}},
			want: "POST / HTTP/1.1\r\nhost: h\r\ntransfer-encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n",
		},
		{
			name: "enable_trailers",
			req: Request{Method: "POST", Path: "/", Host: "h", Body: strings.NewReader("ab"), ContentLength: -1,
				Trailer: map[string][]string{"Checksum": {"x"}, "Content-Length": {"1"}}},
			opts: &config.HTTP1Options{EnableTrailers: true},
			want: "POST / HTTP/1.1\r\nhost: h\r\ntransfer-encoding: chunked\r\n\r\n2\r\nab\r\n0\r\nchecksum: x\r\n\r\n",
		},
		{
			name: "proper_case_words",
			req:  Request{Method: "PUT", Path: "/", Host: "h", Header: []Field{{Name: "X-Foo_bar", Value: "1"}, {Name: "x-9abc.def", Value: "2"}}, Body: strings.NewReader("hello"), ContentLength: 5},
			opts: proper,
			want: "PUT / HTTP/1.1\r\nHost: h\r\nX-Foo_Bar: 1\r\nX-9abc.Def: 2\r\nContent-Length: 5\r\n\r\nhello",
		},
		{
			name: "preserve_case on the cluster only: no recorded spelling, lower case",
			req:  Request{Method: "GET", Path: "/", Host: "h", Header: []Field{{Name: "X-Foo", Value: "1"}}},
			opts: preserve,
			want: "GET / HTTP/1.1\r\nhost: h\r\nx-foo: 1\r\n\r\n",
		},
		{
			name: "names spelled downstream win over the cluster's format",
			req: Request{Method: "POST", Path: "/", Host: "h", Header: []Field{{Name: "x-FOO", Value: "1"}}, Spelled: true, HostName: "HoSt",
				OthersCase: config.HeaderCaseProper},
			opts: proper,
			want: "POST / HTTP/1.1\r\nHoSt: h\r\nx-FOO: 1\r\nContent-Length: 0\r\n\r\n",
		},
		{
			// Names Legate knows are copied from config's table with their ": ", the others
			// lowered one by one; the framing names among them are still dropped.
			name: "known and unknown names in lower case",
			req: Request{Method: "GET", Path: "/", Host: "h", Header: []Field{{Name: "User-Agent", Value: "ua"},
				{Name: "X-Custom-Thing", Value: "1"}, {Name: "Content-Length", Value: "9"}, {Name: "X-Request-Id", Value: "id"},
				{Name: "X-Envoy-Expected-Rq-Timeout-Ms", Value: "15000"}, {Name: "TRANSFER-ENCODING", Value: "chunked"}}},
			want: "GET / HTTP/1.1\r\nhost: h\r\nuser-agent: ua\r\nx-custom-thing: 1\r\nx-request-id: id\r\n" +
				"x-envoy-expected-rq-timeout-ms: 15000\r\n\r\n",
		},
		{
			name: "known names in proper case",
			req:  Request{Method: "GET", Path: "/", Host: "h", Header: []Field{{Name: "User-Agent", Value: "ua"}, {Name: "X-Request-Id", Value: "id"}}},
			opts: proper,
			want: "GET / HTTP/1.1\r\nHost: h\r\nUser-Agent: ua\r\nX-Request-Id: id\r\n\r\n",
		},
		{
			// An empty value ends its line too: it joined the next field's line, or left the
			// head without its end (found by httpproxy's FuzzH2RequestHeaders).
			name: "empty values",
			req:  Request{Method: "GET", Path: "/", Host: "h", Header: []Field{{Name: "x-a", Value: ""}, {Name: "x-b", Value: "1"}, {Name: "x-c", Value: ""}}},
			want: "GET / HTTP/1.1\r\nhost: h\r\nx-a: \r\nx-b: 1\r\nx-c: \r\n\r\n",
		},
		{
			name: "send_fully_qualified_url",
			req:  Request{Method: "GET", Path: "/a?b", Host: "h:8", Scheme: "https"},
			opts: &config.HTTP1Options{SendFullyQualifiedURL: true},
			want: "GET https://h:8/a?b HTTP/1.1\r\nhost: h:8\r\n\r\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			if opts == nil {
				opts = &config.HTTP1Options{}
			}
			// A buffer smaller than the lines takes the line-by-line path; the head is the same.
			var small bytes.Buffer
			sw := bufio.NewWriterSize(&small, 16)
			if err := writeRequestHead(sw, &tt.req, "10.0.0.1:80", headSize(&tt.req, "10.0.0.1:80"), opts, nil); err != nil {
				t.Fatal(err)
			}
			sw.Flush()
			if want := tt.want[:strings.Index(tt.want, "\r\n\r\n")+4]; small.String() != want {
				t.Errorf("head through a 16-byte buffer = %q; want %q", small.String(), want)
			}
			var out bytes.Buffer
			bw := bufio.NewWriter(&out)
			if err := writeRequestHead(bw, &tt.req, "10.0.0.1:80", headSize(&tt.req, "10.0.0.1:80"), opts, nil); err != nil {
				t.Fatal(err)
			}
			if err := writeRequestBody(bw, &tt.req, make([]byte, 64), opts); err != nil {
				t.Fatal(err)
			}
			bw.Flush()
			if got := out.String(); got != tt.want {
				t.Errorf("written = %q; want %q", got, tt.want)
			}
		})
	}
	// The last line of defence against request-line injection (issue 14 item 6): nothing is
	// written for a method, path or host that would split or forge the request line.
	for _, req := range []Request{
		{Method: "GET /evil", Path: "/"},
		{Method: "GET", Path: "/x HTTP/1.1"},
		{Method: "GET", Path: "/x\r\nA: b"},
		{Method: "GET", Path: "/", Host: "user:pw@evil.example"},
		{Method: "GET", Path: "/", Host: "a\r\nX: y"},
	} {
		var out bytes.Buffer
		bw := bufio.NewWriter(&out)
		err := writeRequestHead(bw, &req, "10.0.0.1:80", headSize(&req, "10.0.0.1:80"), &config.HTTP1Options{}, nil)
		bw.Flush()
		if !errors.Is(err, ErrRequestLine) || out.Len() != 0 {
			t.Errorf("writeRequestHead(%q %q host %q) = %v, wrote %q; want ErrRequestLine and nothing written", req.Method, req.Path, req.Host, err, out.String())
		}
	}
	t.Run("short body", func(t *testing.T) {
		bw := bufio.NewWriter(io.Discard)
		req := Request{Method: "PUT", Body: strings.NewReader("abc"), ContentLength: 5}
		if err := writeRequestBody(bw, &req, nil, &config.HTTP1Options{}); err == nil {
			t.Error("writeRequestBody = nil; want an error for a body shorter than its content length")
		}
	})
}

// FuzzReadResponse checks that the parser never panics and that a parsed body never exceeds
// the announced length.
func FuzzReadResponse(f *testing.F) {
	f.Add("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false)
	f.Add("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nT: x\r\n\r\n", false)
	f.Add("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 204 No\r\n\r\n", true)
	f.Fuzz(func(t *testing.T, raw string, head bool) {
		br := bufio.NewReaderSize(strings.NewReader(raw), 16)
		var resp Response
		fr, err := readResponseHead(br, &resp, head, defaultHeadLimits)
		if err != nil {
			return
		}
		var b body
		b.reset(br, fr, &resp)
		n, _ := io.Copy(io.Discard, &b)
		if fr.Mode == http1.Length && n > fr.Length {
			t.Fatalf("read %d body bytes; content length %d", n, fr.Length)
		}
		for _, h := range resp.Header {
			if len(h.Name) == 0 {
				t.Fatal("empty header name accepted")
			}
		}
	})
}

// TestCheckedHostIsACopy: a connection skips the check of a host equal to the last one it
// found valid, and what it compares with is a copy. The host here, like a downstream
// request's, points into a buffer that is overwritten after the first request; the second
// request's host, in that same buffer, would split the request line and must be refused.
// Keeping the string rather than a copy would compare the new bytes with themselves.
func TestCheckedHostIsACopy(t *testing.T) {
	var checked []byte
	buf := []byte("a.example:80")
	for i, want := range []error{nil, ErrRequestLine, nil} {
		if i == 1 {
			copy(buf, "a\r\nX: y\r\n:8")
		}
		if i == 2 {
			copy(buf, "b.example:80")
		}
		req := Request{Method: "GET", Path: "/", Host: unsafe.String(&buf[0], len(buf))}
		var out bytes.Buffer
		bw := bufio.NewWriter(&out)
		err := writeRequestHead(bw, &req, "10.0.0.1:80", headSize(&req, "10.0.0.1:80"), &config.HTTP1Options{}, &checked)
		bw.Flush()
		if !errors.Is(err, want) || (err != nil) != (out.Len() == 0) {
			t.Fatalf("request %d, host %q: writeRequestHead = %v, wrote %q; want %v", i, req.Host, err, out.String(), want)
		}
		if want == nil && !strings.Contains(out.String(), "\r\nhost: "+req.Host+"\r\n") {
			t.Fatalf("request %d: wrote %q; want host %q", i, out.String(), req.Host)
		}
	}
}

// TestFramingNamesAreNotKnown holds appendLowerFields' order: it writes a name config knows
// before asking whether it is a framing name, which none of them may be.
func TestFramingNamesAreNotKnown(t *testing.T) {
	for _, n := range []string{"Content-Length", "Transfer-Encoding", "Host"} {
		if f, known := config.KnownLowerField(n); known {
			t.Errorf("config.KnownLowerField(%q) = %q, true; want a framing name unknown", n, f)
		}
	}
}
