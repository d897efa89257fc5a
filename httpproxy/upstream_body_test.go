package httpproxy

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestPostAfterUpstreamIdleClose: an upstream with a keep-alive timeout (net/http's
// IdleTimeout, as Node.js, nginx and gunicorn have) closes the idle connection before each
// POST; every POST still succeeds.
func TestPostAfterUpstreamIdleClose(t *testing.T) {
	closed := make(chan struct{}, 10)
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	up.Config.IdleTimeout = 50 * time.Millisecond
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed <- struct{}{}
		}
	}
	up.Start()
	defer up.Close()
	e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up.Listener.Addr().String())}, hcm: simpleHCM("web", "")})
	c := e.client()
	for i := range 3 {
		resp, err := c.Post("http://"+e.addr+"/", "text/plain", strings.NewReader("hello"))
		if err != nil {
			t.Fatalf("POST %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "hello" {
			t.Errorf("POST %d = %d %q; want 200 \"hello\"", i, resp.StatusCode, body)
		}
		select {
		case <-closed: // the upstream's idle timeout
		case <-time.After(wait):
			t.Fatal("upstream did not close its idle connection")
		}
	}
}

// TestEarlyUpstreamAnswer: the upstream (HTTP/1.1 or HTTP/2) answers 413 after reading a few
// KB of a 10 MB upload. An HTTP/1.1 client and an HTTP/2 client uploading through Legate both
// get the 413; the HTTP/1.1 connection closes after it, as the rest of the upload is not read.
func TestEarlyUpstreamAnswer(t *testing.T) {
	tooLarge := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.CopyN(io.Discard, r.Body, 4<<10)
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
	})
	upload := bytes.Repeat([]byte("x"), 10<<20)
	for _, upstream := range []string{"http1", "h2c"} {
		up := serveBothProtocols(t, tooLarge)
		extra := ""
		if upstream == "h2c" {
			extra = "http2_protocol_options: {}"
		}
		e := newEnv(t, envOptions{clusters: []string{staticCluster("web", extra, up.Listener.Addr().String())}, hcm: simpleHCM("web", "")})
		clients := []struct {
			name string
			c    *http.Client
		}{
			{"http1", e.client()},
			{"h2c", h2cClient(t)},
		}
		for _, cl := range clients {
			t.Run(cl.name+" to "+upstream, func(t *testing.T) {
				for i := range 3 {
					resp, err := cl.c.Post("http://"+e.addr+"/upload", "application/octet-stream", bytes.NewReader(upload))
					if err != nil {
						t.Fatalf("upload %d: %v; want a 413 response", i, err)
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusRequestEntityTooLarge || string(body) != "too large\n" {
						t.Errorf("upload %d = %d %q; want 413 \"too large\\n\"", i, resp.StatusCode, body)
					}
					if cl.name == "http1" && !resp.Close {
						t.Errorf("upload %d: response without connection: close; want the connection closed (the rest of the upload is not read)", i)
					}
				}
			})
		}
	}
}
