package httpproxy

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/legateproxy/legate/internal/nettest"
)

// TestUpstreamBytesNeverReachAnotherClient: an upstream leaves bytes after a response (past
// its content-length, as the body of a HEAD, 204 or 304 response, or on the connection once
// idle). Another client, on its own downstream connection (HTTP/1.1 or HTTP/2), then sends a
// request through Legate: it must get its own response from a new upstream connection, and
// the stray bytes count as upstream_cx_protocol_error.
func TestUpstreamBytesNeverReachAnotherClient(t *testing.T) {
	const stray = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled"
	tests := []struct {
		name   string
		method string
		first  string // the answer to the first client's request
		later  string // written on the connection once it is idle
	}{
		{name: "bytes past content-length", method: "GET", first: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst" + stray},
		{name: "body with HEAD", method: "HEAD", first: "HTTP/1.1 200 OK\r\nContent-Length: 44\r\n\r\n" + stray},
		{name: "body with 204", method: "GET", first: "HTTP/1.1 204 No Content\r\n\r\n" + stray},
		{name: "body with 304", method: "GET", first: "HTTP/1.1 304 Not Modified\r\n\r\n" + stray},
		{name: "bytes on the idle connection", method: "GET", first: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst", later: stray},
	}
	clients := []struct {
		name string
		new  func(t *testing.T, e *env) *http.Client
	}{
		{"http1", func(_ *testing.T, e *env) *http.Client { return e.client() }},
		{"h2c", func(t *testing.T, _ *env) *http.Client { return h2cClient(t) }},
	}
	for _, tt := range tests {
		for _, cl := range clients {
			t.Run(tt.name+" "+cl.name, func(t *testing.T) {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				script := &nettest.StrayBytes{First: tt.first, Later: tt.later, LaterSent: make(chan struct{}, 1),
					Other: "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond"}
				accepted := nettest.ServeHTTP1(t, ln, script.Answer)
				e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", ln.Addr().String())}, hcm: simpleHCM("web", "")})

				req, err := http.NewRequest(tt.method, "http://"+e.addr+"/first", nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := cl.new(t, e).Do(req)
				if err != nil {
					t.Fatalf("first client: %v", err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if tt.later != "" {
					select {
					case <-script.LaterSent:
					case <-time.After(wait):
						t.Fatal("upstream did not write on the idle connection")
					}
				}

				second := cl.new(t, e)
				for i := range 3 { // every later response on the connection would be shifted
					resp, err := second.Get("http://" + e.addr + "/second")
					if err != nil {
						t.Fatalf("second client, request %d: %v", i, err)
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 || string(body) != "second" {
						t.Errorf("second client, request %d = %d %q; want 200 \"second\"", i, resp.StatusCode, body)
					}
				}
				if got := e.stat("cluster.web.upstream_cx_protocol_error"); got != 1 {
					t.Errorf("upstream_cx_protocol_error = %d; want 1", got)
				}
				if got := accepted.Load(); got != 2 {
					t.Errorf("upstream connections = %d; want 2", got)
				}
			})
		}
	}
}
