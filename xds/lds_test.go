package xds

import (
	"fmt"
	"sync"
	"testing"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	runtimev3 "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/config"
)

// fakeListeners records what LDS does to the listener manager.
type fakeListeners struct {
	mu       sync.Mutex
	active   map[string]*config.Listener
	versions map[string]string
	removed  []string
	// onAdd, when set, runs in AddOrUpdate (with the LDS handler's lock held), to check what
	// holds at the moment a listener goes live.
	onAdd func(name string)
}

func newFakeListeners() *fakeListeners {
	return &fakeListeners{active: map[string]*config.Listener{}, versions: map[string]string{}}
}

func (f *fakeListeners) AddOrUpdate(l *config.Listener, v string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if old := f.active[l.Name]; old != nil && proto.Equal(old.Proto, l.Proto) {
		return false, nil
	}
	f.active[l.Name], f.versions[l.Name] = l, v
	if f.onAdd != nil {
		f.onAdd(l.Name)
	}
	return true, nil
}

func (f *fakeListeners) Remove(name string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.active[name] == nil {
		return false, nil
	}
	delete(f.active, name)
	f.removed = append(f.removed, name)
	return true, nil
}

func (f *fakeListeners) ConfigDump(match func(string) bool) proto.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &adminv3.ListenersConfigDump{}
	for name, l := range f.active {
		if match(name) {
			a, _ := anypb.New(l.Proto)
			out.DynamicListeners = append(out.DynamicListeners, &adminv3.ListenersConfigDump_DynamicListener{
				Name: name, ActiveState: &adminv3.ListenersConfigDump_DynamicListenerState{VersionInfo: f.versions[name], Listener: a},
			})
		}
	}
	return out
}

// state is "version" of an active listener, "" when absent.
func (f *fakeListeners) state(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.active[name] == nil {
		return ""
	}
	return f.versions[name]
}

// fakeRuntime records RTDS layers.
type fakeRuntime struct {
	mu     sync.Mutex
	layers map[string]map[string]any
}

func (r *fakeRuntime) SetRTDSLayer(name string, layer map[string]any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.layers[name] = layer
	return nil
}

func (r *fakeRuntime) get(name string) map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.layers[name]
}

func rdsListener(name, route string, port uint32) *listenerv3.Listener {
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: "ingress",
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			RouteConfigName: route, ConfigSource: adsSource(),
		}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{})}}},
	}
	return &listenerv3.Listener{
		Name: name,
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
		}}},
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(hcm)},
		}}}},
	}
}

func directRoute(name, body string) *routev3.RouteConfiguration {
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

func certSecret(name, chain string) *tlsv3.Secret {
	inline := func(s string) *corev3.DataSource {
		return &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: s}}
	}
	return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: inline(chain), PrivateKey: inline("key"),
	}}}
}

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err)
	}
	return a
}

func runtimeLayer(name string, kv map[string]any) *runtimev3.Runtime {
	st, err := structpb.NewStruct(kv)
	if err != nil {
		panic(err)
	}
	return &runtimev3.Runtime{Name: name, Layer: st}
}

