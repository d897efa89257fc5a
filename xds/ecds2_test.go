package xds

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	healthcheckv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/health_check/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/wrapperspb"

	xdswatch "github.com/legateproxy/legate/xds/watch"
)

const routerTypeURL = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"

// ecdsChainsListener is a listener with one filter chain per entry of typeURLs, each with a
// connection manager whose HTTP filter "hc" discovers its configuration with those type_urls
// (chains after the first match destination ports 1001, 1002, ...).
func ecdsChainsListener(name string, port uint32, typeURLs ...[]string) *listenerv3.Listener {
	l := rdsListener(name, "unused", port)
	l.FilterChains = nil
	for i, urls := range typeURLs {
		hcm := &hcmv3.HttpConnectionManager{
			StatPrefix:     fmt.Sprintf("ingress%d", i),
			RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: directRoute("local", "ok")},
			HttpFilters: []*hcmv3.HttpFilter{
				{Name: "hc", ConfigType: &hcmv3.HttpFilter_ConfigDiscovery{ConfigDiscovery: &corev3.ExtensionConfigSource{
					ConfigSource: adsSource(), TypeUrls: urls,
				}}},
				{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{})}},
			},
		}
		fc := &listenerv3.FilterChain{Filters: []*listenerv3.Filter{{
			Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(hcm)},
		}}}
		if i > 0 {
			fc.FilterChainMatch = &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(uint32(1000 + i))}
		}
		l.FilterChains = append(l.FilterChains, fc)
	}
	return l
}

// refusePassThrough stands for the HTTP filter factories (the harness's extensionCheck): it refuses
// health check configurations with pass_through_mode true and takes anything else.
func refusePassThrough(tc *corev3.TypedExtensionConfig) error {
	var hc healthcheckv3.HealthCheck
	if tc.GetTypedConfig().GetTypeUrl() != healthCheckTypeURL {
		return nil
	}
	if err := tc.GetTypedConfig().UnmarshalTo(&hc); err != nil {
		return err
	}
	if hc.GetPassThroughMode().GetValue() {
		return errors.New("pass_through_mode = true; refused by the factory")
	}
	return nil
}

