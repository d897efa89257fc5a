package httpproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/legateproxy/legate/listener"
)

// slowUpstream answers 200 "ok" after the delay in the x-delay request header (a Go
// duration; none answers at once). It serves HTTP/1.1 and prior-knowledge HTTP/2.
func slowUpstream(t testing.TB) *httptest.Server {
	return serveBothProtocols(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if d, err := time.ParseDuration(r.Header.Get("X-Delay")); err == nil {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		io.WriteString(w, "ok")
	}))
}

// rawConn is a downstream HTTP/1 connection written and read by hand.
type rawConn struct {
	t  testing.TB
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(wait))
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

func (rc *rawConn) write(s string) {
	rc.t.Helper()
	if _, err := io.WriteString(rc.c, s); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

// response reads one response and its body.
func (rc *rawConn) response() (*http.Response, string) {
	rc.t.Helper()
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		rc.t.Fatalf("reading response: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		rc.t.Fatalf("reading body: %v", err)
	}
	return resp, string(b)
}

// closed waits for the proxy to close the connection and reports whether it did (EOF or
// reset) rather than the wait running out.
func (rc *rawConn) closed() bool {
	var b [1]byte
	_, err := rc.br.Read(b[:])
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestIdleTimeoutCountsFromLastRequest checks that idle_timeout counts from the end of the
// connection's last request, not from when the connection opened: a request that takes
// 0.6 s of a 1 s idle timeout leaves the connection a whole second idle after its response
// (armIdle moves the idle period's start; the cached deadline, rescaleIdleFor, must move
// with it: without that the connection closed 0.4 s after the response).
func TestIdleTimeoutCountsFromLastRequest(t *testing.T) {
	up := slowUpstream(t)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm:      simpleHCM("web", "") + "stream_idle_timeout: 0s\ncommon_http_protocol_options: {idle_timeout: 1s}\n",
	})
	rc := dialRaw(t, e.addr)
	rc.write("GET / HTTP/1.1\r\nhost: a\r\nx-delay: 600ms\r\n\r\n")
	if resp, body := rc.response(); resp.StatusCode != http.StatusOK || body != "ok" {
		t.Fatalf("got %d %q; want 200 \"ok\"", resp.StatusCode, body)
	}
	if got := awaitClose(t, rc, time.Now()); got < 800*time.Millisecond {
		t.Errorf("idle connection closed %v after its last response; want about the 1s idle_timeout", got)
	}
}

func TestRequestHeadersTimeout(t *testing.T) {
	up := slowUpstream(t)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm:      simpleHCM("web", "") + "request_headers_timeout: 0.2s\n",
	})
	idle := dialRaw(t, e.addr) // opened first, sends nothing: only the idle timeout applies
	partial := dialRaw(t, e.addr)
	start := time.Now()
	partial.write("GET / HTTP/1.1\r\nhost: a\r\nx-partial: ")
	resp, body := partial.response()
	if got := time.Since(start); got < 200*time.Millisecond {
		t.Errorf("408 after %v; want >= 200ms", got)
	}
	if resp.StatusCode != http.StatusRequestTimeout || body != "request header timeout" || !resp.Close {
		t.Errorf("got %d %q close=%v; want 408 \"request header timeout\" with connection: close", resp.StatusCode, body, resp.Close)
	}
	if !partial.closed() {
		t.Error("connection still open after 408; want closed")
	}
	if got := e.stat("http.ingress.downstream_rq_header_timeout"); got != 1 {
		t.Errorf("downstream_rq_header_timeout = %d; want 1", got)
	}
	idle.write("GET / HTTP/1.1\r\nhost: a\r\n\r\n")
	if resp, body := idle.response(); resp.StatusCode != http.StatusOK || body != "ok" {
		t.Errorf("idle connection: got %d %q; want 200 \"ok\"", resp.StatusCode, body)
	}
}

