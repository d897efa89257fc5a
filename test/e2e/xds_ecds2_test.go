package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	healthcheckv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/health_check/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/xds/xdstest"
)

const healthCheckTypeURL = "type.googleapis.com/envoy.extensions.filters.http.health_check.v3.HealthCheck"

// ecdsHealthCheckListener is an LDS listener on port (0: one the kernel picks) whose connection manager discovers its
// health check filter ("hc", type_urls: the health check only) over ECDS, with more
// config_discovery fields (YAML, indented by ten spaces), and routes to cluster backend.
func ecdsHealthCheckListener(t *testing.T, name string, port int, more string) *listenerv3.Listener {
	return hcmListener(t, name, port, fmt.Sprintf(`      route_config:
        virtual_hosts:
        - name: all
          domains: ["*"]
          routes: [{match: {prefix: "/"}, route: {cluster: backend}}]
      http_filters:
      - name: hc
        config_discovery:
          config_source: {ads: {}, resource_api_version: V3}
          type_urls: [%s]
%s
      - name: envoy.filters.http.router
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`, healthCheckTypeURL, more))
}

// TestXDSECDS2FirstAnswerRefused runs the binary against go-control-plane's server with two
// LDS listeners waiting for the ECDS configuration of their health check filter "hc", one
// with a default_config. The first answer has an allowed type that the health check factory
// refuses (pass_through_mode unset): as in Envoy it is NACKed with the factory's reason
// (update_rejected and config_fail count it, config_reload does not, the ecds dump shows the
// error_state), the listeners' warming ends, and they come up: the one with a default_config
// serves it, the other answers 500 (no filter configuration). A valid configuration then
// reaches both. The listeners take ports the kernel picks (port_value 0, read back from
// /listeners): ports picked beforehand collided when two e2e runs overlapped.
func TestXDSECDS2FirstAnswerRefused(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream %s", r.URL.Path)
	}))
	defer upstream.Close()
	xds := xdstest.New(t, xdstest.Options{Node: "e2e-ecds2", ADS: true})
	cfg := adsBootstrap("e2e-ecds2", xds, []string{"lds_config"}, clusterYAML("backend", upstream.Listener.Addr().String(), false))
	listeners := []types.Resource{
		ecdsHealthCheckListener(t, "with_default", 0,
			`          default_config: {"@type": `+healthCheckTypeURL+`, pass_through_mode: false, headers: [{name: ":path", string_match: {exact: /default}}]}`),
		ecdsHealthCheckListener(t, "without_default", 0, ""),
	}
	push := func(version string, hc *healthcheckv3.HealthCheck) {
		t.Helper()
		a, err := anypb.New(hc)
		if err != nil {
			t.Fatal(err)
		}
		xds.Set(version, map[resourcev3.Type][]types.Resource{
			resourcev3.ListenerType:        listeners,
			resourcev3.ExtensionConfigType: {&corev3.TypedExtensionConfig{Name: "hc", TypedConfig: a}},
		})
	}
	push("v1", &healthcheckv3.HealthCheck{}) // pass_through_mode is required
	p := start(t, "-c", writeConfig(t, cfg))

	const want = `extension config "hc": envoy.filters.http.health_check: pass_through_mode: unset; it is required`
	if got := nackOf(t, xds, "pass_through_mode"); got != want {
		t.Errorf("ECDS NACK error_detail = %q; want %q", got, want)
	}
	const prefix = "extension_config_discovery.http_filter.hc."
	p.waitStatAtLeast(prefix+"update_rejected", 1)
	p.waitStatAtLeast(prefix+"config_fail", 1)

	client := &http.Client{Timeout: 5 * time.Second}
	withDefault, without := p.boundListenerAddr("with_default"), p.boundListenerAddr("without_default")
	get := func(addr, path string) (int, string) {
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	eventually(t, "listener with_default serving its default_config", func() bool {
		s, b := get(withDefault, "/default")
		return s == 200 && b == ""
	})
	tests := []struct {
		name       string
		addr       string
		path       string
		wantStatus int
		wantBody   string
	}{
		{"default_config answers its path", withDefault, "/default", 200, ""},
		{"other paths reach the upstream", withDefault, "/app", 200, "upstream /app"},
		{"no configuration: 500", without, "/app", 500, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if s, b := get(tc.addr, tc.path); s != tc.wantStatus || b != tc.wantBody {
				t.Errorf("GET %s on %s = %d %q; want %d %q", tc.path, tc.addr, s, b, tc.wantStatus, tc.wantBody)
			}
		})
	}
	for _, stat := range []string{prefix + "config_reload", prefix + "config_conflict", prefix + "update_success"} {
		if v, _ := p.stat(stat); v != 0 {
			t.Errorf("%s = %d; want 0", stat, v)
		}
	}
	_, _, dump := p.get("/config_dump?resource=ecds_filters")
	for _, w := range []string{`"error_state"`, `"version_info": "v1"`, "pass_through_mode: unset"} {
		if !strings.Contains(dump, w) {
			t.Errorf("/config_dump?resource=ecds_filters lacks %s:\n%s", w, dump)
		}
	}
	if _, _, body := p.get("/init_dump"); strings.Contains(body, "hc") {
		t.Errorf("/init_dump still lists an ECDS wait:\n%s", body)
	}

	// A valid configuration reaches both listeners.
	var good healthcheckv3.HealthCheck
	fromYAMLProto(t, `{pass_through_mode: false, headers: [{name: ":path", string_match: {exact: /healthz}}]}`, &good)
	push("v2", &good)
	p.waitStatAtLeast(prefix+"config_reload", 1)
	for _, addr := range []string{withDefault, without} {
		if s, b := get(addr, "/healthz"); s != 200 || b != "" {
			t.Errorf("GET /healthz on %s = %d %q; want 200 from the health check", addr, s, b)
		}
		if s, b := get(addr, "/default"); s != 200 || b != "upstream /default" {
			t.Errorf("GET /default on %s = %d %q; want the upstream", addr, s, b)
		}
	}
}
