package xds

import (
	"errors"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	healthcheckv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/health_check/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const healthCheckTypeURL = "type.googleapis.com/envoy.extensions.filters.http.health_check.v3.HealthCheck"

// ecdsListener is a listener whose connection manager discovers its HTTP filter "hc" over ECDS.
func ecdsListener(name string, port uint32) *listenerv3.Listener {
	l := rdsListener(name, "unused", port)
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix:     "ingress",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: directRoute("local", "ok")},
		HttpFilters: []*hcmv3.HttpFilter{
			{Name: "hc", ConfigType: &hcmv3.HttpFilter_ConfigDiscovery{ConfigDiscovery: &corev3.ExtensionConfigSource{
				ConfigSource: adsSource(), TypeUrls: []string{healthCheckTypeURL},
			}}},
			{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{})}},
		},
	}
	l.FilterChains[0].Filters[0].ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(hcm)}
	return l
}

func healthCheckExtension(name string, passThrough bool) *corev3.TypedExtensionConfig {
	return &corev3.TypedExtensionConfig{Name: name, TypedConfig: mustAny(&healthcheckv3.HealthCheck{PassThroughMode: wrapperspb.Bool(passThrough)})}
}

// TestECDS drives ECDS over ADS (both variants) from go-control-plane's server: a listener
// whose HTTP filter discovers its configuration warms until the configuration arrives, then
// the filter's watchers see each update; a configuration without typed_config is NACKed while
// the previous one stays; the ecds dump shows versions and the error state.
func TestECDS(t *testing.T) {
	for _, api := range []corev3.ApiConfigSource_ApiType{corev3.ApiConfigSource_GRPC, corev3.ApiConfigSource_DELTA_GRPC} {
		t.Run(api.String(), func(t *testing.T) {
			cp, lm, p := startLDSProxy(t, api)
			snapshot := func(v string, exts ...*corev3.TypedExtensionConfig) {
				res := map[resourcev3.Type][]types.Resource{resourcev3.ListenerType: {ecdsListener("l1", 10001)}}
				for _, e := range exts {
					res[resourcev3.ExtensionConfigType] = append(res[resourcev3.ExtensionConfigType], e)
				}
				cp.Set(v, res)
			}

			// 1. The listener warms until its filter configuration arrives.
			snapshot("1")
			p.waitFor("LDS v1", func() bool { return p.stat("listener_manager.lds.update_success") >= 1 })
			if got := lm.state("l1"); got != "" {
				t.Fatalf("listener l1 active (version %q) before its filter configuration; want warming", got)
			}

			// 2. It arrives: the listener is added; a filter watching it gets it.
			snapshot("2", healthCheckExtension("hc", false))
			p.waitFor("listener l1 active", func() bool { return lm.state("l1") != "" })
			updates := make(chan bool, 10)
			cur, _, cancel, err := p.ecds.WatchExtensionConfig("hc", &corev3.ExtensionConfigSource{ConfigSource: adsSource()}, nil, func(_ uint64, tc *corev3.TypedExtensionConfig) {
				var hc healthcheckv3.HealthCheck
				if tc != nil && tc.GetTypedConfig().UnmarshalTo(&hc) == nil {
					updates <- hc.GetPassThroughMode().GetValue()
				}
			})
			if err != nil || cur == nil {
				t.Fatalf("WatchExtensionConfig = %v, %v; want the current configuration", cur, err)
			}
			defer cancel()
			if got := p.stat("extension_config_discovery.http_filter.hc.config_reload"); got != 1 {
				t.Errorf("extension_config_discovery.http_filter.hc.config_reload = %d; want 1", got)
			}

			// 3. An update reaches the watcher.
			snapshot("3", healthCheckExtension("hc", true))
			select {
			case got := <-updates:
				if !got {
					t.Errorf("updated pass_through_mode = false; want true")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no ECDS update")
			}

			// 4. A configuration without typed_config is rejected; version 3 stays.
			snapshot("4", &corev3.TypedExtensionConfig{Name: "hc"})
			p.waitFor("ECDS rejection", func() bool { return p.stat("extension_config_discovery.http_filter.hc.update_rejected") >= 1 })
			dump := p.c.EcdsConfigDump(nil)
			if len(dump.GetEcdsFilters()) != 1 {
				t.Fatalf("ecds dump = %v; want one filter", dump)
			}
			f := dump.GetEcdsFilters()[0]
			if f.GetVersionInfo() != "3" || f.GetEcdsFilter() == nil || f.GetErrorState().GetVersionInfo() != "4" || f.GetLastUpdated() == nil {
				t.Errorf("ecds dump entry = %v; want version 3 serving with an error_state for version 4", f)
			}
		})
	}
}

// TestECDSAndSRDSTransports: ECDS and SRDS also travel on their own services — state of the
// world and delta gRPC (ExtensionConfigDiscoveryService, ScopedRoutesDiscoveryService) and
// REST — from go-control-plane's server.
func TestECDSAndSRDSTransports(t *testing.T) {
	rest := &corev3.ConfigSource{
		ResourceApiVersion: corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_ApiConfigSource{ApiConfigSource: &corev3.ApiConfigSource{
			ApiType: corev3.ApiConfigSource_REST, TransportApiVersion: corev3.ApiVersion_V3,
			ClusterNames: []string{"xds"}, RefreshDelay: durationpb.New(20 * time.Millisecond),
		}},
	}
	for _, tc := range []struct {
		name string
		src  *corev3.ConfigSource
	}{
		{"GRPC", grpcSource(corev3.ApiConfigSource_GRPC)},
		{"DELTA_GRPC", grpcSource(corev3.ApiConfigSource_DELTA_GRPC)},
		{"REST", rest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := newControlPlane(t, false)
			p := startProxy(t, nil, withDial(cp))
			cp.Set("1", map[resourcev3.Type][]types.Resource{
				resourcev3.ExtensionConfigType: {healthCheckExtension("hc", true)},
				resourcev3.ScopedRouteType:     {scopedRoute("sa", "ra", "a")},
				resourcev3.RouteType:           {directRoute("ra", "A")},
			})
			exts := make(chan bool, 10)
			cur, _, cancel, err := p.ecds.WatchExtensionConfig("hc", &corev3.ExtensionConfigSource{ConfigSource: tc.src}, nil, func(_ uint64, tc *corev3.TypedExtensionConfig) { exts <- tc != nil })
			if err != nil {
				t.Fatal(err)
			}
			defer cancel()
			if cur == nil {
				select {
				case ok := <-exts:
					if !ok {
						t.Fatal("ECDS delivered no configuration")
					}
				case <-time.After(10 * time.Second):
					t.Fatal("no ECDS configuration")
				}
			}
			seen := &scopesSeen{ch: make(chan []string, 100)}
			cancelScopes, err := p.r.WatchScopedRoutes(&hcmv3.ScopedRoutes{
				Name: "scopes", RdsConfigSource: tc.src,
				ConfigSpecifier: &hcmv3.ScopedRoutes_ScopedRds{ScopedRds: &hcmv3.ScopedRds{ScopedRdsConfigSource: tc.src}},
			}, "ingress", seen.update)
			if err != nil {
				t.Fatal(err)
			}
			defer cancelScopes()
			seen.waitFor(t, "sa=a:A")
		})
	}
}

