package httpproxy

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// h2cUpstream is echo served over prior-knowledge HTTP/2 and HTTP/1.1.
func h2cUpstream(t testing.TB, name string) *httptest.Server {
	return serveBothProtocols(t, echo(t, name).Config.Handler)
}

// serveBothProtocols serves h over HTTP/1.1 and prior-knowledge HTTP/2 on one port.
func serveBothProtocols(t testing.TB, h http.Handler) *httptest.Server {
	s := httptest.NewUnstartedServer(h)
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetHTTP1(true)
	s.Config.Protocols.SetUnencryptedHTTP2(true)
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// twoRouteHCM is an HttpConnectionManager YAML routing prefix to cluster and everything else
// to fallback, with extra top-level fields.
func twoRouteHCM(prefix, cluster, fallback, extra string) string {
	return fmt.Sprintf(`stat_prefix: ingress
%s
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: {prefix: %q}
      route: {cluster: %s}
    - match: {prefix: "/"}
      route: {cluster: %s}
`, extra, prefix, cluster, fallback)
}

// TestH2HeaderStringsSurviveStreamReuse sends many requests with distinct header values
// through HTTP/2 on both sides. http2's HPACK encoders keep header strings in their dynamic
// tables after a stream ends; the connection manager reuses its per-stream buffers, so a
// string that aliased one of them changed under the table (hpack "id <= evictCount" panics
// under load, and headers of later requests encoded from stale entries).
func TestH2HeaderStringsSurviveStreamReuse(t *testing.T) {
	up := h2cUpstream(t, "up")
	e := newEnv(t, envOptions{
		clusters: []string{
			staticCluster("h2", "http2_protocol_options: {}", up.Listener.Addr().String()),
			staticCluster("h1", "", up.Listener.Addr().String()),
		},
		hcm: twoRouteHCM("/h1", "h1", "h2", "always_set_request_id_in_response: true"),
	})
	tests := []struct {
		name   string
		client *http.Client
		path   string
	}{
		{"h2c to h2c", h2cClient(t), "/h2"},
		{"http1 to h2c", e.client(), "/h2"},
		{"h2c to http1", h2cClient(t), "/h1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			concurrently(t, 4, 150, func(w, i int) error {
				return checkEcho(tc.client, "http://"+e.addr, fmt.Sprintf("%s/%d/%d", tc.path, w, i))
			})
		})
	}
}

// concurrently runs check(w, i) for i below perWorker on each of workers goroutines; a
// worker stops at its first error, which fails t.
func concurrently(t *testing.T, workers, perWorker int, check func(w, i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				if err := check(w, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// checkEcho sends one request with a distinct x-added value and checks what the echo
// upstream saw and what came back.
func checkEcho(c *http.Client, base, path string) error {
	want := "value-" + strings.ReplaceAll(path, "/", "-") + strings.Repeat("x", len(path)%7)
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Added", want)
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %v", path, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("GET %s: reading body: %v", path, err)
	}
	switch {
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("GET %s: status %d (%s); want 200", path, resp.StatusCode, body)
	case resp.Header.Get("X-Seen-Added") != want:
		return fmt.Errorf("GET %s: upstream saw x-added %q; want %q", path, resp.Header.Get("X-Seen-Added"), want)
	case resp.Header.Get("X-Seen-Path") != path:
		return fmt.Errorf("GET %s: upstream saw path %q; want %q", path, resp.Header.Get("X-Seen-Path"), path)
	case resp.Header.Get("X-Request-Id") != resp.Header.Get("X-Seen-Request-Id"):
		return fmt.Errorf("GET %s: x-request-id %q; upstream saw %q", path, resp.Header.Get("X-Request-Id"), resp.Header.Get("X-Seen-Request-Id"))
	}
	return nil
}
