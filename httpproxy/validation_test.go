package httpproxy

import (
	"bytes"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/legateproxy/legate/internal/nettest"
)

// recordingUpstream is a raw HTTP/1 upstream that answers every request head with a 200 and
// keeps every byte it receives, so a test can tell what reached it.
type recordingUpstream struct {
	addr string
	mu   sync.Mutex
	got  []byte // guarded by mu
}

func newRecordingUpstream(t *testing.T) *recordingUpstream {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &recordingUpstream{addr: ln.Addr().String()}
	nettest.Serve(t, ln, u.serve)
	return u
}

func (u *recordingUpstream) serve(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 4096)
	var pending []byte
	for {
		c.SetReadDeadline(time.Now().Add(wait))
		n, err := c.Read(buf)
		u.mu.Lock()
		u.got = append(u.got, buf[:n]...)
		u.mu.Unlock()
		pending = append(pending, buf[:n]...)
		for {
			i := bytes.Index(pending, []byte("\r\n\r\n"))
			if i < 0 {
				break
			}
			pending = pending[i+4:]
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
		}
		if err != nil {
			return
		}
	}
}

// received returns the bytes the upstream has received so far.
func (u *recordingUpstream) received() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return string(u.got)
}

// onlyRequest checks that the upstream received exactly one request, whose request line is
// line.
func (u *recordingUpstream) onlyRequest(t *testing.T, line string) {
	t.Helper()
	got := u.received()
	if strings.Count(got, "\r\n\r\n") != 1 || !strings.HasPrefix(got, line+"\r\n") {
		t.Errorf("upstream received %q; want only the request %q", got, line)
	}
}

// writeH2Head sends a HEADERS frame ending stream id with the given pseudo-header values,
// encoded by hand: the http2 client library refuses to send such values.
func writeH2Head(t *testing.T, fr *http2.Framer, id uint32, method, path, authority string) {
	t.Helper()
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	for _, f := range [][2]string{{":method", method}, {":scheme", "http"}, {":authority", authority}, {":path", path}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: b.Bytes(), EndHeaders: true, EndStream: true}); err != nil {
		t.Fatalf("writing HEADERS: %v", err)
	}
}

// h2Case is one HTTP/2 request with hand-made pseudo-headers and the answer it must get.
type h2Case struct {
	name, method, path, authority string
	want                          string // a status, or "reset"
}

// runH2Cases sends each case on its own stream of one connection, in order, and checks the
// answer each gets before the next is sent.
func runH2Cases(t *testing.T, addr string, cases []h2Case) {
	t.Helper()
	fr, _ := frameClient(t, addr)
	for i, tc := range cases {
		id := uint32(2*i + 1)
		writeH2Head(t, fr, id, tc.method, tc.path, tc.authority)
		if got := answer(t, fr, id); got != tc.want {
			t.Errorf("%s: answer %q; want %q", tc.name, got, tc.want)
		}
	}
}

// TestH2RequestLineInjection checks issue 14 item 6: an HTTP/2 request whose :method is not a
// token, or whose :path has a space or control character, is answered 400 at the HTTP/2
// intake and nothing of it reaches the HTTP/1 upstream (it used to be written word for word
// into the upstream request line, forging a second request line).
func TestH2RequestLineInjection(t *testing.T) {
	up := newRecordingUpstream(t)
	e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up.addr)}, hcm: simpleHCM("web", "")})
	runH2Cases(t, e.addr, []h2Case{
		{name: "method with a space", method: "GET /evil", path: "/", authority: "x", want: "400"},
		{name: "path with a space", method: "GET", path: "/x HTTP/1.1", authority: "x", want: "400"},
		// x/net/http2's server resets these streams itself before any handler runs.
		{name: "path with a tab", method: "GET", path: "/x\tHTTP/1.1", authority: "x", want: "reset"},
		{name: "method with a slash", method: "G/ET", path: "/", authority: "x", want: "400"},
		// Last, so that the upstream's record is complete once it is answered.
		{name: "valid", method: "GET", path: "/ok", authority: "x", want: "200"},
	})
	up.onlyRequest(t, "GET /ok HTTP/1.1")
}

// TestHostValidation checks issue 14 item 7: an absolute-form target with userinfo, a Host
// with a space or '@' (RFC 9112 §3.2, RFC 9110 §4.2.4) and an HTTP/2 :authority with
// userinfo or invalid characters are answered 400 and never forwarded (they used to reach
// the upstream as "Host: user:pw@evil.example").
func TestHostValidation(t *testing.T) {
	up := newRecordingUpstream(t)
	e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up.addr)}, hcm: simpleHCM("web", "")})
	for _, tc := range []struct{ name, req string }{
		{"absolute form with userinfo", "GET http://user:pw@evil.example/ HTTP/1.1\r\nHost: a\r\n\r\n"},
		{"Host with userinfo", "GET / HTTP/1.1\r\nHost: user@evil.example\r\n\r\n"},
		{"Host with a space", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n"},
		{"Host with a slash", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"},
	} {
		if got := e.rawRequest(tc.req, false); !strings.HasPrefix(got, "HTTP/1.1 400 ") {
			t.Errorf("%s: answer %q; want 400", tc.name, got)
		}
	}
	if got := e.stat("http.ingress.downstream_cx_protocol_error"); got != 4 {
		t.Errorf("downstream_cx_protocol_error = %d; want 4", got)
	}
	// x/net/http2's server resets these streams itself (RST_STREAM PROTOCOL_ERROR, as
	// nghttp2 does) before any handler runs; h2Malformed checks them again for Legate's part.
	runH2Cases(t, e.addr, []h2Case{
		{name: ":authority with userinfo", method: "GET", path: "/", authority: "user:pw@evil.example", want: "reset"},
		{name: ":authority with a space", method: "GET", path: "/", authority: "a b", want: "reset"},
		{name: ":authority with a slash", method: "GET", path: "/", authority: "a/b", want: "reset"},
	})
	if got := e.rawRequest("GET /ok HTTP/1.1\r\nHost: ok.example:80\r\nConnection: close\r\n\r\n", false); !strings.HasPrefix(got, "HTTP/1.1 200 ") {
		t.Errorf("valid request: answer %q; want 200", got)
	}
	up.onlyRequest(t, "GET /ok HTTP/1.1")
}

// TestBareLFRequest checks issue 14 item 8: a request head with bare LF line ends is
// answered 400 at once and the connection closed, counted in downstream_cx_protocol_error
// (it used to get no answer until the idle timeout closed the connection).
func TestBareLFRequest(t *testing.T) {
	up := newRecordingUpstream(t)
	e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up.addr)}, hcm: simpleHCM("web", "")})
	reqs := []string{
		"GET / HTTP/1.1\nHost: a\n\n",
		"GET / HTTP/1.1\r\nHost: a\n\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX: y\n\r\n",
	}
	for _, req := range reqs {
		// rawRequest reads until the proxy closes; the client does not close first.
		if got := e.rawRequest(req, false); !strings.HasPrefix(got, "HTTP/1.1 400 ") || !strings.Contains(got, "connection: close") {
			t.Errorf("%q: answer %q; want 400 with connection: close", req, got)
		}
	}
	if got := e.stat("http.ingress.downstream_cx_protocol_error"); got != uint64(len(reqs)) {
		t.Errorf("downstream_cx_protocol_error = %d; want %d", got, len(reqs))
	}
	if got := up.received(); got != "" {
		t.Errorf("upstream received %q; want nothing", got)
	}
}
