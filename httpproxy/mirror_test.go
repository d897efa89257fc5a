package httpproxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
)

// seen is one request a mirror upstream received.
type seen struct {
	method, host, path, custom, body string
}

// recorder is a real upstream that hands each request it receives to a channel.
func recorder(t *testing.T, status int) (*httptest.Server, <-chan seen) {
	ch := make(chan seen, 16)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- seen{r.Method, r.Host, r.URL.RequestURI(), r.Header.Get("X-Custom"), string(b)}
		w.WriteHeader(status)
	}))
	t.Cleanup(s.Close)
	return s, ch
}

func awaitSeen(t *testing.T, ch <-chan seen, what string) seen {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no request within 5 s", what)
		return seen{}
	}
}

// TestRequestMirror: request_mirror_policies send a copy of each request (method, path,
// headers, body) to the mirror cluster, with "-shadow" added to the host before its port
// unless disabled, while the client gets the primary's response; the mirror's responses count
// on its cluster. Runtime fractions pick which requests are copied.
func TestRequestMirror(t *testing.T) {
	primary, primarySeen := recorder(t, http.StatusOK)
	shadow, shadowSeen := recorder(t, http.StatusTeapot)
	hcm := `stat_prefix: mirror
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: {prefix: "/keep"}
      route:
        cluster: web
        request_mirror_policies: [{cluster: shadow, disable_shadow_host_suffix_append: true}]
    - match: {prefix: "/never"}
      route:
        cluster: web
        request_mirror_policies:
        - {cluster: shadow, runtime_fraction: {default_value: {numerator: 0}, runtime_key: mirror.never}}
    - match: {prefix: "/by-header"}
      route:
        cluster: web
        request_mirror_policies: [{cluster_header: x-mirror-to}]
    - match: {prefix: "/"}
      route:
        cluster: web
        request_mirror_policies: [{cluster: shadow}]
`
	e := newEnv(t, envOptions{clusters: []string{
		staticCluster("web", "", primary.Listener.Addr().String()),
		staticCluster("shadow", "", shadow.Listener.Addr().String()),
	}, hcm: hcm})
	c := e.client()

	resp, _ := e.get(c, "/a?q=1", "host", "example.com:8080", "x-custom", "v")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d; want the primary's 200", resp.StatusCode)
	}
	if p := awaitSeen(t, primarySeen, "primary"); p.host != "example.com:8080" {
		t.Errorf("primary host = %q; want it unchanged", p.host)
	}
	want := seen{"GET", "example.com-shadow:8080", "/a?q=1", "v", ""}
	if got := awaitSeen(t, shadowSeen, "mirror"); got != want {
		t.Errorf("mirror got %+v; want %+v", got, want)
	}
	waitStat(t, e, "cluster.shadow.upstream_rq_418", 1)

	req, _ := http.NewRequest(http.MethodPost, "http://"+e.addr+"/upload", strings.NewReader("the body"))
	req.Host = "example.com"
	if resp, err := c.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	awaitSeen(t, primarySeen, "primary POST")
	want = seen{"POST", "example.com-shadow", "/upload", "", "the body"}
	if got := awaitSeen(t, shadowSeen, "mirrored POST"); got != want {
		t.Errorf("mirrored POST %+v; want %+v", got, want)
	}

	e.get(c, "/keep", "host", "example.com:8080")
	awaitSeen(t, primarySeen, "primary /keep")
	if got := awaitSeen(t, shadowSeen, "mirror /keep"); got.host != "example.com:8080" {
		t.Errorf("mirror host with disable_shadow_host_suffix_append = %q; want example.com:8080", got.host)
	}

	e.get(c, "/by-header", "x-mirror-to", "shadow")
	awaitSeen(t, primarySeen, "primary /by-header")
	if got := awaitSeen(t, shadowSeen, "mirror by header"); got.path != "/by-header" {
		t.Errorf("mirror by header got %+v", got)
	}

	// /never samples nothing: the next mirrored request is the next one the mirror sees.
	e.get(c, "/never")
	awaitSeen(t, primarySeen, "primary /never")
	e.get(c, "/last")
	awaitSeen(t, primarySeen, "primary /last")
	if got := awaitSeen(t, shadowSeen, "mirror /last"); got.path != "/last" {
		t.Errorf("mirror after /never got %q; want /last (a 0%% fraction mirrored)", got.path)
	}
	waitStat(t, e, "cluster.shadow.upstream_rq_418", 5)
	if got := e.stat("cluster.web.upstream_rq_200"); got != 6 {
		t.Errorf("cluster.web.upstream_rq_200 = %d; want 6", got)
	}
}

// TestMirrorByHeaderCountsOnItsCluster: a cluster_header mirror's response is counted on the
// cluster the header named when it was sent, even when the answer comes after a later
// request has overwritten the header's bytes in the stream's arena (the mirror kept that view
// as the cluster's name, and counted on whatever the bytes then read).
func TestMirrorByHeaderCountsOnItsCluster(t *testing.T) {
	primary := echo(t, "web")
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	shadow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusTeapot)
	}))
	t.Cleanup(shadow.Close)
	e := newEnv(t, envOptions{clusters: []string{
		staticCluster("web", "", primary.Listener.Addr().String()),
		staticCluster("shadow", "", shadow.Listener.Addr().String()),
	}, hcm: `stat_prefix: mirror
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: {prefix: "/"}
      route: {cluster: web, request_mirror_policies: [{cluster_header: x-mirror-to}]}
`})
	c := e.client()
	// Streams come from a sync.Pool, whose Get returns the stream its P put last: with one P
	// the requests below share one stream, and the warm-up requests (not mirrored: no cluster
	// is named zzzzzz) grow its arena, so that each request's head lands in the same bytes.
	// The race detector's pool drops a quarter of the streams put back, hence several.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	get := func(cluster string) {
		t.Helper()
		if resp, _ := e.get(c, "/p", "x-mirror-to", cluster); resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /p (x-mirror-to: %s) = %d; want the primary's 200", cluster, resp.StatusCode)
		}
	}
	for range 4 {
		get("zzzzzz")
	}
	get("shadow")
	select {
	case <-arrived:
	case <-time.After(wait):
		t.Fatal("the mirror never reached the shadow cluster")
	}
	for range 4 {
		get("zzzzzz")
	}
	close(release)
	waitStat(t, e, "cluster.shadow.upstream_rq_418", 1)
}
