package httpproxy

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/legateproxy/legate/httpproxy/filters/ondemand"
	"github.com/legateproxy/legate/httpproxy/rds"
	"github.com/legateproxy/legate/httpproxy/route"
)

// fakeScopes is a ScopedRouteProvider the test pushes scopes and route configurations through.
type fakeScopes struct {
	mu     sync.Mutex
	gen    uint64
	scopes []*routev3.ScopedRouteConfiguration
	routes map[string]*routev3.RouteConfiguration
	update func(uint64, []*routev3.ScopedRouteConfiguration, map[string]*routev3.RouteConfiguration)
}

func (f *fakeScopes) WatchScopedRoutes(_ *hcmv3.ScopedRoutes, _ string, update func(uint64, []*routev3.ScopedRouteConfiguration, map[string]*routev3.RouteConfiguration)) (func(), error) {
	f.mu.Lock()
	f.update = update
	f.mu.Unlock()
	return func() {}, nil
}

func (f *fakeScopes) push(scopes []*routev3.ScopedRouteConfiguration, routes map[string]*routev3.RouteConfiguration) {
	f.mu.Lock()
	f.gen++
	gen, update := f.gen, f.update
	f.mu.Unlock()
	update(gen, scopes, routes)
}

func scope(name, rc string, key ...string) *routev3.ScopedRouteConfiguration {
	s := &routev3.ScopedRouteConfiguration{Name: name, RouteConfigurationName: rc, Key: &routev3.ScopedRouteConfiguration_Key{}}
	for _, k := range key {
		s.Key.Fragments = append(s.Key.Fragments, &routev3.ScopedRouteConfiguration_Key_Fragment{Type: &routev3.ScopedRouteConfiguration_Key_Fragment_StringKey{StringKey: k}})
	}
	return s
}

func directRC(name, body string) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{Name: name, VirtualHosts: []*routev3.VirtualHost{{
		Name: "all", Domains: []string{"*"},
		Routes: []*routev3.Route{{
			Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
				Status: 200, Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: body}},
			}},
		}},
	}}}
}

const srdsHCM = `stat_prefix: ingress
scoped_routes:
  name: scopes
  scope_key_builder:
    fragments:
    - header_value_extractor: {name: x-foo-key, element_separator: ";", element: {key: tenant, separator: "="}}
  rds_config_source: {ads: {}}
  scoped_rds: {scoped_rds_config_source: {ads: {}}}
http_filters:
- name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`

// TestScopedRoutes sends requests through a real listener whose connection manager has
// scoped routes: the scope key comes from an element of a header, each scope routes with its
// own route configuration, unknown scopes and requests without the key get 404 (NR), and a
// new set of scopes replaces the old one.
func TestScopedRoutes(t *testing.T) {
	up := echo(t, "up")
	f := &fakeScopes{}
	e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up.Listener.Addr().String())}, hcm: srdsHCM, srds: f})
	get := func(key string) (int, string) {
		t.Helper()
		var hdr []string
		if key != "" {
			hdr = []string{"x-foo-key", key}
		}
		resp, body := e.get(e.client(), "/", hdr...)
		return resp.StatusCode, body
	}
	type want struct {
		key    string
		status int
		body   string
	}
	steps := []struct {
		name   string
		scopes []*routev3.ScopedRouteConfiguration
		routes map[string]*routev3.RouteConfiguration
		want   []want
	}{
		{name: "no scopes yet", want: []want{{"tenant=a", 404, ""}}},
		{name: "two scopes", scopes: []*routev3.ScopedRouteConfiguration{scope("sa", "ra", "a"), scope("sb", "rb", "b")},
			routes: map[string]*routev3.RouteConfiguration{"ra": directRC("ra", "scope a"), "rb": directRC("rb", "scope b")},
			want:   []want{{"tenant=a", 200, "scope a"}, {"x=1;tenant=b", 200, "scope b"}, {"tenant=c", 404, ""}, {"", 404, ""}, {"other=a", 404, ""}}},
		{name: "scope without its routes yet", scopes: []*routev3.ScopedRouteConfiguration{scope("sa", "ra", "a"), scope("sc", "rc", "c")},
			routes: map[string]*routev3.RouteConfiguration{"ra": directRC("ra", "scope a v2")},
			want:   []want{{"tenant=a", 200, "scope a v2"}, {"tenant=b", 404, ""}, {"tenant=c", 404, ""}}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.scopes != nil {
				f.push(st.scopes, st.routes)
			}
			for _, w := range st.want {
				if status, body := get(w.key); status != w.status || body != w.body {
					t.Errorf("x-foo-key %q: got %d %q; want %d %q", w.key, status, body, w.status, w.body)
				}
			}
		})
	}
	if got := e.stat("http.ingress.no_route"); got == 0 {
		t.Errorf("http.ingress.no_route = 0; want the 404s counted")
	}
}

