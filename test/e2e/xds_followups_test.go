package e2e

import (
	"strings"
	"testing"
)

// TestFollowupsInlineScopeRejected: a static listener whose inline scoped route configuration
// does not compile fails the load, naming the scope and the rule, as Envoy rejects the
// listener; the binary exits non-zero instead of serving the scope without routes.
func TestFollowupsInlineScopeRejected(t *testing.T) {
	cfg := minimalConfig + `
  listeners:
  - name: scoped
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          scoped_routes:
            name: scopes
            scope_key_builder:
              fragments:
              - header_value_extractor: {name: x-scope, index: 0}
            rds_config_source: {ads: {}}
            scoped_route_configurations_list:
              scoped_route_configurations:
              - name: bad-scope
                key: {fragments: [{string_key: a}]}
                route_configuration:
                  name: bad-routes
                  virtual_hosts:
                  - name: dup
                    domains: ["x.example", "x.example"]
                    routes:
                    - match: {prefix: /}
                      direct_response: {status: 200}
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`
	code, _, stderr := runOnce(t, "-c", writeConfig(t, cfg))
	if code == 0 {
		t.Fatalf("exit code = 0; want non-zero (stderr: %s)", stderr)
	}
	for _, want := range []string{`scope "bad-scope"`, `route_configuration "bad-routes"`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr = %q; want it to name %s", stderr, want)
		}
	}
}