// TestECDSWarmingChecks: what a warming listener waits for is checked as its filters will
// check it once built (Envoy's providers exist while the listener warms). A first
// configuration the filter factory refuses (the harness's extensionCheck), or that the type_urls of
// any filter discovering it exclude — another filter chain of the same listener, or another
// listener — is NACKed with the reason, counted in update_rejected and config_fail, shown as
// error_state, and ends the wait: the listener comes up without it (its filter serves its
// default). A valid configuration is then taken.
func TestECDSWarmingChecks(t *testing.T) {
	const prefix = "extension_config_discovery.http_filter.hc."
	hcTypes, routerTypes := []string{healthCheckTypeURL}, []string{routerTypeURL}
	tests := []struct {
		name      string
		listeners []*listenerv3.Listener
		first     *corev3.TypedExtensionConfig
		want      string
	}{
		{"refused by the factory", []*listenerv3.Listener{ecdsChainsListener("l1", 10001, hcTypes)},
			healthCheckExtension("hc", true), `extension config "hc": pass_through_mode = true; refused by the factory`},
		{"type_urls of another filter chain", []*listenerv3.Listener{ecdsChainsListener("l1", 10001, hcTypes, routerTypes)},
			healthCheckExtension("hc", false),
			`extension config "hc": typed_config type "` + healthCheckTypeURL + `" is not one of config_discovery.type_urls ["` + routerTypeURL + `"]`},
		{"type_urls of another listener", []*listenerv3.Listener{ecdsChainsListener("l1", 10001, hcTypes), ecdsChainsListener("l2", 10002, routerTypes)},
			healthCheckExtension("hc", false),
			`extension config "hc": typed_config type "` + healthCheckTypeURL + `" is not one of config_discovery.type_urls ["` + routerTypeURL + `"]`},
	}
	for _, api := range []corev3.ApiConfigSource_ApiType{corev3.ApiConfigSource_GRPC, corev3.ApiConfigSource_DELTA_GRPC} {
		for _, tc := range tests {
			t.Run(api.String()+"/"+tc.name, func(t *testing.T) {
				cp, lm, p := startLDSProxy(t, api, func(s *proxySetup) { s.extensionCheck = refusePassThrough })
				var ls []types.Resource
				for _, l := range tc.listeners {
					ls = append(ls, l)
				}
				snapshot := func(v string, ext *corev3.TypedExtensionConfig) {
					cp.Set(v, map[resourcev3.Type][]types.Resource{resourcev3.ListenerType: ls, resourcev3.ExtensionConfigType: {ext}})
				}

				snapshot("1", tc.first)
				p.waitFor("NACK "+tc.want, func() bool { return nackDetail(cp) == tc.want })
				for _, l := range tc.listeners {
					p.waitFor("listener "+l.GetName()+" active without its filter configuration", func() bool { return lm.state(l.GetName()) != "" })
				}
				if got := []uint64{p.stat(prefix + "config_reload"), p.stat(prefix + "update_success")}; !cmp.Equal(got, []uint64{0, 0}) {
					t.Errorf("config_reload, update_success = %v; want [0 0]", got)
				}
				if p.stat(prefix+"config_fail") == 0 || p.stat(prefix+"update_rejected") == 0 {
					t.Errorf("config_fail, update_rejected = %d, %d; want both > 0", p.stat(prefix+"config_fail"), p.stat(prefix+"update_rejected"))
				}
				f := p.c.EcdsConfigDump(nil).GetEcdsFilters()
				if len(f) != 1 || f[0].GetEcdsFilter() != nil || f[0].GetErrorState().GetDetails() != tc.want {
					t.Errorf("ecds dump = %v; want no configuration and error_state %q", f, tc.want)
				}

				// Then a configuration that suits every filter is taken; for the type_urls
				// cases the listeners are replaced by ones whose filters all take the router.
				good := healthCheckExtension("hc", false)
				if tc.name != "refused by the factory" {
					good = &corev3.TypedExtensionConfig{Name: "hc", TypedConfig: mustAny(&routerv3.Router{})}
					ls = nil
					for _, l := range tc.listeners {
						ls = append(ls, ecdsChainsListener(l.GetName(), l.GetAddress().GetSocketAddress().GetPortValue(), routerTypes))
					}
				}
				snapshot("2", good)
				p.waitFor("config_reload", func() bool { return p.stat(prefix+"config_reload") == 1 })
			})
		}
	}
}

