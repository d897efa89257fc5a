package xds

import (
	"sort"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"

	xdswatch "github.com/legateproxy/legate/xds/watch"
)

func scopedRoute(name, rc, key string) *routev3.ScopedRouteConfiguration {
	return &routev3.ScopedRouteConfiguration{Name: name, RouteConfigurationName: rc, Key: &routev3.ScopedRouteConfiguration_Key{
		Fragments: []*routev3.ScopedRouteConfiguration_Key_Fragment{{Type: &routev3.ScopedRouteConfiguration_Key_Fragment_StringKey{StringKey: key}}},
	}}
}

// scopesSeen is what a scoped routes watcher last received: "scope=key:body" per scope whose
// route configuration arrived, sorted.
type scopesSeen struct{ ch chan []string }

func (s *scopesSeen) update(_ uint64, scopes []*routev3.ScopedRouteConfiguration, routes map[string]*routev3.RouteConfiguration) {
	var out []string
	for _, sc := range scopes {
		body := "-"
		if rc := routes[sc.GetRouteConfigurationName()]; rc != nil {
			body = rc.GetVirtualHosts()[0].GetRoutes()[0].GetDirectResponse().GetBody().GetInlineString()
		}
		out = append(out, sc.GetName()+"="+sc.GetKey().GetFragments()[0].GetStringKey()+":"+body)
	}
	sort.Strings(out)
	s.ch <- out
}

func (s *scopesSeen) waitFor(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	var last []string
	for {
		select {
		case got := <-s.ch:
			last = got
			if cmp.Equal(got, want) {
				return
			}
		case <-deadline:
			t.Fatalf("scopes = %q; want %q", last, want)
		}
	}
}

// TestSRDS drives scoped routes over ADS (both variants) from go-control-plane's server: the
// scopes and the route configurations they name reach the watcher, a removed scope ends its
// route subscription, two scopes with one key are NACKed with the previous set kept, and the
// route_scopes dump shows the dynamic scopes with their version.
func TestSRDS(t *testing.T) {
	for _, api := range []corev3.ApiConfigSource_ApiType{corev3.ApiConfigSource_GRPC, corev3.ApiConfigSource_DELTA_GRPC} {
		t.Run(api.String(), func(t *testing.T) {
			cp := newControlPlane(t, true)
			dr := &bootstrapv3.Bootstrap_DynamicResources{AdsConfig: grpcSource(api).GetApiConfigSource()}
			p := startProxy(t, dr, withDial(cp))
			snapshot := func(v string, scopes []*routev3.ScopedRouteConfiguration, rcs ...*routev3.RouteConfiguration) {
				res := map[resourcev3.Type][]types.Resource{resourcev3.ScopedRouteType: {}, resourcev3.RouteType: {}}
				for _, s := range scopes {
					res[resourcev3.ScopedRouteType] = append(res[resourcev3.ScopedRouteType], s)
				}
				for _, rc := range rcs {
					res[resourcev3.RouteType] = append(res[resourcev3.RouteType], rc)
				}
				cp.Set(v, res)
			}
			seen := &scopesSeen{ch: make(chan []string, 100)}
			sr := &hcmv3.ScopedRoutes{
				Name:            "scopes",
				RdsConfigSource: adsSource(),
				ConfigSpecifier: &hcmv3.ScopedRoutes_ScopedRds{ScopedRds: &hcmv3.ScopedRds{ScopedRdsConfigSource: adsSource()}},
			}
			cancel, err := p.r.WatchScopedRoutes(sr, "ingress", seen.update)
			if err != nil {
				t.Fatal(err)
			}
			defer cancel()
			seen.waitFor(t) // the first call: no scopes yet

			// 1. Two scopes and their routes.
			snapshot("1", []*routev3.ScopedRouteConfiguration{scopedRoute("sa", "ra", "a"), scopedRoute("sb", "rb", "b")},
				directRoute("ra", "A"), directRoute("rb", "B"))
			seen.waitFor(t, "sa=a:A", "sb=b:B")
			if got := p.stat("http.ingress.scoped_rds.scopes.update_success"); got < 1 {
				t.Errorf("http.ingress.scoped_rds.scopes.update_success = %d; want >= 1", got)
			}

			// 2. A scope goes and a route changes. rb leaves the snapshot with its scope: in ADS
			// mode go-control-plane answers a route request only when it names every route
			// configuration of the snapshot, and Legate stops asking for rb.
			snapshot("2", []*routev3.ScopedRouteConfiguration{scopedRoute("sa", "ra", "a")}, directRoute("ra", "A2"))
			seen.waitFor(t, "sa=a:A2")
			p.waitFor("rb unsubscribed", func() bool {
				for _, st := range p.c.States(xdswatch.RouteType) {
					if st.Name == "rb" {
						return false
					}
				}
				return true
			})

			// 3. Two scopes with one key: NACKed, the previous set stays.
			snapshot("3", []*routev3.ScopedRouteConfiguration{scopedRoute("sa", "ra", "a"), scopedRoute("sx", "ra", "a")}, directRoute("ra", "A2"))
			p.waitFor("SRDS rejection", func() bool { return p.stat("http.ingress.scoped_rds.scopes.update_rejected") >= 1 })
			dump := p.r.ScopedRoutesConfigDump(nil)
			if len(dump.GetDynamicScopedRouteConfigs()) != 1 {
				t.Fatalf("route_scopes dump = %v; want one dynamic entry", dump)
			}
			d := dump.GetDynamicScopedRouteConfigs()[0]
			if d.GetName() != "scopes" || d.GetVersionInfo() != "2" || len(d.GetScopedRouteConfigs()) != 1 || d.GetLastUpdated() == nil {
				t.Errorf("dynamic_scoped_route_configs[0] = %v; want scopes at version 2 with one scope", d)
			}
			if got := p.text("http.ingress.scoped_rds.scopes.version_text"); got != "2" {
				t.Errorf("version_text = %q; want 2", got)
			}
		})
	}
}

