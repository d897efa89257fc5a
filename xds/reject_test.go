package xds

import (
	"sort"
	"sync"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/cluster/cds"
	"github.com/legateproxy/legate/xds/resource"
)

// initTargets records the init targets a client registers and which are still pending, as the
// server's /init_dump lists them.
type initTargets struct {
	mu      sync.Mutex
	pending map[string]bool
}

func withInitTargets(it *initTargets) proxyOption {
	return func(s *proxySetup) {
		s.cfg.Init = func(name string) (func(), error) {
			it.mu.Lock()
			it.pending[name] = true
			it.mu.Unlock()
			return func() {
				it.mu.Lock()
				delete(it.pending, name)
				it.mu.Unlock()
			}, nil
		}
	}
}

func (it *initTargets) list() []string {
	it.mu.Lock()
	defer it.mu.Unlock()
	out := []string{}
	for n := range it.pending {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// TestRejectedFirstAnswerEndsInitialFetch: for every resource type, a first answer that is
// NACKed ends the subscription's initial fetch, as Envoy's onConfigUpdateFailed does ("allow
// server startup to continue even if we have a bad config"): the init target leaves the
// pending list long before initial_fetch_timeout (an hour here), and a listener or cluster
// waiting on it proceeds.
func TestRejectedFirstAnswerEndsInitialFetch(t *testing.T) {
	hour := durationpb.New(time.Hour)
	ads := func() *corev3.ConfigSource {
		s := adsSource()
		s.InitialFetchTimeout = hour
		return s
	}
	badRoute := func(name string) *routev3.RouteConfiguration {
		rc := directRoute(name, "x")
		rc.VirtualHosts[0].Domains = []string{"*", "*"} // duplicate domain
		return rc
	}
	// start runs a client on the delta ADS stream of a new control plane, recording its init
	// targets in it.
	start := func(t *testing.T, opts ...proxyOption) (*controlPlane, *proxy, *initTargets) {
		it := &initTargets{pending: map[string]bool{}}
		cp := newControlPlane(t, true)
		dr := &bootstrapv3.Bootstrap_DynamicResources{AdsConfig: grpcSource(corev3.ApiConfigSource_DELTA_GRPC).GetApiConfigSource()}
		return cp, startProxy(t, dr, append([]proxyOption{withDial(cp), withInitTargets(it)}, opts...)...), it
	}
	// withLDS has the client take LDS over ADS into lm and then run also (when not nil).
	withLDS := func(t *testing.T, lm *fakeListeners, also func(*proxy)) proxyOption {
		return func(s *proxySetup) {
			s.cfg.DynamicResources.LdsConfig = ads()
			s.listeners = lm
			s.afterNew = func(px *proxy) {
				if also != nil {
					also(px)
				}
			}
		}
	}
	// pending checks the init targets pending before any answer.
	pending := func(t *testing.T, it *initTargets, want ...string) {
		t.Helper()
		if diff := cmp.Diff(want, it.list()); diff != "" {
			t.Fatalf("pending init targets before any answer (-want +got):\n%s", diff)
		}
	}
	waitNone := func(t *testing.T, p *proxy, it *initTargets) {
		t.Helper()
		p.waitFor("no pending init target", func() bool { return len(it.list()) == 0 })
	}

	t.Run("RDS", func(t *testing.T) {
		lm := newFakeListeners()
		cp, p, it := start(t, withLDS(t, lm, func(px *proxy) {
			// A connection manager's RDS made before Run registers its init target.
			if _, _, _, err := px.r.WatchRoutes("r0", ads(), "boot", func(uint64, *routev3.RouteConfiguration) {}); err != nil {
				t.Fatal(err)
			}
		}))
		pending(t, it, "LDS", "RdsRouteConfigSubscription RDS init r0")
		l := rdsListener("l1", "r1", 10011)
		cp.Set("1", map[resourcev3.Type][]types.Resource{
			resourcev3.ListenerType: {l},
			resourcev3.RouteType:    {badRoute("r0"), badRoute("r1")},
		})
		p.waitFor("listener l1 active", func() bool { return lm.state("l1") == "1" })
		waitNone(t, p, it)
		for _, name := range []string{"http.ingress.rds.r1.update_rejected", "http.boot.rds.r0.update_rejected"} {
			if got := p.stat(name); got != 1 {
				t.Errorf("%s = %d; want 1", name, got)
			}
		}
		if got := p.stat("http.ingress.rds.r1.init_fetch_timeout"); got != 0 {
			t.Errorf("http.ingress.rds.r1.init_fetch_timeout = %d; want 0", got)
		}
	})

	t.Run("LDS", func(t *testing.T) {
		cp, p, it := start(t, withLDS(t, newFakeListeners(), nil))
		bad := rdsListener("l1", "r1", 10012)
		bad.Address = nil
		cp.Set("1", map[resourcev3.Type][]types.Resource{resourcev3.ListenerType: {bad}})
		waitNone(t, p, it)
		if got := p.stat("listener_manager.lds.update_rejected"); got != 1 {
			t.Errorf("listener_manager.lds.update_rejected = %d; want 1", got)
		}
	})

	t.Run("CDS and EDS", func(t *testing.T) {
		cp, p, it := start(t, func(s *proxySetup) { s.cfg.DynamicResources.CdsConfig = ads() })
		pending(t, it, cds.InitTarget)
		bad := staticCluster("bad", "10.0.0.1:80")
		bad.ConnectTimeout = durationpb.New(-time.Second)
		cla := assignment("web-svc", "10.0.0.2:80")
		cla.Policy = &endpointv3.ClusterLoadAssignment_Policy{OverprovisioningFactor: wrapperspb.UInt32(0)}
		cp.set("1", []types.Resource{bad, edsCluster("web", "web-svc", ads())}, []types.Resource{cla})
		// The rejected assignment warms web with no hosts; the rejected cluster does not hold
		// CDS's initial fetch.
		p.waitFor("web active", func() bool { return p.cm.Get("web") != nil })
		waitNone(t, p, it)
		if got := p.hosts("web"); len(got) != 0 {
			t.Errorf("web hosts = %v; want none", got)
		}
		want := map[string]uint64{
			"cluster_manager.cds.update_rejected": 1,
			"cluster.web.update_rejected":         1,
			"cluster.web.init_fetch_timeout":      0,
		}
		got := map[string]uint64{}
		for k := range want {
			got[k] = p.stat(k)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("stats (-want +got):\n%s", diff)
		}
		// A later good assignment applies.
		cp.set("2", []types.Resource{edsCluster("web", "web-svc", ads())}, []types.Resource{assignment("web-svc", "10.0.0.2:80")})
		p.waitFor("web hosts", p.hasHosts("web", "10.0.0.2:80"))
	})

	t.Run("SDS", func(t *testing.T) {
		cp, p, it := start(t, func(s *proxySetup) {
			s.afterNew = func(px *proxy) {
				if _, err := px.sds.WatchSecrets("test", &tlsv3.CommonTlsContext{TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: "cert", SdsConfig: ads()}}}); err != nil {
					t.Fatal(err)
				}
			}
		})
		pending(t, it, "SdsApi cert")
		bad := certSecret("cert", "chain")
		bad.GetTlsCertificate().CertificateChain = &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: ""}}
		cp.Set("1", map[resourcev3.Type][]types.Resource{resourcev3.SecretType: {bad}})
		waitNone(t, p, it)
		if got := p.stat("sds.cert.update_rejected"); got != 1 {
			t.Errorf("sds.cert.update_rejected = %d; want 1", got)
		}
	})

	t.Run("SRDS", func(t *testing.T) {
		cp, p, it := start(t, func(s *proxySetup) {
			s.afterNew = func(px *proxy) {
				sr := &hcmv3.ScopedRoutes{Name: "scopes", RdsConfigSource: ads(),
					ConfigSpecifier: &hcmv3.ScopedRoutes_ScopedRds{ScopedRds: &hcmv3.ScopedRds{ScopedRdsConfigSource: ads()}}}
				if _, err := px.r.WatchScopedRoutes(sr, "ingress", func(uint64, []*routev3.ScopedRouteConfiguration, map[string]*routev3.RouteConfiguration) {}); err != nil {
					t.Fatal(err)
				}
			}
		})
		pending(t, it, "SRDS scopes")
		cp.Set("1", map[resourcev3.Type][]types.Resource{resourcev3.ScopedRouteType: {scopedRoute("s1", "", "a")}})
		waitNone(t, p, it)
		if got := p.stat("http.ingress.scoped_rds.scopes.update_rejected"); got != 1 {
			t.Errorf("http.ingress.scoped_rds.scopes.update_rejected = %d; want 1", got)
		}
	})

	t.Run("RTDS", func(t *testing.T) {
		rt := &fakeRuntime{layers: map[string]map[string]any{}}
		_, p, it := start(t, func(s *proxySetup) {
			s.runtime = rt
			s.rtds = []*bootstrapv3.RuntimeLayer_RtdsLayer{{Name: "rtds", RtdsConfig: ads()}}
		})
		pending(t, it, "RTDS rtds")
		// go-control-plane's cache cannot hold a Runtime that fails validation (its only rule
		// is a name), so the delta answer that does not decode is handed to the client's
		// handler as its ADS stream would hand it.
		bad := update{version: "1", resources: []*anypb.Any{{TypeUrl: resource.RuntimeType, Value: []byte{0xff}}}, names: []string{"rtds"}}
		if err := p.c.watched[resource.RuntimeType].apply(p.c.ads, bad); err == nil {
			t.Fatal("apply of an undecodable Runtime = nil; want an error")
		}
		waitNone(t, p, it)
		if got := p.stat("runtime.update_rejected"); got != 1 {
			t.Errorf("runtime.update_rejected = %d; want 1", got)
		}
	})
}
