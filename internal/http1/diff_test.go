package http1

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// This file checks the framing against net/http's parser. On input both accept, the method,
// target, Host, fields, body, persistence and where the message ends must agree. Where they
// differ on purpose, Legate refuses what net/http accepts:
//   - bare LF line ends in request heads and in chunked framing (net/http accepts them in
//     both; a request smuggled past a proxy that reads lines differently is the risk);
//   - obsolete line folding (net/http joins folded lines);
//   - a request with both Transfer-Encoding and Content-Length (net/http drops the length);
//   - Transfer-Encoding in an HTTP/1.0 request (net/http ignores the field);
//   - HTTP/1.x versions other than 1.0 and 1.1, status codes below 100, chunk sizes of 16
//     hex digits;
//   - a Host field that is not a valid authority, or userinfo in an absolute-form target
//     (net/http's server checks Host too, its ReadRequest does not);
//   - an absolute-form target whose path is empty and that has a query ("http://h?q");
//   - control characters in chunk extensions.
// And on input both accept, they differ in:
//   - Close of a response with both Transfer-Encoding: chunked and Content-Length, and of a
//     101 response: Legate does not reuse the connection, net/http does not say;
//   - leading empty lines before a request: Legate skips them (RFC 9112 §2.2), net/http's
//     ReadRequest refuses them (so such input is never compared).

// netRequest reads one request with net/http.
func netRequest(in []byte) (message, bool) {
	br := bufio.NewReader(bytes.NewReader(in))
	req, err := http.ReadRequest(br)
	if err != nil {
		return message{}, false
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return message{}, false
	}
	m := message{Method: req.Method, Target: req.RequestURI, Host: req.Host, Minor: req.ProtoMinor, Body: string(body), Close: req.Close, Header: req.Header}
	rest, _ := io.ReadAll(br)
	m.Rest = string(rest)
	return m, true
}

// netResponse reads one response with net/http, for a HEAD request when head is set.
func netResponse(in []byte, head bool) (message, bool) {
	br := bufio.NewReader(bytes.NewReader(in))
	method := http.MethodGet
	if head {
		method = http.MethodHead
	}
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		return message{}, false
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return message{}, false
	}
	m := message{Status: resp.StatusCode, Minor: resp.ProtoMinor, Body: string(body), Close: resp.Close, Header: resp.Header}
	rest, _ := io.ReadAll(br)
	m.Rest = string(rest)
	return m, true
}

// withoutFraming drops the fields that one side interprets and the other keeps or drops.
func withoutFraming(h map[string][]string) map[string][]string {
	out := map[string][]string{}
	for k, v := range h {
		switch k {
		case "Host", "Connection", "Transfer-Encoding", "Te", "Expect", "Trailer", "Content-Length":
			continue
		}
		out[k] = v
	}
	return out
}

// compareRequest reports how Legate's and net/http's reading of in differ; "" when they
// agree or one of them refuses in.
func compareRequest(in []byte) string {
	ours, err := readRequest(in, 5)
	if err != nil {
		return ""
	}
	theirs, ok := netRequest(in)
	if !ok {
		return ""
	}
	target := theirs.Target
	if i := strings.Index(target, "://"); i >= 0 && target[0] != '/' {
		target = target[i+3+len(ours.Host):]
		if target == "" {
			target = "/"
		}
	}
	got := message{Method: ours.Method, Target: ours.Target, Host: ours.Host, Minor: ours.Minor, Body: ours.Body, Close: ours.Close, Header: withoutFraming(ours.Header), Rest: ours.Rest}
	want := message{Method: theirs.Method, Target: target, Host: theirs.Host, Minor: theirs.Minor, Body: theirs.Body, Close: theirs.Close, Header: withoutFraming(theirs.Header), Rest: theirs.Rest}
	return cmp.Diff(want, got)
}

// compareResponse is compareRequest for a response.
func compareResponse(in []byte, head bool) string {
	ours, err := readResponse(in, 5, head)
	if err != nil {
		return ""
	}
	theirs, ok := netResponse(in, head)
	if !ok {
		return ""
	}
	got := message{Status: ours.Status, Minor: ours.Minor, Body: ours.Body, Close: ours.Close, Header: withoutFraming(ours.Header), Rest: ours.Rest}
	want := message{Status: theirs.Status, Minor: theirs.Minor, Body: theirs.Body, Close: theirs.Close, Header: withoutFraming(theirs.Header), Rest: theirs.Rest}
	_, hasCL := ours.Header["Content-Length"]
	if (ours.Framing.Mode == Chunked && hasCL) || ours.Status == 101 {
		got.Close = want.Close // the documented difference
	}
	return cmp.Diff(want, got)
}

