package httpproxy

import (
	"testing"

	"github.com/legateproxy/legate/httpproxy/filters/headermutation"
)

// TestHeaderMutationFilter drives envoy.filters.http.header_mutation through a listener and
// an upstream: the upstream sees the request mutations (the route's, then the filter's, which
// win), and the client sees the response mutations.
func TestHeaderMutationFilter(t *testing.T) {
	up := echo(t, "up")
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		filters:  filtersOf(t, nil, headermutation.Register),
		hcm: `stat_prefix: ingress
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: {prefix: "/"}
      route: {cluster: web}
      typed_per_filter_config:
        envoy.filters.http.header_mutation:
          "@type": type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutationPerRoute
          mutations:
            request_mutations: [{append: {header: {key: x-added, value: route}, append_action: OVERWRITE_IF_EXISTS_OR_ADD}}]
            response_mutations: [{append: {header: {key: x-route, value: "yes"}}}]
http_filters:
- name: envoy.filters.http.header_mutation
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation
    mutations:
      request_mutations:
      - remove: x-remove-me
      - append: {header: {key: x-added, value: filter}, append_action: OVERWRITE_IF_EXISTS_OR_ADD}
      response_mutations:
      - remove_on_match: {key_matcher: {prefix: x-seen-x}}
- name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`,
	})
	resp, body := e.get(e.client(), "/m", "X-Remove-Me", "1", "X-Added", "client")
	if resp.StatusCode != 200 || body != "up /m" {
		t.Fatalf("GET /m = %d %q; want 200 up /m", resp.StatusCode, body)
	}
	for k, want := range map[string]string{"X-Seen-Added": "filter", "X-Seen-Remove-Me": "", "X-Route": "yes", "X-Seen-Xff": "", "X-Upstream": "up"} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q; want %q", k, got, want)
		}
	}
	if _, ok := resp.Header["X-Seen-Xff"]; ok {
		t.Error("x-seen-xff is in the response; want it removed by remove_on_match")
	}
}
