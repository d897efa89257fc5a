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

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
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

// tooLargeEnv is Legate in front of an upstream (HTTP/1.1 and h2c) that answers 413 after
// reading 4 KB of a request body; clusterExtra configures cluster web.
func tooLargeEnv(t *testing.T, clusterExtra string) *env {
	up := serveBothProtocols(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.CopyN(io.Discard, r.Body, 4<<10)
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
	}))
	return newEnv(t, envOptions{clusters: []string{staticCluster("web", clusterExtra, up.Listener.Addr().String())}, hcm: simpleHCM("web", "")})
}

// TestEarlyUpstreamAnswer: the upstream (HTTP/1.1 or HTTP/2) answers 413 after reading a few
// KB of a 10 MB upload. An HTTP/1.1 client and an HTTP/2 client uploading through Legate both
// get the 413; the HTTP/1.1 connection closes after it, as the rest of the upload is not read.
func TestEarlyUpstreamAnswer(t *testing.T) {
	upload := bytes.Repeat([]byte("x"), 10<<20)
	for _, upstream := range []string{"http1", "h2c"} {
		extra := ""
		if upstream == "h2c" {
			extra = "http2_protocol_options: {}"
		}
		e := tooLargeEnv(t, extra)
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

// TestEarlyUpstreamAnswerEndsHTTP2Stream: over HTTP/2, the early 413 reaches the client as
// the stream's response, and the stream then ends on the request side with RST_STREAM
// NO_ERROR (the rest of the upload is not wanted), the connection staying open.
func TestEarlyUpstreamAnswerEndsHTTP2Stream(t *testing.T) {
	e := tooLargeEnv(t, "")
	fr := rawH2(t, e.addr)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "example.com"},
		{":path", "/upload"}, {"content-length", "10485760"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 16<<10)
	for range 3 { // within the initial 64 KiB windows
		if err := fr.WriteData(1, false, chunk); err != nil {
			t.Fatal(err)
		}
	}
	var status string
	var body []byte
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("ReadFrame: %v; want the response, then RST_STREAM", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			status = f.PseudoValue("status")
		case *http2.DataFrame:
			body = append(body, f.Data()...)
		case *http2.RSTStreamFrame:
			if status != "413" || string(body) != "too large\n" {
				t.Errorf("response before RST_STREAM = %s %q; want 413 \"too large\\n\"", status, body)
			}
			if f.ErrCode != http2.ErrCodeNo {
				t.Errorf("RST_STREAM %v; want NO_ERROR", f.ErrCode)
			}
			return
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v; want the stream alone to end", f.ErrCode)
		}
	}
}

// TestEarlyUpstreamAnswerToStalledClient: an HTTP/1.1 client sends part of a 10 MB upload and
// pauses. The upstream's early 413 reaches it at once, with connection: close, rather than
// when it sends more.
func TestEarlyUpstreamAnswerToStalledClient(t *testing.T) {
	for _, upstream := range []string{"http1", "h2c"} {
		t.Run("to "+upstream, func(t *testing.T) {
			extra := ""
			if upstream == "h2c" {
				extra = "http2_protocol_options: {}"
			}
			e := tooLargeEnv(t, extra)
			rc := dialRaw(t, e.addr)
			rc.write("POST /upload HTTP/1.1\r\nHost: example.com\r\nContent-Length: 10485760\r\n\r\n" + strings.Repeat("x", 48<<10))
			resp, err := http.ReadResponse(rc.br, nil)
			if err != nil {
				t.Fatalf("reading the response while the upload is paused: %v; want 413", err)
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("reading the response body while the upload is paused: %v", err)
			}
			if resp.StatusCode != http.StatusRequestEntityTooLarge || string(body) != "too large\n" || !resp.Close {
				t.Errorf("response = %d %q, close %v; want 413 \"too large\\n\" with connection: close", resp.StatusCode, body, resp.Close)
			}
		})
	}
}