func TestRequestTimeout(t *testing.T) {
	up := slowUpstream(t)
	e := newEnv(t, envOptions{
		clusters: []string{
			staticCluster("web", "", up.Listener.Addr().String()),
			staticCluster("web2", "http2_protocol_options: {}", up.Listener.Addr().String()),
		},
		hcm: twoRouteHCM("/h2", "web2", "web", "request_timeout: 0.3s"),
	})
	t.Run("http1 body stalls", func(t *testing.T) {
		rc := dialRaw(t, e.addr)
		rc.write("POST / HTTP/1.1\r\nhost: a\r\ncontent-length: 10\r\n\r\nabc")
		resp, body := rc.response()
		if resp.StatusCode != http.StatusRequestTimeout || body != "request timeout" || !resp.Close {
			t.Errorf("got %d %q close=%v; want 408 \"request timeout\" with connection: close", resp.StatusCode, body, resp.Close)
		}
	})
	for _, path := range []string{"/", "/h2"} {
		t.Run("h2c body stalls to "+path, func(t *testing.T) {
			pr, pw := io.Pipe()
			defer pw.Close()
			go pw.Write([]byte("abc")) // then nothing until the test ends
			req, err := http.NewRequest(http.MethodPost, "http://"+e.addr+path, pr)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := h2cClient(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestTimeout || string(b) != "request timeout" {
				t.Errorf("got %d %q; want 408 \"request timeout\"", resp.StatusCode, b)
			}
		})
	}
	t.Run("complete request waits for a slow upstream", func(t *testing.T) {
		for _, c := range []*http.Client{e.client(), h2cClient(t)} {
			resp, body := e.get(c, "/", "x-delay", "500ms")
			if resp.StatusCode != http.StatusOK || body != "ok" {
				t.Errorf("%s: got %d %q; want 200 \"ok\" (request_timeout ends with the request)", resp.Proto, resp.StatusCode, body)
			}
		}
	})
	if got := e.stat("http.ingress.downstream_rq_timeout"); got != 3 {
		t.Errorf("downstream_rq_timeout = %d; want 3", got)
	}
}

func TestMaxConnectionDurationHTTP1(t *testing.T) {
	up := slowUpstream(t)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm:      simpleHCM("web", "") + "common_http_protocol_options: {max_connection_duration: 0.3s}\ndrain_timeout: 0.3s\n",
	})
	t.Run("response in flight gets connection: close", func(t *testing.T) {
		rc := dialRaw(t, e.addr)
		rc.write("GET / HTTP/1.1\r\nhost: a\r\n\r\n")
		if resp, _ := rc.response(); resp.Close {
			t.Fatalf("first response has connection: close; want keep-alive")
		}
		rc.write("GET / HTTP/1.1\r\nhost: a\r\nx-delay: 500ms\r\n\r\n")
		if resp, body := rc.response(); resp.StatusCode != http.StatusOK || body != "ok" || !resp.Close {
			t.Errorf("got %d %q close=%v; want 200 \"ok\" with connection: close", resp.StatusCode, body, resp.Close)
		}
		if !rc.closed() {
			t.Error("connection still open; want closed")
		}
	})
	t.Run("idle connection closes after the drain", func(t *testing.T) {
		rc := dialRaw(t, e.addr)
		start := time.Now()
		rc.write("GET / HTTP/1.1\r\nhost: a\r\n\r\n")
		rc.response()
		if !rc.closed() {
			t.Fatal("connection still open; want closed")
		}
		if got := time.Since(start); got < 600*time.Millisecond {
			t.Errorf("closed after %v; want >= max_connection_duration + drain_timeout = 600ms", got)
		}
	})
	if got := e.stat("http.ingress.downstream_cx_max_duration_reached"); got != 2 {
		t.Errorf("downstream_cx_max_duration_reached = %d; want 2", got)
	}
}

// h2cConn opens a prior-knowledge HTTP/2 client connection to addr.
func h2cConn(t testing.TB, addr string) (*http2.ClientConn, net.Conn) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(context.Context, string, string, *tls.Config) (net.Conn, error) {
		return nil, errors.New("no dialing")
	}}
	cc, err := tr.NewClientConn(c)
	if err != nil {
		t.Fatal(err)
	}
	return cc, c
}

