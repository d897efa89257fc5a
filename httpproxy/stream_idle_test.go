package httpproxy

import (
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestStreamIdleTimeoutAwaitingResponse checks stream_idle_timeout once the request is
// complete, as Envoy's connection manager runs it: an upstream that takes the request and
// sends nothing gets the stream 504 "stream timeout" (SI, stream_idle_timeout) at the idle
// timeout even with the route's timeout disabled, for requests with and without a body, from
// HTTP/1.1 and HTTP/2 clients, to HTTP/1.1 and HTTP/2 upstreams; it is counted in
// downstream_rq_idle_timeout and never as an upstream timeout, and an HTTP/1.1 connection
// stays usable after it.
func TestStreamIdleTimeoutAwaitingResponse(t *testing.T) {
	e, logPath := slowUploadEnv(t, "stream_idle_timeout: 1s")
	var want []string
	for _, path := range []string{"/", "/h2"} {
		rc := dialRaw(t, e.addr)
		for _, req := range []string{
			"GET " + path + " HTTP/1.1\r\nhost: a\r\nx-delay: 60s\r\nx-envoy-upstream-rq-timeout-ms: 0\r\n\r\n",
			"POST " + path + " HTTP/1.1\r\nhost: a\r\nx-delay: 60s\r\nx-envoy-upstream-rq-timeout-ms: 0\r\ncontent-length: 3\r\n\r\nabc",
		} {
			start := time.Now()
			rc.write(req)
			resp, body := rc.response()
			checkAwaitTimeout(t, "http1 "+path, start, resp, body)
			want = append(want, "504 SI stream_idle_timeout")
		}
		rc.write("GET " + path + " HTTP/1.1\r\nhost: a\r\n\r\n") // the same connection
		if resp, body := rc.response(); resp.StatusCode != http.StatusOK || body != "ok" {
			t.Errorf("http1 %s: next request on the connection: got %d %q; want 200 \"ok\"", path, resp.StatusCode, body)
		}
		want = append(want, "200 - via_upstream")

		c := h2cClient(t)
		for _, body := range []io.Reader{nil, strings.NewReader("abc")} {
			req, err := http.NewRequest(http.MethodPost, "http://"+e.addr+path, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("x-delay", "60s")
			req.Header.Set("x-envoy-upstream-rq-timeout-ms", "0")
			start := time.Now()
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			checkAwaitTimeout(t, "http2 "+path, start, resp, string(b))
			want = append(want, "504 SI stream_idle_timeout")
		}
	}
	if got := e.stat("http.ingress.downstream_rq_idle_timeout"); got != 8 {
		t.Errorf("downstream_rq_idle_timeout = %d; want 8", got)
	}
	for _, name := range []string{"cluster.web.upstream_rq_timeout", "cluster.web2.upstream_rq_timeout"} {
		if got := e.stat(name); got != 0 {
			t.Errorf("%s = %d; want 0 (the stream's idle timer ended the requests)", name, got)
		}
	}
	if diff := cmp.Diff(want, e.readLog(t, logPath)); diff != "" {
		t.Errorf("access log (-want +got):\n%s", diff)
	}
}

// checkAwaitTimeout checks a response to a complete request the upstream never answered:
// stream_idle_timeout's 504, not before the timeout (1 s) and well before the upstream's
// 60 s.
func checkAwaitTimeout(t *testing.T, what string, start time.Time, resp *http.Response, body string) {
	t.Helper()
	if resp.StatusCode != http.StatusGatewayTimeout || body != bodyStreamTimeout {
		t.Errorf("%s: got %d %q; want 504 %q", what, resp.StatusCode, body, bodyStreamTimeout)
	}
	if got := time.Since(start); got < time.Second {
		t.Errorf("%s: answered after %v; want the stream idle timeout (1s)", what, got)
	}
}

// streamingUpstream answers with x-chunks chunks of "x", the first at once and each next
// one after x-gap; after the first it stalls for x-stall (until the request ends) instead
// when x-stall is set.
func streamingUpstream(t *testing.T) string {
	up := serveBothProtocols(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.Header.Get("x-chunks"))
		gap, _ := time.ParseDuration(r.Header.Get("x-gap"))
		stall, _ := time.ParseDuration(r.Header.Get("x-stall"))
		for i := 0; i < n; i++ {
			if i > 0 {
				pause := gap
				if stall > 0 {
					pause = stall
				}
				select {
				case <-time.After(pause): // the pacing under test
				case <-r.Context().Done():
					return
				}
			}
			io.WriteString(w, "x")
			w.(http.Flusher).Flush()
		}
	}))
	return up.Listener.Addr().String()
}

