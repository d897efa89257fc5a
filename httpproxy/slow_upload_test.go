package httpproxy

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// slowUploadEnv serves /h2 from web2 (HTTP/2) and the rest from web (HTTP/1.1), both
// slowUpstream, with the connection manager's extra fields and an access log of each
// request's code, flags and details; it returns the env and the log's path. The requests of
// the tests set the route's timeout with x-envoy-upstream-rq-timeout-ms.
func slowUploadEnv(t *testing.T, extra string) (*env, string) {
	up := slowUpstream(t)
	path := filepath.Join(t.TempDir(), "access.log")
	e := newEnv(t, envOptions{
		clusters: []string{
			staticCluster("web", "", up.Listener.Addr().String()),
			staticCluster("web2", "http2_protocol_options: {}", up.Listener.Addr().String()),
		},
		hcm: twoRouteHCM("/h2", "web2", "web", extra+"\naccess_log:"+fileLogYAML(path, "%RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS%\n", "")),
	})
	return e, path
}

// trickleH1 sends a chunked HTTP/1.1 POST to path whose body is one byte every gap, n times,
// with the route timeout timeoutMs, the upstream's delay and the extra header lines, and
// returns the connection, the time the body ended and the response.
func trickleH1(t *testing.T, e *env, path, timeoutMs, delay string, n int, gap time.Duration, extra ...string) (*rawConn, time.Time, *http.Response, string) {
	rc := dialRaw(t, e.addr)
	rc.c.SetDeadline(time.Now().Add(wait + time.Duration(n)*gap))
	head := "POST " + path + " HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\nx-delay: " + delay + "\r\nx-envoy-upstream-rq-timeout-ms: " + timeoutMs + "\r\n"
	for _, line := range extra {
		head += line + "\r\n"
	}
	rc.write(head + "\r\n")
	for i := 0; i < n; i++ {
		time.Sleep(gap) // the pacing under test
		if _, err := io.WriteString(rc.c, "1\r\nx\r\n"); err != nil {
			break // the proxy answered and closed: the response tells
		}
	}
	io.WriteString(rc.c, "0\r\n\r\n")
	end := time.Now()
	resp, body := rc.response()
	return rc, end, resp, body
}