// TestECDSDiscardOnReject: when one filter's check accepts a configuration (building what it
// would serve) and another filter sharing the subscription refuses it, the configuration is
// NACKed, no update reaches either, and the first check's discard runs at once. A filter
// whose type_urls exclude a configuration rejects it before any check builds anything.
func TestECDSDiscardOnReject(t *testing.T) {
	cp := newControlPlane(t, true)
	dr := &bootstrapv3.Bootstrap_DynamicResources{AdsConfig: grpcSource(corev3.ApiConfigSource_GRPC).GetApiConfigSource()}
	p := startProxy(t, dr, withDial(cp))

	var mu sync.Mutex
	var events []string
	record := func(e string) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}
	recorded := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), events...)
	}
	updates := make(chan *corev3.TypedExtensionConfig, 10)
	building := func(tc *corev3.TypedExtensionConfig) (func(), error) {
		record("built " + tc.GetTypedConfig().GetTypeUrl())
		return func() { record("discarded " + tc.GetTypedConfig().GetTypeUrl()) }, nil
	}
	refusing := func(*corev3.TypedExtensionConfig) (func(), error) {
		return nil, errors.New("refused by the second filter")
	}

	_, _, cancel1, err := p.ecds.WatchExtensionConfig("hc", &corev3.ExtensionConfigSource{ConfigSource: adsSource()}, building,
		func(_ uint64, tc *corev3.TypedExtensionConfig) { updates <- tc })
	if err != nil {
		t.Fatal(err)
	}
	defer cancel1()
	_, _, cancel2, err := p.ecds.WatchExtensionConfig("hc", &corev3.ExtensionConfigSource{ConfigSource: adsSource(), TypeUrls: []string{healthCheckTypeURL}}, refusing,
		func(_ uint64, tc *corev3.TypedExtensionConfig) { updates <- tc })
	if err != nil {
		t.Fatal(err)
	}
	defer cancel2()

	snapshot := func(v string, ext *corev3.TypedExtensionConfig) {
		cp.Set(v, map[resourcev3.Type][]types.Resource{resourcev3.ExtensionConfigType: {ext}})
	}
	// 1. The second filter's type_urls exclude the router: nothing is built.
	snapshot("1", &corev3.TypedExtensionConfig{Name: "hc", TypedConfig: mustAny(&routerv3.Router{})})
	want1 := `extension config "hc": typed_config type "` + routerTypeURL + `" is not one of config_discovery.type_urls ["` + healthCheckTypeURL + `"]`
	p.waitFor("NACK of version 1", func() bool { return nackDetail(cp) == want1 })
	// 2. The first builds a health check, the second refuses it: it is discarded at once.
	snapshot("2", healthCheckExtension("hc", false))
	want2 := `extension config "hc": refused by the second filter`
	p.waitFor("NACK of version 2", func() bool { return nackDetail(cp) == want2 })
	// The control plane may send version 2 again: each time it is built and discarded.
	p.waitFor("the discard", func() bool { return len(recorded()) >= 2 })
	got := recorded()
	for i, e := range got {
		want := "built " + healthCheckTypeURL
		if i%2 == 1 {
			want = "discarded " + healthCheckTypeURL
		}
		if e != want {
			t.Errorf("check event %d = %q; want %q (all: %q)", i, e, want, got)
		}
	}
	// Updates run before the NACK is sent. The first rejection ended the initial fetch (an
	// update without configuration); no configuration reached a watcher.
	for len(updates) > 0 {
		if tc := <-updates; tc != nil {
			t.Errorf("a watcher got %v; want no configuration from rejected versions", tc)
		}
	}
}

// TestVetChecks: quick checks (type_urls) of every watcher run before any full check (the
// factories); a stand-in full check (a warming listener's) runs only when no filter has a
// full check of its own; a refusal discards what the earlier full checks built.
func TestVetChecks(t *testing.T) {
	tc := healthCheckExtension("hc", false)
	var events []string
	quick := func(name string, err error) func(any) error {
		return func(any) error { events = append(events, "quick "+name); return err }
	}
	full := func(name string, err error) func(any) (func(), error) {
		return func(any) (func(), error) {
			events = append(events, "full "+name)
			if err != nil {
				return nil, err
			}
			return func() { events = append(events, "discard "+name) }, nil
		}
	}
	refused := errors.New("refused")
	tests := []struct {
		name    string
		checks  []xdswatch.Check
		wantErr error
		want    []string
		discard int
	}{
		{"quick before full", []xdswatch.Check{{Accept: quick("a", nil), Build: full("a", nil)}, {Accept: quick("b", nil), Build: full("b", nil)}},
			nil, []string{"quick a", "quick b", "full a", "full b"}, 2},
		{"quick refusal builds nothing", []xdswatch.Check{{Accept: quick("a", nil), Build: full("a", nil)}, {Accept: quick("b", refused)}},
			refused, []string{"quick a", "quick b"}, 0},
		{"full refusal discards", []xdswatch.Check{{Build: full("a", nil)}, {Build: full("b", refused)}},
			refused, []string{"full a", "full b", "discard a"}, 0},
		{"stand-in alone runs", []xdswatch.Check{{Build: full("listener", nil), StandIn: true}},
			nil, []string{"full listener"}, 1},
		{"stand-in skipped beside a filter", []xdswatch.Check{{Accept: quick("listener", nil), Build: full("listener", refused), StandIn: true}, {Build: full("filter", nil)}},
			nil, []string{"quick listener", "full filter"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events = nil
			v := vetChecks(tt.checks, tc)
			if !errors.Is(v.err, tt.wantErr) {
				t.Errorf("err = %v; want %v", v.err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, events); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if len(v.discard) != tt.discard {
				t.Errorf("discards = %d; want %d", len(v.discard), tt.discard)
			}
		})
	}
}
