package xds

import (
	"sort"
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
				cp.setAll(v, res)
			}
			seen := &scopesSeen{ch: make(chan []string, 100)}
			sr := &hcmv3.ScopedRoutes{
				Name:            "scopes",
				RdsConfigSource: adsSource(),
				ConfigSpecifier: &hcmv3.ScopedRoutes_ScopedRds{ScopedRds: &hcmv3.ScopedRds{ScopedRdsConfigSource: adsSource()}},
			}
			cancel, err := p.c.WatchScopedRoutes(sr, "ingress", seen.update)
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

			// 2. A scope goes and a route changes.
			snapshot("2", []*routev3.ScopedRouteConfiguration{scopedRoute("sa", "ra", "a")}, directRoute("ra", "A2"), directRoute("rb", "B"))
			seen.waitFor(t, "sa=a:A2")
			p.waitFor("rb unsubscribed", func() bool {
				for _, st := range p.c.rds.states() {
					if st.name == "rb" {
						return false
					}
				}
				return true
			})

			// 3. Two scopes with one key: NACKed, the previous set stays.
			snapshot("3", []*routev3.ScopedRouteConfiguration{scopedRoute("sa", "ra", "a"), scopedRoute("sx", "ra", "a")}, directRoute("ra", "A2"))
			p.waitFor("SRDS rejection", func() bool { return p.stat("http.ingress.scoped_rds.scopes.update_rejected") >= 1 })
			dump := p.c.ScopedRoutesConfigDump(nil)
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
	cp := newControlPlane(t, true)
	lm := newFakeListeners()
	dr := &bootstrapv3.Bootstrap_DynamicResources{AdsConfig: grpcSource(corev3.ApiConfigSource_DELTA_GRPC).GetApiConfigSource(), LdsConfig: adsSource()}
	p := startProxy(t, dr, withDial(cp), func(s *proxySetup) {
		s.afterNew = func(c *Client) {
			if err := c.SetListeners(lm); err != nil {
				t.Fatal(err)
			}
		}
	})
	cp.setAll("1", map[resourcev3.Type][]types.Resource{resourcev3.ListenerType: {scopedListener("l1", 10002)}})
	p.waitFor("LDS v1", func() bool { return p.stat("listener_manager.lds.update_success") >= 1 })
	if got := lm.state("l1"); got != "" {
		t.Fatalf("listener l1 active (version %q) before SRDS answered; want warming", got)
	}
	// The scopes arrive, but not the route configuration of scope sa: still warming.
	cp.setAll("2", map[resourcev3.Type][]types.Resource{
		resourcev3.ListenerType:    {scopedListener("l1", 10002)},
		resourcev3.ScopedRouteType: {scopedRoute("sa", "ra", "a")},
	})
	p.waitFor("SRDS v2", func() bool { return p.stat("http.ingress.scoped_rds.scopes.update_success") >= 1 })
	if got := lm.state("l1"); got != "" {
		t.Fatalf("listener l1 active (version %q) before the route configuration of its scope; want warming", got)
	}
	cp.setAll("3", map[resourcev3.Type][]types.Resource{
		resourcev3.ListenerType:    {scopedListener("l1", 10002)},
		resourcev3.ScopedRouteType: {scopedRoute("sa", "ra", "a")},
		resourcev3.RouteType:       {directRoute("ra", "A")},
	})
	p.waitFor("listener l1 active", func() bool { return lm.state("l1") != "" })
}