// TestStreamIdleTimeoutStreamedResponse checks stream_idle_timeout while a response streams,
// and the route's idle_timeout overriding the connection manager's: a response whose chunks
// come every 0.3 s for 1.8 s with a 2 s timeout is served whole (the margin is wide so that a
// loaded machine's scheduling delays do not read as a stall); one that stalls after its
// first chunk is reset at the timeout (HTTP/1.1: the connection closes before the chunked
// body's end; HTTP/2: RST_STREAM), counted in downstream_rq_idle_timeout; a route's
// idle_timeout of 0.5 s ends a wait the connection manager's timeout (there 300 s) would not.
func TestStreamIdleTimeoutStreamedResponse(t *testing.T) {
	addr := streamingUpstream(t)
	logPath := filepath.Join(t.TempDir(), "access.log")
	e := newEnv(t, envOptions{
		clusters: []string{
			staticCluster("web", "", addr),
			staticCluster("web2", "http2_protocol_options: {}", addr),
		},
		hcm: `stat_prefix: ingress
stream_idle_timeout: 2s
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: {prefix: "/h2"}
      route: {cluster: web2, timeout: 0s}
    - match: {prefix: "/"}
      route: {cluster: web, timeout: 0s}
access_log:` + fileLogYAML(logPath, "%RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS%\n", ""),
	})
	h1, h2 := e.client(), h2cClient(t)
	do := func(c *http.Client, path string, hdr ...string) (*http.Response, string, error) {
		return getAt(t, c, e.addr, path, hdr...)
	}
	var want []string
	for _, path := range []string{"/", "/h2"} {
		for name, c := range map[string]*http.Client{"http1": h1, "http2": h2} {
			resp, body, err := do(c, path, "x-chunks", "7", "x-gap", "300ms")
			if err != nil || resp.StatusCode != http.StatusOK || body != strings.Repeat("x", 7) {
				t.Errorf("%s %s paced response: %v %q; want 200 and 7 bytes", name, path, err, body)
			}
			want = append(want, "200 - via_upstream")
			start := time.Now()
			_, body, err = do(c, path, "x-chunks", "2", "x-stall", "60s")
			if err == nil || body != "x" {
				t.Errorf("%s %s stalled response: body %q, error %v; want the first chunk and an error", name, path, body, err)
			}
			if got := time.Since(start); got < 2*time.Second || got > wait {
				t.Errorf("%s %s stalled response ended after %v; want the stream idle timeout (2s)", name, path, got)
			}
			want = append(want, "200 SI stream_idle_timeout")
		}
	}
	if got := e.stat("http.ingress.downstream_rq_idle_timeout"); got != 4 {
		t.Errorf("downstream_rq_idle_timeout = %d; want 4", got)
	}
	if diff := cmp.Diff(want, e.readLog(t, logPath)); diff != "" {
		t.Errorf("access log (-want +got):\n%s", diff)
	}

	// The route's idle_timeout overrides a connection manager's timeout longer than the
	// upstream's stall and the client's own timeout (wait): only the route's 0.5 s can end
	// the response, so its upper bound is an event, not a guess at how late a busy machine
	// runs a 0.5 s timer: the stream ends in an error the client did not cause. (Set
	// against a 2 s timeout, a bound between the two failed under load.)
	short := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", addr)},
		hcm:      simpleHCM("web", ", timeout: 0s, idle_timeout: 0.5s") + "stream_idle_timeout: 300s\n",
	})
	start := time.Now()
	resp, body, err := getAt(t, h1, short.addr, "/", "x-chunks", "2", "x-stall", "60s")
	if err == nil || body != "x" || resp.StatusCode != http.StatusOK {
		t.Errorf("route idle_timeout: body %q, error %v; want the first chunk and an error", body, err)
	}
	var ne net.Error
	if got := time.Since(start); got < 500*time.Millisecond || errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("route idle_timeout: ended after %v (%v); want the route's 0.5s, not the client's timeout", got, err)
	}
	if got := short.stat("http.ingress.downstream_rq_idle_timeout"); got != 1 {
		t.Errorf("route idle_timeout: downstream_rq_idle_timeout = %d; want 1", got)
	}
}

// getAt sends a GET for path to addr with the header pairs hdr and reads the whole body.
func getAt(t *testing.T, c *http.Client, addr, path string, hdr ...string) (*http.Response, string, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), err
}