// BenchmarkScopeLookup is the per-request cost of scoped routes before the route match: the
// key from an element of a header and the scope table lookup.
func BenchmarkScopeLookup(b *testing.B) {
	hv := &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor{Name: "x-foo-key", ElementSeparator: ";",
		ExtractType: &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor_Element{
			Element: &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor_KvElement{Key: "tenant", Separator: "="}}}
	kb, err := rds.NewKeyBuilder("b", &hcmv3.ScopedRoutes_ScopeKeyBuilder{Fragments: []*hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder{
		{Type: &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor_{HeaderValueExtractor: hv}},
	}})
	if err != nil {
		b.Fatal(err)
	}
	sc := &scopeTable{builder: kb, byKey: map[string]*route.Table{}}
	for i := range 1000 {
		sc.byKey[fmt.Sprintf("t%d", i)] = &route.Table{}
	}
	req := &route.Request{Header: http.Header{"X-Foo-Key": {"region=eu;tenant=t500;x=1"}}}
	b.ReportAllocs()
	for b.Loop() {
		k, ok := sc.builder.Key(req)
		if !ok || sc.byKey[k] == nil {
			b.Fatal("no scope")
		}
	}
}

// fakeOnDemandScopes is a fakeScopes that also loads on_demand scopes: load pushes the
// scope's route configuration (from lazy) and then calls done, as the xDS client does.
type fakeOnDemandScopes struct {
	fakeScopes
	scopes []*routev3.ScopedRouteConfiguration
	routes map[string]*routev3.RouteConfiguration
	lazy   map[string]*routev3.RouteConfiguration // by scope key
	loads  chan string
}

func (f *fakeOnDemandScopes) WatchScopedRoutesOnDemand(sr *hcmv3.ScopedRoutes, prefix string, update func(uint64, []*routev3.ScopedRouteConfiguration, map[string]*routev3.RouteConfiguration)) (func(), func(string, func()) (func(), bool), error) {
	cancel, err := f.WatchScopedRoutes(sr, prefix, update)
	load := func(key string, done func()) (func(), bool) {
		rc := f.lazy[key]
		if rc == nil {
			return nil, false
		}
		f.loads <- key
		go func() {
			f.mu.Lock()
			f.routes[rc.GetName()] = rc
			routes := make(map[string]*routev3.RouteConfiguration, len(f.routes))
			for k, v := range f.routes {
				routes[k] = v
			}
			f.mu.Unlock()
			f.push(f.scopes, routes)
			done()
		}()
		return func() {}, true
	}
	return cancel, load, err
}

const srdsOnDemandHCM = `stat_prefix: ingress
scoped_routes:
  name: scopes
  scope_key_builder:
    fragments:
    - header_value_extractor: {name: x-foo-key, index: 0}
  rds_config_source: {ads: {}}
  scoped_rds: {scoped_rds_config_source: {ads: {}}}
http_filters:
- name: envoy.filters.http.on_demand
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.on_demand.v3.OnDemand}
- name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`

// TestScopedRoutesOnDemand: through a real listener with the on_demand filter, a request for
// an on_demand scope whose route configuration is not loaded waits for it and gets 200; an
// unknown scope still gets 404 at once; without the filter the same request gets 404.
func TestScopedRoutesOnDemand(t *testing.T) {
	for _, tc := range []struct {
		name       string
		hcm        string
		wantStatus int
		wantLoads  int
	}{
		{"with on_demand", srdsOnDemandHCM, 200, 1},
		{"without on_demand", strings.Replace(srdsOnDemandHCM, `- name: envoy.filters.http.on_demand
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.on_demand.v3.OnDemand}
`, "", 1), 404, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lazy := scope("sl", "rl", "l")
			lazy.OnDemand = true
			f := &fakeOnDemandScopes{
				scopes: []*routev3.ScopedRouteConfiguration{scope("se", "re", "e"), lazy},
				routes: map[string]*routev3.RouteConfiguration{"re": directRC("re", "eager")},
				lazy:   map[string]*routev3.RouteConfiguration{"l": directRC("rl", "lazy")},
				loads:  make(chan string, 10),
			}
			reg := filtersOf(t, nil, ondemand.Register)
			e := newEnv(t, envOptions{hcm: tc.hcm, srds: f, filters: reg})
			f.push(f.scopes, f.routes)
			for _, w := range []struct {
				key    string
				status int
				body   string
			}{
				{"e", 200, "eager"},
				{"unknown", 404, ""},
				{"l", tc.wantStatus, map[int]string{200: "lazy", 404: ""}[tc.wantStatus]},
				{"l", tc.wantStatus, map[int]string{200: "lazy", 404: ""}[tc.wantStatus]},
			} {
				resp, body := e.get(e.client(), "/", "x-foo-key", w.key)
				if resp.StatusCode != w.status || body != w.body {
					t.Errorf("x-foo-key %q: got %d %q; want %d %q", w.key, resp.StatusCode, body, w.status, w.body)
				}
			}
			if got := len(f.loads); got != tc.wantLoads {
				t.Errorf("loads = %d; want %d (the second request finds the route)", got, tc.wantLoads)
			}
		})
	}
}

