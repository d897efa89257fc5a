package httpproxy

import "testing"

// TestUpstreamCodesPerCluster alternates requests to two clusters on one keep-alive
// connection, whose pooled stream keeps the cluster counters it used last (upstreamCodes):
// each cluster's response codes are still counted on its own counters.
func TestUpstreamCodesPerCluster(t *testing.T) {
	a, b := echo(t, "a"), echo(t, "b")
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("a", "", a.Listener.Addr().String()), staticCluster("b", "", b.Listener.Addr().String())},
		hcm:      twoRouteHCM("/b", "b", "a", ""),
	})
	c := e.client()
	for _, path := range []string{"/a", "/b", "/b", "/a", "/b", "/a", "/a"} {
		if resp, body := e.get(c, path); resp.StatusCode != 200 || body != path[1:]+" "+path {
			t.Fatalf("GET %s = %d %q; want 200 from cluster %s", path, resp.StatusCode, body, path[1:])
		}
	}
	for name, want := range map[string]uint64{
		"cluster.a.upstream_rq_2xx": 4, "cluster.a.upstream_rq_200": 4, "cluster.a.upstream_rq_completed": 4,
		"cluster.b.upstream_rq_2xx": 3, "cluster.b.upstream_rq_200": 3, "cluster.b.upstream_rq_completed": 3,
		"http.ingress.downstream_cx_total": 1,
	} {
		if got := e.stat(name); got != want {
			t.Errorf("%s = %d; want %d", name, got, want)
		}
	}
}

// TestUpstreamCodesByClusterHeader is TestUpstreamCodesPerCluster with the cluster named by a
// request header (cluster_header), whose value views the stream's arena: the next request's
// head overwrites those bytes in place, so neither the stream's kept counters nor the
// registry may hold on to the view (requests to b were counted on a when they did).
func TestUpstreamCodesByClusterHeader(t *testing.T) {
	a, b := echo(t, "a"), echo(t, "b")
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("a", "", a.Listener.Addr().String()), staticCluster("b", "", b.Listener.Addr().String())},
		hcm: `stat_prefix: ingress
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: {prefix: "/"}
      route: {cluster_header: x-cluster}
`,
	})
	c := e.client()
	for _, name := range []string{"a", "b", "b", "a", "b", "a", "a"} {
		if resp, body := e.get(c, "/p", "x-cluster", name); resp.StatusCode != 200 || body != name+" /p" {
			t.Fatalf("GET /p (x-cluster: %s) = %d %q; want 200 from cluster %s", name, resp.StatusCode, body, name)
		}
	}
	for name, want := range map[string]uint64{
		"cluster.a.upstream_rq_200": 4, "cluster.a.upstream_rq_completed": 4,
		"cluster.b.upstream_rq_200": 3, "cluster.b.upstream_rq_completed": 3,
		"http.ingress.downstream_cx_total": 1,
	} {
		if got := e.stat(name); got != want {
			t.Errorf("%s = %d; want %d", name, got, want)
		}
	}
}
