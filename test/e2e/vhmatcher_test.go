package e2e

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// TestVirtualHostMatcher runs the binary with a virtual host whose routes come from a matcher
// on a request header: requests with x-tenant: blue reach the blue upstream, the others the
// green one, each through a real net/http upstream.
func TestVirtualHostMatcher(t *testing.T) {
	blue, green := named(t, "blue"), named(t, "green")
	action := func(cluster string) string {
		return `{action: {name: route, typed_config: {"@type": type.googleapis.com/envoy.config.route.v3.Route, match: {prefix: /}, route: {cluster: ` + cluster + `}}}}`
	}
	routes := `            - name: tenants
              domains: ["*"]
              matcher:
                matcher_tree:
                  input: {name: tenant, typed_config: {"@type": type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput, header_name: x-tenant}}
                  exact_match_map: {map: {blue: ` + action("blue") + `}}
                on_no_match: ` + action("green")
	p := start(t, "-c", writeConfig(t, exampleBootstrap(exampleHCM("ingress_http", routes, ""),
		exampleCluster("blue", "", addrOf(blue)), exampleCluster("green", "", addrOf(green)))))
	addr := p.listenerAddr("example")
	client := &http.Client{Timeout: 20 * time.Second}
	for _, tc := range []struct{ tenant, want string }{{"blue", "blue /x"}, {"red", "green /x"}, {"", "green /x"}} {
		r, _ := http.NewRequest("GET", "http://"+addr+"/x", nil)
		if tc.tenant != "" {
			r.Header.Set("X-Tenant", tc.tenant)
		}
		resp, err := client.Do(r)
		if err != nil {
			t.Fatalf("tenant %q: %v", tc.tenant, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != tc.want {
			t.Errorf("tenant %q: %d %q; want 200 %q", tc.tenant, resp.StatusCode, b, tc.want)
		}
	}
}
