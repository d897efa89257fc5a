package httpproxy

import (
	"fmt"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	healthcheckv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/health_check/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/config"
)

// fakeExtensions is an ExtensionConfigProvider the test pushes configurations through.
type fakeExtensions struct {
	mu      sync.Mutex
	gen     uint64
	cur     map[string]*corev3.TypedExtensionConfig
	updates map[string][]func(uint64, *corev3.TypedExtensionConfig)
}

func newFakeExtensions() *fakeExtensions {
	return &fakeExtensions{cur: map[string]*corev3.TypedExtensionConfig{}, updates: map[string][]func(uint64, *corev3.TypedExtensionConfig){}}
}

func (f *fakeExtensions) WatchExtensionConfig(name string, _ *corev3.ConfigSource, update func(uint64, *corev3.TypedExtensionConfig)) (*corev3.TypedExtensionConfig, uint64, func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updates[name] = append(f.updates[name], update)
	return f.cur[name], f.gen, func() {}, nil
}

// push delivers tc (nil: removed or timed out) to the watchers of name.
func (f *fakeExtensions) push(name string, tc *corev3.TypedExtensionConfig) {
	f.mu.Lock()
	f.gen++
	f.cur[name] = tc
	gen, fns := f.gen, append([]func(uint64, *corev3.TypedExtensionConfig){}, f.updates[name]...)
	f.mu.Unlock()
	for _, fn := range fns {
		fn(gen, tc)
	}
}

func healthCheckAny(t *testing.T, path string) *anypb.Any {
	t.Helper()
	var hc healthcheckv3.HealthCheck
	fromYAML(t, fmt.Sprintf(`{pass_through_mode: false, headers: [{name: ":path", string_match: {exact: %q}}]}`, path), &hc)
	a, err := anypb.New(&hc)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func ecdsHCM(defaultConfig string) string {
	return fmt.Sprintf(`stat_prefix: ingress
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: {prefix: "/"}
      route: {cluster: web}
http_filters:
- name: hc
  config_discovery:
    config_source: {ads: {}}
    type_urls: [type.googleapis.com/envoy.extensions.filters.http.health_check.v3.HealthCheck]
    %s
- name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`, defaultConfig)
}

// TestECDSFilter runs a health_check filter whose configuration comes from ECDS through a real
// listener: 500 (NFCF) before any configuration, then the delivered configuration answers its
// path locally while other paths reach the upstream; an update moves the path; a configuration
// of a type not in type_urls is refused and the previous one stays; removal falls back to
// default_config, which also serves from the start with apply_default_config_without_warming.
func TestECDSFilter(t *testing.T) {
	up := echo(t, "up")
	check := func(t *testing.T, e *env, path string, wantStatus int, wantBody string) {
		t.Helper()
		resp, body := e.get(e.client(), path)
		if resp.StatusCode != wantStatus || body != wantBody {
			t.Errorf("GET %s = %d %q; want %d %q", path, resp.StatusCode, body, wantStatus, wantBody)
		}
	}
	t.Run("discovered", func(t *testing.T) {
		ext := newFakeExtensions()
		e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up.Listener.Addr().String())}, hcm: ecdsHCM(""), ecds: ext})
		check(t, e, "/healthz", 500, "")
		ext.push("hc", &corev3.TypedExtensionConfig{Name: "hc", TypedConfig: healthCheckAny(t, "/healthz")})
		check(t, e, "/healthz", 200, "")
		check(t, e, "/app", 200, "up /app")
		ext.push("hc", &corev3.TypedExtensionConfig{Name: "hc", TypedConfig: healthCheckAny(t, "/ready")})
		check(t, e, "/ready", 200, "")
		check(t, e, "/healthz", 200, "up /healthz")
		router, err := anypb.New(&routerv3.Router{})
		if err != nil {
			t.Fatal(err)
		}
		ext.push("hc", &corev3.TypedExtensionConfig{Name: "hc", TypedConfig: router})
		check(t, e, "/ready", 200, "") // still the health check of the previous configuration
		ext.push("hc", nil)
		check(t, e, "/ready", 500, "")
	})
	t.Run("default config", func(t *testing.T) {
		ext := newFakeExtensions()
		def := `default_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.health_check.v3.HealthCheck, pass_through_mode: false, headers: [{name: ":path", string_match: {exact: /default}}]}
    apply_default_config_without_warming: true`
		e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up.Listener.Addr().String())}, hcm: ecdsHCM(def), ecds: ext})
		check(t, e, "/default", 200, "")
		check(t, e, "/app", 200, "up /app")
		ext.push("hc", &corev3.TypedExtensionConfig{Name: "hc", TypedConfig: healthCheckAny(t, "/healthz")})
		check(t, e, "/default", 200, "up /default")
		ext.push("hc", nil)
		check(t, e, "/default", 200, "")
	})
	t.Run("no provider", func(t *testing.T) {
		sh := &shared{}
		h := &Handler{cfg: &config.HTTPConnectionManager{StatPrefix: "ingress"}}
		err := sh.startECDS(h, []discoveredFilter{{name: "hc", cd: &corev3.ExtensionConfigSource{}}})
		if want := `http_connection_manager "ingress": http_filters "hc": config_discovery needs the xDS client`; err == nil || err.Error() != want {
			t.Errorf("startECDS without a provider: error = %v; want %q", err, want)
		}
	})
}