// validRequests are requests both parsers must accept, and agree on.
var validRequests = []string{
	"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /a/b?c=d&e HTTP/1.1\r\nHost: example.com:8080\r\nUser-Agent: x\r\nAccept: */*\r\nX-Multi: 1\r\nX-Multi:  2 \r\n\r\nNEXT",
	"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhelloGET / HTTP/1.1\r\n\r\n",
	"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
	"POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n10;x=y\r\n0123456789abcdef\r\n0\r\nX-Trailer: t\r\n\r\nNEXT",
	"PUT /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n0\r\n\r\n",
	"GET http://other.example:81/x?y HTTP/1.1\r\nHost: ignored\r\n\r\n",
	"GET https://other.example HTTP/1.1\r\n\r\n",
	"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.0\r\n\r\n",
	"GET / HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nabGET",
	"DELETE /x HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\nEmpty:\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: [::1]:80\r\nX: caf\xc3\xa9\r\n\r\n",
}

// validResponses are responses both parsers must accept, and agree on; the flag is a HEAD
// request.
var validResponses = []struct {
	raw  string
	head bool
}{
	{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A:  b c \r\n\r\nhelloEXTRA", false},
	{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nGrpc-Status: 0\r\n\r\nNEXT", false},
	{"HTTP/1.1 200 OK\r\n\r\nall of it", false},
	{"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nab", false},
	{"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nabNEXT", false},
	{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", true},
	{"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nNEXT", false},
	{"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\nNEXT", false},
	{"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false},
	{"HTTP/1.1 404 Not Found\nContent-Length: 1\nConnection: close\n\nx", false},
	{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nNEXT", false},
	{"HTTP/1.1 500\r\nContent-Length: 1\r\n\r\nx", false},
}

func TestDifferentialNetHTTP(t *testing.T) {
	for _, raw := range validRequests {
		if _, err := readRequest([]byte(raw), 5); err != nil {
			t.Errorf("request %q: Legate refuses it: %v", raw, err)
		}
		if _, ok := netRequest([]byte(raw)); !ok {
			t.Errorf("request %q: net/http refuses it", raw)
		}
		if diff := compareRequest([]byte(raw)); diff != "" {
			t.Errorf("request %q (-net/http +legate):\n%s", raw, diff)
		}
	}
	for _, tt := range validResponses {
		if _, err := readResponse([]byte(tt.raw), 5, tt.head); err != nil {
			t.Errorf("response %q: Legate refuses it: %v", tt.raw, err)
		}
		if _, ok := netResponse([]byte(tt.raw), tt.head); !ok {
			t.Errorf("response %q: net/http refuses it", tt.raw)
		}
		if diff := compareResponse([]byte(tt.raw), tt.head); diff != "" {
			t.Errorf("response %q (-net/http +legate):\n%s", tt.raw, diff)
		}
	}
}

// FuzzFraming reads arbitrary bytes as a request (as a server reads one) and as a response
// (as a client reads one): nothing panics, a body never exceeds its length, what was read and
// what is left add up to the input, and on input net/http also accepts, both agree.
func FuzzFraming(f *testing.F) {
	for _, r := range validRequests {
		f.Add([]byte(r), false, 1)
	}
	for _, r := range validResponses {
		f.Add([]byte(r.raw), r.head, 3)
	}
	f.Add([]byte("GET / HTTP/1.1\nHost: a\n\n"), false, 1)
	f.Add([]byte("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n"), false, 2)
	f.Fuzz(func(t *testing.T, in []byte, head bool, step int) {
		step = max(step%64, 1)
		if m, err := readRequest(in, step); err == nil {
			if m.Framing.Mode == Length && int64(len(m.Body)) != m.Framing.Length {
				t.Fatalf("request body of %d bytes; Content-Length %d", len(m.Body), m.Framing.Length)
			}
			if !ValidToken(m.Method) || !ValidTarget(m.Target) || !ValidAuthority(m.Host) {
				t.Fatalf("accepted method %q target %q host %q", m.Method, m.Target, m.Host)
			}
			if len(m.Rest) > len(in) || !bytes.HasSuffix(in, []byte(m.Rest)) {
				t.Fatalf("rest %q is not the end of the input", m.Rest)
			}
		}
		if diff := compareRequest(in); diff != "" {
			t.Fatalf("request %q (-net/http +legate):\n%s", in, diff)
		}
		if m, err := readResponse(in, step, head); err == nil {
			if m.Framing.Mode == Length && int64(len(m.Body)) != m.Framing.Length {
				t.Fatalf("response body of %d bytes; Content-Length %d", len(m.Body), m.Framing.Length)
			}
			if m.Framing.Mode == UntilClose && m.Rest != "" {
				t.Fatalf("bytes %q left after a body read until close", m.Rest)
			}
		}
		if diff := compareResponse(in, head); diff != "" {
			t.Fatalf("response %q head %v (-net/http +legate):\n%s", in, head, diff)
		}
	})
}