// scopedListener is a listener whose connection manager takes its scopes from SRDS over ADS.
func scopedListener(name string, port uint32) *listenerv3.Listener {
	l := rdsListener(name, "unused", port)
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: "ingress",
		RouteSpecifier: &hcmv3.HttpConnectionManager_ScopedRoutes{ScopedRoutes: &hcmv3.ScopedRoutes{
			Name: "scopes",
			ScopeKeyBuilder: &hcmv3.ScopedRoutes_ScopeKeyBuilder{Fragments: []*hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder{{
				Type: &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor_{HeaderValueExtractor: &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor{
					Name: "x-scope", ExtractType: &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor_Index{Index: 0},
				}},
			}}},
			RdsConfigSource: adsSource(),
			ConfigSpecifier: &hcmv3.ScopedRoutes_ScopedRds{ScopedRds: &hcmv3.ScopedRds{ScopedRdsConfigSource: adsSource()}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{})}}},
	}
	l.FilterChains[0].Filters[0].ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(hcm)}
	return l
}

// TestSRDSListenerWarming: an LDS listener with scoped_rds warms until the first SRDS
// response and the route configurations of the scopes it lists have arrived.
func TestSRDSListenerWarming(t *testing.T) {
	cp, lm, p := startLDSProxy(t, corev3.ApiConfigSource_DELTA_GRPC)
	cp.Set("1", map[resourcev3.Type][]types.Resource{resourcev3.ListenerType: {scopedListener("l1", 10002)}})
	p.waitFor("LDS v1", func() bool { return p.stat("listener_manager.lds.update_success") >= 1 })
	if got := lm.state("l1"); got != "" {
		t.Fatalf("listener l1 active (version %q) before SRDS answered; want warming", got)
	}
	// The scopes arrive, but not the route configuration of scope sa: still warming.
	cp.Set("2", map[resourcev3.Type][]types.Resource{
		resourcev3.ListenerType:    {scopedListener("l1", 10002)},
		resourcev3.ScopedRouteType: {scopedRoute("sa", "ra", "a")},
	})
	p.waitFor("SRDS v2", func() bool { return p.stat("http.ingress.scoped_rds.scopes.update_success") >= 1 })
	if got := lm.state("l1"); got != "" {
		t.Fatalf("listener l1 active (version %q) before the route configuration of its scope; want warming", got)
	}
	cp.Set("3", map[resourcev3.Type][]types.Resource{
		resourcev3.ListenerType:    {scopedListener("l1", 10002)},
		resourcev3.ScopedRouteType: {scopedRoute("sa", "ra", "a")},
		resourcev3.RouteType:       {directRoute("ra", "A")},
	})
	p.waitFor("listener l1 active", func() bool { return lm.state("l1") != "" })
}

