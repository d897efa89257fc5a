package httpproxy

import (
	"testing"

	"github.com/legateproxy/legate/httpproxy/filters/rbac"
	"github.com/legateproxy/legate/httpproxy/filters/setmetadata"
)

// TestSetMetadataFilter drives envoy.filters.http.set_metadata through a listener: the
// metadata it writes is what the RBAC filter after it matches, so requests are denied, except
// on the virtual host that disables set_metadata, whose requests reach the upstream.
func TestSetMetadataFilter(t *testing.T) {
	up := echo(t, "up")
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		filters:  filtersOf(t, nil, setmetadata.Register, rbac.Register),
		hcm: `stat_prefix: ingress
route_config:
  virtual_hosts:
  - name: untagged
    domains: ["untagged"]
    typed_per_filter_config:
      envoy.filters.http.set_metadata: {"@type": type.googleapis.com/envoy.config.route.v3.FilterConfig, disabled: true}
    routes:
    - match: {prefix: "/"}
      route: {cluster: web}
  - name: all
    domains: ["*"]
    routes:
    - match: {prefix: "/"}
      route: {cluster: web}
http_filters:
- name: envoy.filters.http.set_metadata
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.set_metadata.v3.Config
    metadata: [{metadata_namespace: acme, value: {tier: blocked}}]
- name: envoy.filters.http.rbac
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC
    rules:
      action: DENY
      policies:
        blocked-tier:
          permissions: [{any: true}]
          principals: [{metadata: {filter: acme, path: [{key: tier}], value: {string_match: {exact: blocked}}}}]
- name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`,
	})
	if resp, body := e.get(e.client(), "/x"); resp.StatusCode != 403 {
		t.Errorf("GET /x = %d %q; want 403 from RBAC, which matched the metadata set_metadata wrote", resp.StatusCode, body)
	}
	if resp, body := e.get(e.client(), "/x", "host", "untagged"); resp.StatusCode != 200 || body != "up /x" {
		t.Errorf("GET /x on the host without set_metadata = %d %q; want 200 up /x", resp.StatusCode, body)
	}
}
