package httpproxy

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// echo is an upstream that answers with its name, the request path and selected headers.
func echo(t testing.TB, name string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Upstream", name)
		w.Header().Set("X-Seen-Host", r.Host)
		w.Header().Set("X-Seen-Path", r.URL.RequestURI())
		w.Header().Set("X-Seen-Xff", r.Header.Get("X-Forwarded-For"))
		w.Header().Set("X-Seen-Request-Id", r.Header.Get("X-Request-Id"))
		w.Header().Set("X-Seen-Proto", r.Proto)
		if v := r.Header.Get("X-Status"); v != "" {
			var code int
			fmt.Sscan(v, &code)
			w.WriteHeader(code)
		}
		fmt.Fprintf(w, "%s %s", name, r.URL.Path)
	}))
	t.Cleanup(s.Close)
	return s
}

func TestProxyBasic(t *testing.T) {
	up := echo(t, "a")
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm:      simpleHCM("web", ""),
	})
	c := e.client()
	resp, body := e.get(c, "/hello?x=1")
	if resp.StatusCode != 200 {
		t.Fatalf("status = %d; want 200", resp.StatusCode)
	}
	if body != "a /hello" {
		t.Errorf("body = %q; want %q", body, "a /hello")
	}
	if got := resp.Header.Get("Server"); got != "envoy" {
		t.Errorf("server = %q; want envoy", got)
	}
	if got := resp.Header.Get("X-Seen-Path"); got != "/hello?x=1" {
		t.Errorf("upstream path = %q; want /hello?x=1", got)
	}
	if got := resp.Header.Get("X-Seen-Request-Id"); len(got) != 36 {
		t.Errorf("x-request-id = %q; want a UUID", got)
	}
	if got := resp.Header.Get("X-Envoy-Upstream-Service-Time"); got == "" {
		t.Errorf("x-envoy-upstream-service-time missing")
	}
	for range 5 {
		e.get(c, "/again")
	}
	hs := e.hostStats("web", up.Listener.Addr().String())
	if got := hs.RqTotal.Load(); got != 6 {
		t.Errorf("rq_total = %d; want 6", got)
	}
	if got := hs.RqSuccess.Load(); got != 6 {
		t.Errorf("rq_success = %d; want 6", got)
	}
	for name, want := range map[string]uint64{
		"http.ingress.downstream_rq_total":       6,
		"http.ingress.downstream_rq_2xx":         6,
		"http.ingress.downstream_cx_total":       1,
		"cluster.web.upstream_rq_200":            6,
		"cluster.web.upstream_rq_2xx":            6,
		"cluster.web.upstream_rq_completed":      6,
		"http.ingress.rq_total":                  6,
		"http.ingress.downstream_rq_http1_total": 6,
	} {
		if got := e.stat(name); got != want {
			t.Errorf("%s = %d; want %d", name, got, want)
		}
	}
	_ = strings.TrimSpace
}