// trickleH2 is trickleH1 over h2c; it returns the time the body ended (or stopped) and the
// response.
func trickleH2(t *testing.T, e *env, path, timeoutMs, delay string, n int, gap time.Duration) (time.Time, *http.Response, string) {
	pr, pw := io.Pipe()
	ended := make(chan time.Time, 1)
	go func() {
		defer func() { ended <- time.Now() }()
		for i := 0; i < n; i++ {
			time.Sleep(gap) // the pacing under test
			if _, err := pw.Write([]byte("x")); err != nil {
				return
			}
		}
		pw.Close()
	}()
	defer pw.Close()
	req, err := http.NewRequest(http.MethodPost, "http://"+e.addr+path, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-delay", delay)
	req.Header.Set("x-envoy-upstream-rq-timeout-ms", timeoutMs)
	c := h2cClient(t)
	c.Timeout = wait + time.Duration(n)*gap
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	pw.CloseWithError(io.ErrClosedPipe)
	return <-ended, resp, string(b)
}

// TestRouteTimeoutStartsAtRequestEnd checks that the route's timeout runs from the end of the
// request body, as Envoy's does: an upload trickled over longer than the timeout reaches an
// upstream that answers at once after it (200, no upstream_rq_timeout), to HTTP/1.1 and
// HTTP/2 upstreams, from HTTP/1.1 and HTTP/2 clients, and with retries (which buffer the
// body first); a complete body to a slow upstream still gets 504 at the timeout, counted in
// upstream_rq_timeout.
func TestRouteTimeoutStartsAtRequestEnd(t *testing.T) {
	e, _ := slowUploadEnv(t, "stream_idle_timeout: 2s")
	for _, path := range []string{"/", "/h2"} {
		_, _, resp, body := trickleH1(t, e, path, "400", "0s", 8, 100*time.Millisecond)
		if resp.StatusCode != http.StatusOK || body != "ok" {
			t.Errorf("http1 upload over 0.8s to %s: got %d %q; want 200 \"ok\"", path, resp.StatusCode, body)
		}
		_, resp, body = trickleH2(t, e, path, "400", "0s", 8, 100*time.Millisecond)
		if resp.StatusCode != http.StatusOK || body != "ok" {
			t.Errorf("http2 upload over 0.8s to %s: got %d %q; want 200 \"ok\"", path, resp.StatusCode, body)
		}
	}
	// Retries buffer the body before the first attempt: the timeout starts after it.
	_, _, resp, body := trickleH1(t, e, "/", "400", "0s", 8, 100*time.Millisecond, "x-envoy-retry-on: 5xx", "x-envoy-max-retries: 1")
	if resp.StatusCode != http.StatusOK || body != "ok" {
		t.Errorf("http1 upload over 0.8s with retries: got %d %q; want 200 \"ok\"", resp.StatusCode, body)
	}
	for _, name := range []string{"cluster.web.upstream_rq_timeout", "cluster.web2.upstream_rq_timeout"} {
		if got := e.stat(name); got != 0 {
			t.Errorf("%s = %d after slow uploads; want 0", name, got)
		}
	}
	for _, path := range []string{"/", "/h2"} {
		rc, end, resp, body := trickleH1(t, e, path, "400", "5s", 2, 10*time.Millisecond)
		if got := time.Since(end); got < 400*time.Millisecond {
			t.Errorf("%s: answered %v after the body; want the route timeout (0.4s)", path, got)
		}
		if resp.StatusCode != http.StatusGatewayTimeout || body != bodyUpstreamTimeout {
			t.Errorf("%s: slow upstream: got %d %q; want 504 %q", path, resp.StatusCode, body, bodyUpstreamTimeout)
		}
		rc.c.Close()
	}
	for _, name := range []string{"cluster.web.upstream_rq_timeout", "cluster.web2.upstream_rq_timeout"} {
		if got := e.stat(name); got != 1 {
			t.Errorf("%s = %d; want 1", name, got)
		}
	}
}

// TestStreamIdleTimeoutResetsOnBodyBytes checks stream_idle_timeout on request bodies: it
// runs from the last byte, so an upload trickled a byte every 0.3s for 3s with a 1s timeout
// is served, on HTTP/1.1 and HTTP/2; a 2s pause gets 408 "stream timeout", the SI flag and
// the stream_idle_timeout details, counted in downstream_rq_idle_timeout and never as an
// upstream timeout. The connection's shorter idle timeout does not apply while a request
// is in progress.
func TestStreamIdleTimeoutResetsOnBodyBytes(t *testing.T) {
	e, logPath := slowUploadEnv(t, "stream_idle_timeout: 1s\ncommon_http_protocol_options: {idle_timeout: 0.5s}")
	_, _, resp, body := trickleH1(t, e, "/", "10000", "0s", 10, 300*time.Millisecond)
	if resp.StatusCode != http.StatusOK || body != "ok" {
		t.Errorf("http1 trickle: got %d %q; want 200 \"ok\"", resp.StatusCode, body)
	}
	_, resp, body = trickleH2(t, e, "/", "10000", "0s", 10, 300*time.Millisecond)
	if resp.StatusCode != http.StatusOK || body != "ok" {
		t.Errorf("http2 trickle: got %d %q; want 200 \"ok\"", resp.StatusCode, body)
	}
	if got := e.stat("http.ingress.downstream_rq_idle_timeout"); got != 0 {
		t.Errorf("downstream_rq_idle_timeout = %d after trickles; want 0", got)
	}

	rc, _, resp, body := trickleH1(t, e, "/", "10000", "0s", 2, 2*time.Second)
	if resp.StatusCode != http.StatusRequestTimeout || body != bodyStreamTimeout || !resp.Close {
		t.Errorf("http1 pause: got %d %q close=%v; want 408 %q with connection: close", resp.StatusCode, body, resp.Close, bodyStreamTimeout)
	}
	if !rc.closed() {
		t.Error("http1 pause: connection still open after the 408")
	}
	if diff := cmp.Diff([]string{"200 - via_upstream", "200 - via_upstream", "408 SI stream_idle_timeout"}, e.readLog(t, logPath)); diff != "" {
		t.Errorf("access log (-want +got):\n%s", diff)
	}
	_, resp, body = trickleH2(t, e, "/", "10000", "0s", 2, 2*time.Second)
	checkIdleTimeout(t, e, "http2 pause", resp, body, 2)
	if log := e.readLog(t, logPath); len(log) != 4 || log[3] != "408 SI stream_idle_timeout" {
		t.Errorf("access log %q; want a fourth line \"408 SI stream_idle_timeout\"", log)
	}
}

// TestStreamIdleTimeoutUpstreamNotReading checks stream_idle_timeout when neither side
// moves and no read of the client waits: an upstream that accepts a request and reads none
// of its body holds the proxy's body writer once the socket buffers are full. Envoy's timer
// sees no byte either way and answers 408 "stream timeout" (SI); the route's timeout, which
// starts only with the body's end, does not apply.
func TestStreamIdleTimeoutUpstreamNotReading(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() }) // held open, never read
		}
	}()
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", ln.Addr().String())},
		hcm:      simpleHCM("web", "") + "stream_idle_timeout: 1s\n",
	})
	rc := dialRaw(t, e.addr)
	const size = 256 << 20
	rc.write("POST / HTTP/1.1\r\nhost: a\r\ncontent-length: " + strconv.Itoa(size) + "\r\n\r\n")
	go func() {
		chunk := make([]byte, 64<<10)
		for sent := 0; sent < size; sent += len(chunk) {
			if _, err := rc.c.Write(chunk); err != nil {
				return // the proxy answered and closed
			}
		}
	}()
	resp, body := rc.response()
	checkIdleTimeout(t, e, "upstream not reading", resp, body, 1)
}

// checkIdleTimeout checks that what got resp and body was stream_idle_timeout's 408, the
// count-th counted in downstream_rq_idle_timeout, and none of them an upstream timeout.
func checkIdleTimeout(t *testing.T, e *env, what string, resp *http.Response, body string, count uint64) {
	t.Helper()
	if resp.StatusCode != http.StatusRequestTimeout || body != bodyStreamTimeout {
		t.Errorf("%s: got %d %q; want 408 %q", what, resp.StatusCode, body, bodyStreamTimeout)
	}
	if got := e.stat("http.ingress.downstream_rq_idle_timeout"); got != count {
		t.Errorf("downstream_rq_idle_timeout = %d; want %d", got, count)
	}
	if got := e.stat("cluster.web.upstream_rq_timeout"); got != 0 {
		t.Errorf("upstream_rq_timeout = %d; want 0 (the client was idle, not the upstream)", got)
	}
}