// TestDynamicListenersRoutesSecretsRuntime drives LDS, RDS, SDS and RTDS over ADS (both
// variants) from go-control-plane's server: a listener warms until its route configuration
// arrives, route and secret updates reach their watchers, bad resources are NACKed with the
// previous ones kept and shown in error_state, and removal reaches the listener manager.
func TestDynamicListenersRoutesSecretsRuntime(t *testing.T) {
	for _, api := range []corev3.ApiConfigSource_ApiType{corev3.ApiConfigSource_GRPC, corev3.ApiConfigSource_DELTA_GRPC} {
		t.Run(api.String(), func(t *testing.T) {
			rt := &fakeRuntime{layers: map[string]map[string]any{}}
			cp, lm, p := startLDSProxy(t, api, func(s *proxySetup) {
				s.runtime = rt
				s.rtds = []*bootstrapv3.RuntimeLayer_RtdsLayer{{Name: "rtds", RtdsConfig: adsSource()}}
			})
			snapshot := func(v string, ls []*listenerv3.Listener, rcs []*routev3.RouteConfiguration, secrets []*tlsv3.Secret, layer map[string]any) {
				res := map[resourcev3.Type][]types.Resource{}
				for _, l := range ls {
					res[resourcev3.ListenerType] = append(res[resourcev3.ListenerType], l)
				}
				for _, rc := range rcs {
					res[resourcev3.RouteType] = append(res[resourcev3.RouteType], rc)
				}
				for _, s := range secrets {
					res[resourcev3.SecretType] = append(res[resourcev3.SecretType], s)
				}
				res[resourcev3.RuntimeType] = []types.Resource{runtimeLayer("rtds", layer)}
				cp.Set(v, res)
			}

			// 1. The listener arrives before its route configuration: it warms.
			snapshot("1", []*listenerv3.Listener{rdsListener("l1", "r1", 10001)}, nil, nil, map[string]any{"k": "1"})
			p.waitFor("RTDS layer 1", func() bool { return fmt.Sprint(rt.get("rtds")["k"]) == "1" })
			p.waitFor("LDS v1 accepted", func() bool { return p.stat("listener_manager.lds.update_success") >= 1 })
			if got := lm.state("l1"); got != "" {
				t.Fatalf("listener l1 active before its routes arrived (version %q); want warming", got)
			}
			dump := p.l.ConfigDump(nil).(*adminv3.ListenersConfigDump)
			if len(dump.DynamicListeners) != 1 || dump.DynamicListeners[0].GetWarmingState() == nil {
				t.Fatalf("listeners dump = %v; want l1 in warming_state", dump)
			}

			// 2. The route configuration arrives: the listener goes to the manager.
			updates := make(chan string, 10)
			cur, _, cancel, err := p.r.WatchRoutes("r1", adsSource(), "ingress", func(_ uint64, rc *routev3.RouteConfiguration) {
				updates <- rc.GetVirtualHosts()[0].GetRoutes()[0].GetDirectResponse().GetBody().GetInlineString()
			})
			if err != nil || cur != nil {
				t.Fatalf("WatchRoutes = %v, %v; want no configuration yet", cur, err)
			}
			defer cancel()
			snapshot("2", []*listenerv3.Listener{rdsListener("l1", "r1", 10001)}, []*routev3.RouteConfiguration{directRoute("r1", "one")},
				[]*tlsv3.Secret{certSecret("cert", "chain-1")}, map[string]any{"k": "2"})
			p.waitFor("l1 active", func() bool { return lm.state("l1") != "" })
			if got := <-updates; got != "one" {
				t.Errorf("route update body = %q; want %q", got, "one")
			}

			// 3. SDS: a secret watched by name is served and rotated.
			release, err := p.sds.WatchSecrets("test", &tlsv3.CommonTlsContext{TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: "cert", SdsConfig: adsSource()}}})
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			chain := func() string {
				s, ok := p.sds.Secret("cert")
				if !ok || s.Certificate == nil {
					return ""
				}
				return string(s.Certificate.CertificateChain.Inline)
			}
			p.waitFor("secret cert", func() bool { return chain() == "chain-1" })
			snapshot("3", []*listenerv3.Listener{rdsListener("l1", "r1", 10001)}, []*routev3.RouteConfiguration{directRoute("r1", "two")},
				[]*tlsv3.Secret{certSecret("cert", "chain-2")}, map[string]any{"k": "3"})
			p.waitFor("secret rotated", func() bool { return chain() == "chain-2" })
			if got := <-updates; got != "two" {
				t.Errorf("route update body = %q; want %q", got, "two")
			}
			p.waitFor("RTDS layer 3", func() bool { return fmt.Sprint(rt.get("rtds")["k"]) == "3" })

			// 4. A bad route and a bad listener are NACKed; the previous ones stay.
			bad := directRoute("r1", "x")
			bad.VirtualHosts[0].Domains = []string{"*", "*"} // duplicate domain
			badListener := rdsListener("l1", "r1", 10001)
			badListener.Address = nil
			snapshot("4", []*listenerv3.Listener{badListener}, []*routev3.RouteConfiguration{bad}, []*tlsv3.Secret{certSecret("cert", "chain-2")}, map[string]any{"k": "3"})
			p.waitFor("NACKs", func() bool {
				return p.stat("listener_manager.lds.update_rejected") >= 1 && p.stat("http.ingress.rds.r1.update_rejected") >= 1
			})
			// The listener keeps the LDS version that delivered it (it warmed until v2).
			if got := lm.state("l1"); got != "1" {
				t.Errorf("l1 version after a rejected update = %q; want %q", got, "1")
			}
			rdump := p.r.RoutesConfigDump(nil)
			if len(rdump.DynamicRouteConfigs) != 1 || rdump.DynamicRouteConfigs[0].GetErrorState() == nil || rdump.DynamicRouteConfigs[0].GetVersionInfo() != "3" {
				t.Errorf("routes dump = %v; want r1 at version 3 with an error_state", rdump)
			}
			ldump := p.l.ConfigDump(nil).(*adminv3.ListenersConfigDump)
			if len(ldump.DynamicListeners) != 1 || ldump.DynamicListeners[0].GetErrorState() == nil || ldump.DynamicListeners[0].GetActiveState() == nil {
				t.Errorf("listeners dump = %v; want l1 active with an error_state", ldump)
			}
			sdump := p.c.SecretsConfigDump(nil)
			// State of the world resends the unchanged secret with v4; delta does not.
			if len(sdump.DynamicActiveSecrets) != 1 || sdump.DynamicActiveSecrets[0].GetName() != "cert" || sdump.DynamicActiveSecrets[0].GetSecret() == nil {
				t.Errorf("secrets dump = %v; want cert active", sdump)
			}

			// 5. The listener is removed.
			snapshot("5", nil, []*routev3.RouteConfiguration{directRoute("r1", "two")}, []*tlsv3.Secret{certSecret("cert", "chain-2")}, map[string]any{"k": "3"})
			p.waitFor("l1 removed", func() bool { return lm.state("l1") == "" })
			if got := p.stat("listener_manager.lds.update_rejected"); got < 1 {
				t.Errorf("listener_manager.lds.update_rejected = %d; want >= 1", got)
			}
			want := map[string]uint64{
				"http.ingress.rds.r1.config_reload": 2,
				"sds.cert.update_rejected":          0,
			}
			got := map[string]uint64{}
			for k := range want {
				got[k] = p.stat(k)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("stats (-want +got):\n%s", diff)
			}
		})
	}
}