// nackDetail returns the error_detail of the last NACK of ECDS resources the control plane
// received, or "".
func nackDetail(cp *controlPlane) string {
	detail := ""
	for _, r := range cp.Requests() {
		if r.GetTypeUrl() == resourcev3.ExtensionConfigType && r.GetErrorDetail() != nil {
			detail = r.GetErrorDetail().GetMessage()
		}
	}
	for _, r := range cp.DeltaRequests() {
		if r.GetTypeUrl() == resourcev3.ExtensionConfigType && r.GetErrorDetail() != nil {
			detail = r.GetErrorDetail().GetMessage()
		}
	}
	return detail
}

// TestECDSChecks drives ECDS over ADS (both variants) from go-control-plane's server and checks
// what Envoy checks: a listener's first filter configuration of a type not in type_urls is
// NACKed (error_detail names it and the rule), counted in update_rejected and config_fail, and
// the listener proceeds without it; a configuration a filter's check refuses is NACKed while
// the previous one keeps serving and shows in the dump's error_state; a filter whose type_urls
// exclude the current configuration gets none and counts config_conflict; an initial fetch
// timeout counts config_fail.
func TestECDSChecks(t *testing.T) {
	const prefix = "extension_config_discovery.http_filter.hc."
	for _, api := range []corev3.ApiConfigSource_ApiType{corev3.ApiConfigSource_GRPC, corev3.ApiConfigSource_DELTA_GRPC} {
		t.Run(api.String(), func(t *testing.T) {
			cp, lm, p := startLDSProxy(t, api)
			snapshot := func(v string, ext *corev3.TypedExtensionConfig) {
				cp.Set(v, map[resourcev3.Type][]types.Resource{
					resourcev3.ListenerType:        {ecdsListener("l1", 10001)},
					resourcev3.ExtensionConfigType: {ext},
				})
			}
			// checkStats compares config_fail, config_reload and config_conflict; config_fail
			// counts every rejection, as update_rejected does (the control plane may send a
			// rejected version again meanwhile).
			checkStats := func(reload, conflict uint64) {
				t.Helper()
				before := p.stat(prefix + "update_rejected")
				fail := p.stat(prefix + "config_fail")
				after := p.stat(prefix + "update_rejected")
				if fail < before || fail > after || fail == 0 {
					t.Errorf("config_fail = %d; want update_rejected (%d..%d)", fail, before, after)
				}
				got := []uint64{p.stat(prefix + "config_reload"), p.stat(prefix + "config_conflict")}
				if diff := cmp.Diff([]uint64{reload, conflict}, got); diff != "" {
					t.Errorf("config_reload, config_conflict (-want +got):\n%s", diff)
				}
			}
			wantNack := func(want string) {
				t.Helper()
				p.waitFor("NACK "+want, func() bool { return nackDetail(cp) == want })
			}

			// 1. The listener's first configuration has a type its filter does not allow.
			snapshot("1", &corev3.TypedExtensionConfig{Name: "hc", TypedConfig: mustAny(&routerv3.Router{})})
			wantNack(`extension config "hc": typed_config type "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router" is not one of config_discovery.type_urls ["` + healthCheckTypeURL + `"]`)
			p.waitFor("listener l1 active without its filter configuration", func() bool { return lm.state("l1") != "" })
			checkStats(0, 0)

			// 2. A valid one is taken; a filter whose check refuses pass-through watches it.
			snapshot("2", healthCheckExtension("hc", false))
			p.waitFor("config_reload", func() bool { return p.stat(prefix+"config_reload") == 1 })
			updates := make(chan *corev3.TypedExtensionConfig, 10)
			refusePassThrough := func(tc *corev3.TypedExtensionConfig) (func(), error) {
				var hc healthcheckv3.HealthCheck
				if err := tc.GetTypedConfig().UnmarshalTo(&hc); err != nil {
					return nil, err
				}
				if hc.GetPassThroughMode().GetValue() {
					return nil, errors.New("pass_through_mode = true; refused by the test")
				}
				return nil, nil
			}
			cd := &corev3.ExtensionConfigSource{ConfigSource: adsSource(), TypeUrls: []string{healthCheckTypeURL}}
			cur, _, cancel, err := p.ecds.WatchExtensionConfig("hc", cd, refusePassThrough, func(_ uint64, tc *corev3.TypedExtensionConfig) { updates <- tc })
			if err != nil || cur == nil {
				t.Fatalf("WatchExtensionConfig = %v, %v; want the current configuration", cur, err)
			}
			defer cancel()

			// 3. The check refuses the next: NACK, and version 2 keeps serving.
			rejected := p.stat(prefix + "update_rejected")
			snapshot("3", healthCheckExtension("hc", true))
			wantNack(`extension config "hc": pass_through_mode = true; refused by the test`)
			p.waitFor("another rejection", func() bool { return p.stat(prefix+"update_rejected") > rejected })
			checkStats(1, 0)
			select {
			case tc := <-updates:
				t.Errorf("the watcher got %v; want no update for a rejected configuration", tc)
			default:
			}
			f := p.c.EcdsConfigDump(nil).GetEcdsFilters()
			if len(f) != 1 || f[0].GetVersionInfo() != "2" || f[0].GetErrorState().GetVersionInfo() != "3" ||
				!strings.Contains(f[0].GetErrorState().GetDetails(), "refused by the test") {
				t.Errorf("ecds dump = %v; want version 2 serving with an error_state for version 3", f)
			}

			// 4. A filter allowing only another type finds the current configuration unfit.
			other := &corev3.ExtensionConfigSource{ConfigSource: adsSource(), TypeUrls: []string{"type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}
			cur, _, cancelOther, err := p.ecds.WatchExtensionConfig("hc", other, nil, func(uint64, *corev3.TypedExtensionConfig) {})
			if err != nil || cur != nil {
				t.Errorf("WatchExtensionConfig with other type_urls = %v, %v; want no configuration", cur, err)
			}
			cancelOther()
			checkStats(1, 1)

			// 5. A change the check accepts reaches the watcher.
			next := &corev3.TypedExtensionConfig{Name: "hc", TypedConfig: mustAny(&healthcheckv3.HealthCheck{
				PassThroughMode: wrapperspb.Bool(false), Headers: []*routev3.HeaderMatcher{{Name: ":path"}},
			})}
			snapshot("4", next)
			select {
			case tc := <-updates:
				if !proto.Equal(tc, next) {
					t.Errorf("watcher got %v; want %v", tc, next)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no update for version 4")
			}
		})
	}
	t.Run("initial fetch timeout", func(t *testing.T) {
		cp := newControlPlane(t, true)
		dr := &bootstrapv3.Bootstrap_DynamicResources{AdsConfig: grpcSource(corev3.ApiConfigSource_GRPC).GetApiConfigSource()}
		p := startProxy(t, dr, withDial(cp))
		src := adsSource()
		src.InitialFetchTimeout = durationpb.New(10 * time.Millisecond)
		timedOut := make(chan bool, 1)
		_, _, cancel, err := p.ecds.WatchExtensionConfig("missing", &corev3.ExtensionConfigSource{ConfigSource: src}, nil,
			func(_ uint64, tc *corev3.TypedExtensionConfig) { timedOut <- tc == nil })
		if err != nil {
			t.Fatal(err)
		}
		defer cancel()
		select {
		case gotNil := <-timedOut:
			if !gotNil {
				t.Error("update after the initial fetch timeout has a configuration; want nil")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no update after the initial fetch timeout")
		}
		const prefix = "extension_config_discovery.http_filter.missing."
		if got := []uint64{p.stat(prefix + "init_fetch_timeout"), p.stat(prefix + "config_fail")}; !cmp.Equal(got, []uint64{1, 1}) {
			t.Errorf("init_fetch_timeout, config_fail = %v; want [1 1]", got)
		}
	})
}
