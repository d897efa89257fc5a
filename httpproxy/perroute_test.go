package httpproxy

import (
	"testing"
)

// TestPerRouteFilterDisabled checks typed_per_filter_config's FilterConfig.disabled: the
// health check filter answers /healthz on the host that keeps it, and is out of the chain for
// the virtual host and the route that disable it, whose requests reach the upstream.
func TestPerRouteFilterDisabled(t *testing.T) {
	up := echo(t, "up")
	const disabled = `{"@type": type.googleapis.com/envoy.config.route.v3.FilterConfig, disabled: true}`
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm: `stat_prefix: ingress
route_config:
  virtual_hosts:
  - name: checked
    domains: ["checked"]
    routes:
    - match: {prefix: "/"}
      route: {cluster: web}
  - name: vh_off
    domains: ["vh-off"]
    typed_per_filter_config: {envoy.filters.http.health_check: ` + disabled + `}
    routes:
    - match: {prefix: "/"}
      route: {cluster: web}
  - name: route_off
    domains: ["route-off"]
    routes:
    - match: {prefix: "/healthz"}
      route: {cluster: web}
      typed_per_filter_config: {envoy.filters.http.health_check: ` + disabled + `}
http_filters:
- name: envoy.filters.http.health_check
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.health_check.v3.HealthCheck
    pass_through_mode: false
    headers: [{name: ":path", string_match: {exact: /healthz}}]
- name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`,
	})
	tests := []struct {
		host, want string
	}{
		{"checked", ""}, // answered by the health check filter, empty body
		{"vh-off", "up /healthz"},
		{"route-off", "up /healthz"},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			resp, body := e.get(e.client(), "/healthz", "Host", tt.host)
			if resp.StatusCode != 200 || body != tt.want {
				t.Errorf("GET %s/healthz = %d %q; want 200 %q", tt.host, resp.StatusCode, body, tt.want)
			}
		})
	}
}