// TestSRDSOnDemand: an on_demand scope is known (its key) but its route configuration is
// subscribed to only once a request asks for it; concurrent requests share the load and are
// all called back after the watcher has the route configuration. Inline scopes route with
// their route_configuration and cannot be loaded.
func TestSRDSOnDemand(t *testing.T) {
	cp := newControlPlane(t, true)
	dr := &bootstrapv3.Bootstrap_DynamicResources{AdsConfig: grpcSource(corev3.ApiConfigSource_DELTA_GRPC).GetApiConfigSource()}
	p := startProxy(t, dr, withDial(cp))
	lazy := scopedRoute("sl", "rl", "l")
	lazy.OnDemand = true
	cp.Set("1", map[resourcev3.Type][]types.Resource{
		resourcev3.ScopedRouteType: {scopedRoute("se", "re", "e"), lazy},
		resourcev3.RouteType:       {directRoute("re", "E"), directRoute("rl", "L")},
	})
	seen := &scopesSeen{ch: make(chan []string, 100)}
	sr := &hcmv3.ScopedRoutes{
		Name:            "scopes",
		RdsConfigSource: adsSource(),
		ConfigSpecifier: &hcmv3.ScopedRoutes_ScopedRds{ScopedRds: &hcmv3.ScopedRds{ScopedRdsConfigSource: adsSource()}},
	}
	cancel, load, err := p.r.WatchScopedRoutesOnDemand(sr, "ingress", seen.update)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	seen.waitFor(t, "se=e:E", "sl=l:-")
	for _, st := range p.c.States(xdswatch.RouteType) {
		if st.Name == "rl" {
			t.Fatalf("rl subscribed before a request asked for scope sl")
		}
	}
	if got, want := p.stat("http.ingress.scoped_rds.scopes.on_demand_scopes"), uint64(1); got != want {
		t.Errorf("on_demand_scopes = %d; want %d", got, want)
	}
	if got, want := p.stat("http.ingress.scoped_rds.scopes.active_scopes"), uint64(1); got != want {
		t.Errorf("active_scopes = %d; want %d", got, want)
	}
	if _, ok := load("nope", func() {}); ok {
		t.Errorf("load(unknown key) ok = true; want false")
	}
	const n = 10
	woken := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		go func() {
			if _, ok := load("l", func() { woken <- struct{}{} }); !ok {
				t.Errorf("load(l) ok = false; want true")
			}
		}()
	}
	deadline := time.After(10 * time.Second)
	for i := 0; i < n; i++ {
		select {
		case <-woken:
		case <-deadline:
			t.Fatalf("%d of %d loads called back; want all", i, n)
		}
	}
	seen.waitFor(t, "se=e:E", "sl=l:L")
	if got, want := p.stat("http.ingress.scoped_rds.scopes.active_scopes"), uint64(2); got != want {
		t.Errorf("active_scopes after the load = %d; want %d", got, want)
	}
	if got, want := p.stat("http.ingress.scoped_rds.scopes.all_scopes"), uint64(2); got != want {
		t.Errorf("all_scopes = %d; want %d", got, want)
	}

	t.Run("inline", func(t *testing.T) {
		inl := scopedRoute("si", "", "i")
		inl.RouteConfiguration = directRoute("ri", "I")
		sr := &hcmv3.ScopedRoutes{Name: "inline", RdsConfigSource: adsSource(), ConfigSpecifier: &hcmv3.ScopedRoutes_ScopedRouteConfigurationsList{
			ScopedRouteConfigurationsList: &hcmv3.ScopedRouteConfigurationsList{ScopedRouteConfigurations: []*routev3.ScopedRouteConfiguration{inl}},
		}}
		var got []*routev3.ScopedRouteConfiguration
		cancel, load, err := p.r.WatchScopedRoutesOnDemand(sr, "inline", func(_ uint64, scopes []*routev3.ScopedRouteConfiguration, _ map[string]*routev3.RouteConfiguration) {
			got = scopes
		})
		if err != nil {
			t.Fatal(err)
		}
		defer cancel()
		if len(got) != 1 || got[0].GetRouteConfiguration().GetName() != "ri" {
			t.Errorf("scopes = %v; want si with its inline route configuration ri", got)
		}
		if _, ok := load("i", func() {}); ok {
			t.Errorf("load(inline scope) ok = true; want false")
		}
	})
}

// TestScopedRouteRules: the rules of SRDS resources and of inline scoped routes, as Envoy's.
func TestScopedRouteRules(t *testing.T) {
	cp := newControlPlane(t, true)
	dr := &bootstrapv3.Bootstrap_DynamicResources{AdsConfig: grpcSource(corev3.ApiConfigSource_GRPC).GetApiConfigSource()}
	p := startProxy(t, dr, withDial(cp))
	withInline := scopedRoute("s", "", "k")
	withInline.RouteConfiguration = directRoute("r", "x")
	both := scopedRoute("s", "r", "k")
	both.RouteConfiguration = directRoute("r", "x")
	for _, tc := range []struct {
		name    string
		sr      *hcmv3.ScopedRoutes
		wantErr string
	}{
		{"inline with route_configuration", inlineScopes(withInline), ""},
		{"inline with route_configuration_name", inlineScopes(scopedRoute("s", "r", "k")), "not supported with inline scoped routes"},
		{"inline with both", inlineScopes(both), "not supported with inline scoped routes"},
		{"inline without routes", inlineScopes(scopedRoute("s", "", "k")), "route_configuration is unset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cancel, err := p.r.WatchScopedRoutes(tc.sr, "x", func(uint64, []*routev3.ScopedRouteConfiguration, map[string]*routev3.RouteConfiguration) {})
			if err == nil {
				cancel()
			}
			if got := errString(err); (tc.wantErr == "") != (got == "") || !strings.Contains(got, tc.wantErr) {
				t.Errorf("WatchScopedRoutes error = %q; want one containing %q", got, tc.wantErr)
			}
		})
	}
}

func inlineScopes(list ...*routev3.ScopedRouteConfiguration) *hcmv3.ScopedRoutes {
	return &hcmv3.ScopedRoutes{Name: "inline", RdsConfigSource: adsSource(), ConfigSpecifier: &hcmv3.ScopedRoutes_ScopedRouteConfigurationsList{
		ScopedRouteConfigurationsList: &hcmv3.ScopedRouteConfigurationsList{ScopedRouteConfigurations: list},
	}}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
