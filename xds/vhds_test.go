package xds

import (
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
)

// vhdsRoute is a route configuration whose virtual hosts come partly from VHDS on src.
func vhdsRoute(name string, src *corev3.ConfigSource) *routev3.RouteConfiguration {
	rc := directRoute(name, "base")
	rc.VirtualHosts[0].Name, rc.VirtualHosts[0].Domains = "base", []string{"base.example"}
	rc.Vhds = &routev3.Vhds{ConfigSource: src}
	return rc
}

func vhost(name string, domains ...string) *routev3.VirtualHost {
	vh := directRoute("x", name).GetVirtualHosts()[0]
	vh.Name, vh.Domains = name, domains
	return vh
}

// TestVHDS: a route configuration with vhds (delivered over ADS) gets the virtual hosts a
// delta VHDS stream of go-control-plane's server delivers for it, as they are added, changed
// and removed; a vhds source that is not DELTA_GRPC is NACKed.
func TestVHDS(t *testing.T) {
	cp := newControlPlane(t, true)
	dr := &bootstrapv3.Bootstrap_DynamicResources{AdsConfig: grpcSource(corev3.ApiConfigSource_DELTA_GRPC).GetApiConfigSource()}
	p := startProxy(t, dr, withDial(cp))
	snapshot := func(v string, rc *routev3.RouteConfiguration, vhs ...*routev3.VirtualHost) {
		res := map[resourcev3.Type][]types.Resource{resourcev3.RouteType: {rc}, resourcev3.VirtualHostType: {}}
		for _, vh := range vhs {
			res[resourcev3.VirtualHostType] = append(res[resourcev3.VirtualHostType], vh)
		}
		cp.Set(v, res)
	}
	got := make(chan []string, 100)
	_, _, cancel, err := p.r.WatchRoutes("r1", adsSource(), "ingress", func(_ uint64, rc *routev3.RouteConfiguration) {
		var hosts []string
		for _, vh := range rc.GetVirtualHosts() {
			hosts = append(hosts, vh.GetName()+"="+strings.Join(vh.GetDomains(), ","))
		}
		sort.Strings(hosts)
		got <- hosts
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	waitHosts := func(want ...string) {
		t.Helper()
		var last []string
		deadline := time.After(10 * time.Second)
		for {
			select {
			case last = <-got:
				if cmp.Equal(last, want) {
					return
				}
			case <-deadline:
				t.Fatalf("virtual hosts = %q; want %q", last, want)
			}
		}
	}
	delta := grpcSource(corev3.ApiConfigSource_DELTA_GRPC)
	snapshot("1", vhdsRoute("r1", delta), vhost("r1/extra", "extra.example"), vhost("other/x", "x.example"))
	waitHosts("base=base.example", "r1/extra=extra.example")
	snapshot("2", vhdsRoute("r1", delta), vhost("r1/extra", "extra2.example"), vhost("r1/more", "more.example"))
	waitHosts("base=base.example", "r1/extra=extra2.example", "r1/more=more.example")
	snapshot("3", vhdsRoute("r1", delta), vhost("r1/more", "more.example"))
	waitHosts("base=base.example", "r1/more=more.example")

	snapshot("4", vhdsRoute("r1", grpcSource(corev3.ApiConfigSource_GRPC)), vhost("r1/more", "more.example"))
	p.waitFor("RDS rejection", func() bool { return p.stat("http.ingress.rds.r1.update_rejected") >= 1 })
	dump := p.r.RoutesConfigDump(nil)
	if len(dump.GetDynamicRouteConfigs()) != 1 || !strings.Contains(dump.GetDynamicRouteConfigs()[0].GetErrorState().GetDetails(), "DELTA_GRPC") {
		t.Errorf("routes dump = %v; want r1 with an error_state naming DELTA_GRPC", dump)
	}
}

// goesLiveBeforeVHDS makes lm record whether a listener went live before the route discovery
// of p was handed a VHDS response (the harness notes when it is, vhdsAnswered). Checking at
// that moment, rather than polling the listener after RDS arrives, keeps the test
// independent of when go-control-plane's delta server sends its first (possibly empty) VHDS
// response.
func goesLiveBeforeVHDS(p *proxy, lm *fakeListeners) *atomic.Bool {
	early := &atomic.Bool{}
	lm.onAdd = func(string) {
		if !p.vhdsAnswered.Load() {
			early.Store(true)
		}
	}
	return early
}

// TestVHDSListenerWarming: an LDS listener whose route configuration has vhds warms until the
// VHDS source answers.
func TestVHDSListenerWarming(t *testing.T) {
	cp, lm, p := startLDSProxy(t, corev3.ApiConfigSource_DELTA_GRPC)
	early := goesLiveBeforeVHDS(p, lm)
	delta := grpcSource(corev3.ApiConfigSource_DELTA_GRPC)
	cp.Set("1", map[resourcev3.Type][]types.Resource{
		resourcev3.ListenerType: {rdsListener("l1", "r1", 10003)},
		resourcev3.RouteType:    {vhdsRoute("r1", delta)},
	})
	p.waitFor("RDS r1", func() bool { return p.stat("http.ingress.rds.r1.update_success") >= 1 })
	cp.Set("2", map[resourcev3.Type][]types.Resource{
		resourcev3.ListenerType:    {rdsListener("l1", "r1", 10003)},
		resourcev3.RouteType:       {vhdsRoute("r1", delta)},
		resourcev3.VirtualHostType: {vhost("r1/extra", "extra.example")},
	})
	p.waitFor("listener l1 active", func() bool { return lm.state("l1") != "" })
	if early.Load() {
		t.Error("listener l1 went live before its VHDS source answered; want it warming until then")
	}
}

// TestVHDSOnDemand: a request for a host the route configuration lacks subscribes to
// "<route config>/<host>" on the delta VHDS stream once however many requests ask at once; all
// of them are called back after the route watch has the virtual host go-control-plane's server
// then delivers. A later request for an answered host is called back at once, and a route
// configuration without vhds cannot ask.
func TestVHDSOnDemand(t *testing.T) {
	cp := newControlPlane(t, true)
	dr := &bootstrapv3.Bootstrap_DynamicResources{AdsConfig: grpcSource(corev3.ApiConfigSource_DELTA_GRPC).GetApiConfigSource()}
	p := startProxy(t, dr, withDial(cp))
	delta := grpcSource(corev3.ApiConfigSource_DELTA_GRPC)
	cp.Set("1", map[resourcev3.Type][]types.Resource{
		resourcev3.RouteType:       {vhdsRoute("r1", delta)},
		resourcev3.VirtualHostType: {},
	})
	var last []string // what the route watch held when each callback ran
	var lastMu sync.Mutex
	_, _, cancel, err := p.r.WatchRoutes("r1", adsSource(), "ingress", func(_ uint64, rc *routev3.RouteConfiguration) {
		var names []string
		for _, vh := range rc.GetVirtualHosts() {
			names = append(names, vh.GetName())
		}
		sort.Strings(names)
		lastMu.Lock()
		last = names
		lastMu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	p.waitFor("VHDS stream", func() bool {
		for _, r := range cp.DeltaRequests() {
			if r.GetTypeUrl() == resourcev3.VirtualHostType {
				return true
			}
		}
		return false
	})

	if _, ok := p.r.RequestVirtualHost("unknown", "a.example", func() {}); ok {
		t.Errorf("RequestVirtualHost(unknown) ok = true; want false (no such route configuration with vhds)")
	}

	const n = 20
	var held []string
	woken := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		go func() {
			_, ok := p.r.RequestVirtualHost("r1", "new.example", func() {
				lastMu.Lock()
				held = last
				lastMu.Unlock()
				woken <- struct{}{}
			})
			if !ok {
				t.Errorf("RequestVirtualHost(r1) ok = false; want true")
			}
		}()
	}
	subscribes := func() int {
		c := 0
		for _, r := range cp.DeltaRequests() {
			for _, name := range r.GetResourceNamesSubscribe() {
				if name == "r1/new.example" {
					c++
				}
			}
		}
		return c
	}
	p.waitFor("subscription to r1/new.example", func() bool { return subscribes() > 0 })
	select {
	case <-woken:
		t.Fatal("a request was called back before the server answered")
	default:
	}
	cp.Set("2", map[resourcev3.Type][]types.Resource{
		resourcev3.RouteType:       {vhdsRoute("r1", delta)},
		resourcev3.VirtualHostType: {vhost("r1/new.example", "new.example")},
	})
	deadline := time.After(10 * time.Second)
	for i := 0; i < n; i++ {
		select {
		case <-woken:
		case <-deadline:
			t.Fatalf("%d of %d requests called back; want all", i, n)
		}
	}
	if got := subscribes(); got != 1 {
		t.Errorf("subscriptions to r1/new.example = %d; want 1", got)
	}
	lastMu.Lock()
	if want := []string{"base", "r1/new.example"}; !cmp.Equal(held, want) {
		t.Errorf("virtual hosts when called back = %q; want %q", held, want)
	}
	lastMu.Unlock()
	if got := p.stat("http.ingress.rds.vhds.r1.config_reload"); got != 1 {
		t.Errorf("http.ingress.rds.vhds.r1.config_reload = %d; want 1", got)
	}

	called := false
	if _, ok := p.r.RequestVirtualHost("r1", "new.example", func() { called = true }); !ok || !called {
		t.Errorf("RequestVirtualHost for an answered host: ok = %v, called = %v; want true, true", ok, called)
	}
}
