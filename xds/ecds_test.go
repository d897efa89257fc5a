package xds

import (
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	healthcheckv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/health_check/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
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
			cp := newControlPlane(t, true)
			lm := newFakeListeners()
			dr := &bootstrapv3.Bootstrap_DynamicResources{AdsConfig: grpcSource(api).GetApiConfigSource(), LdsConfig: adsSource()}
			p := startProxy(t, dr, withDial(cp), func(s *proxySetup) {
				s.afterNew = func(c *Client) {
					if err := c.SetListeners(lm); err != nil {
						t.Fatal(err)
					}
				}
			})
			snapshot := func(v string, exts ...*corev3.TypedExtensionConfig) {
				res := map[resourcev3.Type][]types.Resource{resourcev3.ListenerType: {ecdsListener("l1", 10001)}}
				for _, e := range exts {
					res[resourcev3.ExtensionConfigType] = append(res[resourcev3.ExtensionConfigType], e)
				}
				cp.setAll(v, res)
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
			cur, _, cancel, err := p.c.WatchExtensionConfig("hc", adsSource(), func(_ uint64, tc *corev3.TypedExtensionConfig) {
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
			cp.setAll("1", map[resourcev3.Type][]types.Resource{
				resourcev3.ExtensionConfigType: {healthCheckExtension("hc", true)},
				resourcev3.ScopedRouteType:     {scopedRoute("sa", "ra", "a")},
				resourcev3.RouteType:           {directRoute("ra", "A")},
			})
			exts := make(chan bool, 10)
			cur, _, cancel, err := p.c.WatchExtensionConfig("hc", tc.src, func(_ uint64, tc *corev3.TypedExtensionConfig) { exts <- tc != nil })
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
			cancelScopes, err := p.c.WatchScopedRoutes(&hcmv3.ScopedRoutes{
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
