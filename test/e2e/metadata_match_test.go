package e2e

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// subsetConfig is a listener whose routes select subsets of cluster versions by the version
// named in their path, with lbSubset as the cluster's lb_subset_config and the endpoints
// (proxy.lb metadata) serving v1 and v2.
func subsetConfig(t *testing.T, lbSubset string, routes ...string) string {
	endpoint := func(addr, version string) string {
		host, port, _ := net.SplitHostPort(addr)
		return fmt.Sprintf("{endpoint: {address: {socket_address: {address: %s, port_value: %s}}}, metadata: {filter_metadata: {proxy.lb: {version: %s}}}}", host, port, version)
	}
	v1 := namedBackend(t, 0, "v1")
	v2 := namedBackend(t, 0, "v2")
	return `
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
` + strings.Join(routes, "") + `
          http_filters: [{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
  clusters:
  - name: versions
    connect_timeout: 1s
    lb_subset_config: ` + lbSubset + `
    load_assignment:
      cluster_name: versions
      endpoints: [{lb_endpoints: [` + endpoint(v1, "v1") + `, ` + endpoint(v2, "v2") + `]}]
`
}

// versionRoute routes /<version> to the subset of that version under namespace.
func versionRoute(namespace, version string) string {
	return fmt.Sprintf("              - {match: {prefix: /%s}, route: {cluster: versions, metadata_match: {filter_metadata: {%s: {version: %s}}}}}\n", version, namespace, version)
}

// Issue 17 item 2: with an empty default subset and panic_mode_any, a request no subset serves
// goes to any host of the cluster and counts lb_subsets_fallback_panic.
func TestSubsetPanicModeAny(t *testing.T) {
	cfg := subsetConfig(t, "{subset_selectors: [{keys: [version]}], fallback_policy: DEFAULT_SUBSET, default_subset: {version: v9}, panic_mode_any: true}",
		versionRoute("envoy.lb", "v3"))
	p := start(t, "-c", writeConfig(t, cfg))
	client := &http.Client{Timeout: 10 * time.Second}
	seen := map[string]int{}
	for i := range 4 {
		code, body := httpGet(t, client, "http://"+p.listenerAddr("http")+"/v3", nil)
		if code != http.StatusOK {
			t.Fatalf("GET /v3 #%d = %d %q; want 200 from any host", i, code, body)
		}
		seen[body]++
	}
	if seen["v1"] == 0 || seen["v2"] == 0 {
		t.Errorf("hosts answering = %v; want both v1 and v2 (any host of the cluster)", seen)
	}
	if v, _ := p.stat("cluster.versions.lb_subsets_fallback_panic"); v != 4 {
		t.Errorf("cluster.versions.lb_subsets_fallback_panic = %d; want 4", v)
	}
}

// Issue 17 item 10: a route's metadata_match under the spec's proxy.lb namespace selects the
// subset of endpoints whose proxy.lb metadata matches, as envoy.lb does.
func TestRouteMetadataMatchProxyLB(t *testing.T) {
	cfg := subsetConfig(t, "{subset_selectors: [{keys: [version]}]}", versionRoute("proxy.lb", "v2"), versionRoute("proxy.lb", "v1"))
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
