package e2e

import (
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

// Issue 17 item 10: a route's metadata_match under the spec's proxy.lb namespace selects the
// subset of endpoints whose proxy.lb metadata matches, as envoy.lb does.
func TestRouteMetadataMatchProxyLB(t *testing.T) {
	endpoint := func(addr, version string) string {
		host, port, _ := net.SplitHostPort(addr)
		return fmt.Sprintf("{endpoint: {address: {socket_address: {address: %s, port_value: %s}}}, metadata: {filter_metadata: {proxy.lb: {version: %s}}}}", host, port, version)
	}
	v1 := namedBackend(t, 0, "v1")
	v2 := namedBackend(t, 0, "v2")
	cfg := `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:
  - name: http
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: subset
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - {match: {prefix: /v2}, route: {cluster: versions, metadata_match: {filter_metadata: {proxy.lb: {version: v2}}}}}
              - {match: {prefix: /v1}, route: {cluster: versions, metadata_match: {filter_metadata: {proxy.lb: {version: v1}}}}}
          http_filters: [{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
  clusters:
  - name: versions
    connect_timeout: 1s
    lb_subset_config: {subset_selectors: [{keys: [version]}]}
    load_assignment:
      cluster_name: versions
      endpoints: [{lb_endpoints: [` + endpoint(v1, "v1") + `, ` + endpoint(v2, "v2") + `]}]
`
	p := start(t, "-c", writeConfig(t, cfg))
	client := &http.Client{Timeout: 10 * time.Second}
	url := "http://" + p.listenerAddr("http")
	for _, version := range []string{"v2", "v1"} {
		for i := range 4 {
			if code, body := httpGet(t, client, url+"/"+version, nil); code != http.StatusOK || body != version {
				t.Fatalf("GET /%s #%d = %d %q; want 200 from the %s subset", version, i, code, body, version)
			}
		}
	}
	if v, _ := p.stat("cluster.versions.lb_subsets_selected"); v != 8 {
		t.Errorf("cluster.versions.lb_subsets_selected = %d; want 8", v)
	}
}