const srdsInlineHCM = `stat_prefix: ingress
scoped_routes:
  name: scopes
  scope_key_builder:
    fragments:
    - header_value_extractor: {name: x-foo-key, index: 0}
  rds_config_source: {ads: {}}
  scoped_route_configurations_list:
    scoped_route_configurations:
    - name: si
      key: {fragments: [{string_key: i}]}
      route_configuration:
        name: ri
        virtual_hosts:
        - name: all
          domains: ["*"]
          routes:
          - match: {prefix: /}
            direct_response: {status: 200, body: {inline_string: inline}}
http_filters:
- name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`

// TestScopedRoutesInline: a scope of scoped_route_configurations_list routes with its inline
// route_configuration.
func TestScopedRoutesInline(t *testing.T) {
	f := &fakeScopes{}
	e := newEnv(t, envOptions{hcm: srdsInlineHCM, srds: f})
	inline := scope("si", "", "i")
	inline.RouteConfiguration = directRC("ri", "inline")
	f.push([]*routev3.ScopedRouteConfiguration{inline}, nil)
	for _, w := range []struct {
		key    string
		status int
		body   string
	}{{"i", 200, "inline"}, {"x", 404, ""}} {
		resp, body := e.get(e.client(), "/", "x-foo-key", w.key)
		if resp.StatusCode != w.status || body != w.body {
			t.Errorf("x-foo-key %q: got %d %q; want %d %q", w.key, resp.StatusCode, body, w.status, w.body)
		}
	}
}

// TestScopedRoutesInlineRejected: an inline scope whose route_configuration does not compile,
// or sets vhds, is an error of the connection manager naming the scope and the rule (Envoy
// rejects the listener), instead of a scope left without routes.
func TestScopedRoutesInlineRejected(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(rc *routev3.RouteConfiguration)
		want string
	}{
		{"duplicate domain", func(rc *routev3.RouteConfiguration) { rc.VirtualHosts[0].Domains = []string{"*", "*"} },
			`scoped_routes "scopes": scoped_route_configurations_list.scoped_route_configurations[0] (scope "si"): route_configuration "ri": `},
		{"vhds", func(rc *routev3.RouteConfiguration) { rc.Vhds = &routev3.Vhds{ConfigSource: &corev3.ConfigSource{}} },
			`scoped_routes "scopes": scoped_route_configurations_list.scoped_route_configurations[0] (scope "si"): route_configuration "ri": vhds is set; virtual host discovery needs a route configuration delivered by RDS`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hcm hcmv3.HttpConnectionManager
			fromYAML(t, srdsInlineHCM, &hcm)
			sr := hcm.GetScopedRoutes()
			tc.edit(sr.GetScopedRouteConfigurationsList().GetScopedRouteConfigurations()[0].GetRouteConfiguration())
			st := &srdsRoutes{compiled: map[*routev3.RouteConfiguration]*route.Table{}}
			err := st.compileInline(sr, route.Options{})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("compileInline() = %v; want an error starting %q", err, tc.want)
			}
		})
	}
	t.Run("valid", func(t *testing.T) {
		var hcm hcmv3.HttpConnectionManager
		fromYAML(t, srdsInlineHCM, &hcm)
		st := &srdsRoutes{compiled: map[*routev3.RouteConfiguration]*route.Table{}}
		if err := st.compileInline(hcm.GetScopedRoutes(), route.Options{}); err != nil || len(st.compiled) != 1 {
			t.Errorf("compileInline() = %v with %d tables; want nil with 1", err, len(st.compiled))
		}
	})
}