func h2Get(cc *http2.ClientConn, addr string, hdr ...string) (int, string, error) {
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := cc.RoundTrip(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func TestMaxConnectionDurationHTTP2(t *testing.T) {
	up := slowUpstream(t)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm:      simpleHCM("web", "") + "common_http_protocol_options: {max_connection_duration: 0.3s}\ndrain_timeout: 0.4s\n",
	})
	t.Run("stream in flight finishes after GOAWAY", func(t *testing.T) {
		cc, _ := h2cConn(t, e.addr)
		if code, _, err := h2Get(cc, e.addr); err != nil || code != 200 {
			t.Fatalf("first request: %d, %v; want 200", code, err)
		}
		code, body, err := h2Get(cc, e.addr, "x-delay", "500ms") // GOAWAY at 300 ms, done at ~500 ms
		if err != nil || code != http.StatusOK || body != "ok" {
			t.Errorf("in-flight request: %d %q %v; want 200 \"ok\"", code, body, err)
		}
		if cc.CanTakeNewRequest() {
			t.Error("connection takes new requests after max_connection_duration; want GOAWAY received")
		}
	})
	t.Run("stream longer than drain_timeout is cut", func(t *testing.T) {
		// The upper bound is the upstream's answer at 4 s: a cut the client sees (an error,
		// not the answer) came before it. A loaded machine delays that answer's timer as it
		// does the proxy's, where a fixed bound (1.8 s) failed; and any timeout a wrong
		// implementation would fall back to (Envoy's default drain_timeout, 5 s; the route's
		// 15 s) lets the answer through.
		cc, _ := h2cConn(t, e.addr)
		start := time.Now()
		_, _, err := h2Get(cc, e.addr, "x-delay", "4s")
		if err == nil {
			t.Fatal("request outlived max_connection_duration + drain_timeout; want the connection closed")
		}
		if got := time.Since(start); got < 700*time.Millisecond {
			t.Errorf("cut after %v; want about 700ms (max_connection_duration + drain_timeout)", got)
		}
	})
	t.Run("idle connection gets GOAWAY and closes", func(t *testing.T) {
		fr := rawH2(t, e.addr)
		start := time.Now()
		goAway := readGoAway(t, fr)
		if got := time.Since(start); got < 250*time.Millisecond {
			t.Errorf("GOAWAY after %v; want about 300ms", got)
		}
		if goAway.ErrCode != http2.ErrCodeNo {
			t.Errorf("GOAWAY code %v; want NO_ERROR", goAway.ErrCode)
		}
		for {
			if _, err := fr.ReadFrame(); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatal("connection still open; want closed after GOAWAY")
				}
				break
			}
		}
	})
	if got := e.stat("http.ingress.downstream_cx_max_duration_reached"); got != 3 {
		t.Errorf("downstream_cx_max_duration_reached = %d; want 3", got)
	}
}

// rawH2 opens a prior-knowledge HTTP/2 connection and sends the client preface and SETTINGS.
func rawH2(t testing.TB, addr string) *http2.Framer {
	t.Helper()
	c := dialRaw(t, addr).c
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	fr.WriteSettings()
	return fr
}

// readGoAway reads frames (acknowledging SETTINGS) until a GOAWAY.
func readGoAway(t testing.TB, fr *http2.Framer) *http2.GoAwayFrame {
	t.Helper()
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("ReadFrame: %v; want GOAWAY", err)
		}
		if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
			fr.WriteSettingsAck()
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			return g
		}
	}
}

// TestDrainReachesConnectionsWithOwnServer drains a listener whose HTTP/2 connections are
// served by per-connection servers (max_connection_duration set): they get GOAWAY too.
func TestDrainReachesConnectionsWithOwnServer(t *testing.T) {
	up := slowUpstream(t)
	e := newEnv(t, envOptions{
		clusters:  []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm:       simpleHCM("web", "") + "common_http_protocol_options: {max_connection_duration: 3600s}\n",
		drainTime: time.Minute, drainNow: true,
	})
	fr := rawH2(t, e.addr)
	cc, _ := h2cConn(t, e.addr)
	if code, _, err := h2Get(cc, e.addr); err != nil || code != 200 {
		t.Fatalf("request before the drain: %d, %v; want 200", code, err)
	}
	// The server's SETTINGS says the raw connection is served, so the drain can reach it.
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("ReadFrame: %v; want the server's SETTINGS", err)
		}
		if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
			fr.WriteSettingsAck()
			break
		}
	}
	e.lm.DrainListeners(listener.DrainRequest{Graceful: true, SkipExit: true}, nil)
	if g := readGoAway(t, fr); g.ErrCode != http2.ErrCodeNo {
		t.Errorf("GOAWAY code %v; want NO_ERROR", g.ErrCode)
	}
	if got := e.stat("http.ingress.downstream_cx_max_duration_reached"); got != 0 {
		t.Errorf("downstream_cx_max_duration_reached = %d; want 0", got)
	}
}
