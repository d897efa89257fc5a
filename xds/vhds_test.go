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
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/internal/clock"
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
	_, _, cancel, err := p.c.WatchRoutes("r1", adsSource(), "ingress", func(_ uint64, rc *routev3.RouteConfiguration) {
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
	dump := p.c.RoutesConfigDump(nil)
	if len(dump.GetDynamicRouteConfigs()) != 1 || !strings.Contains(dump.GetDynamicRouteConfigs()[0].GetErrorState().GetDetails(), "DELTA_GRPC") {
		t.Errorf("routes dump = %v; want r1 with an error_state naming DELTA_GRPC", dump)
	}
}

// goesLiveBeforeVHDS makes lm record whether a listener went live while a VHDS source of p had
// not answered. Checking at that moment, rather than polling the listener after RDS arrives,
// keeps the test independent of when go-control-plane's delta server sends its first
// (possibly empty) VHDS response.
func goesLiveBeforeVHDS(p *proxy, lm *fakeListeners) *atomic.Bool {
	early := &atomic.Bool{}
	lm.onAdd = func(string) {
		p.c.srdsMu.Lock()
		defer p.c.srdsMu.Unlock()
		if len(p.c.vhds) == 0 {
			early.Store(true)
		}
		for _, h := range p.c.vhds {
			if !h.isReady() {
				early.Store(true)
			}
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
	hosts := make(chan []string, 100)
	_, _, cancel, err := p.c.WatchRoutes("r1", adsSource(), "ingress", func(_ uint64, rc *routev3.RouteConfiguration) {
		var names []string
		for _, vh := range rc.GetVirtualHosts() {
			names = append(names, vh.GetName())
		}
		sort.Strings(names)
		hosts <- names
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

	if _, ok := p.c.RequestVirtualHost("unknown", "a.example", func() {}); ok {
		t.Errorf("RequestVirtualHost(unknown) ok = true; want false (no such route configuration with vhds)")
	}

	const n = 20
	var last []string // what the route watch held when each callback ran
	var lastMu sync.Mutex
	woken := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		go func() {
			_, ok := p.c.RequestVirtualHost("r1", "new.example", func() {
				lastMu.Lock()
				last = p.c.vhdsHostsOf("r1")
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
	if want := []string{"base", "r1/new.example"}; !cmp.Equal(last, want) {
		t.Errorf("virtual hosts when called back = %q; want %q", last, want)
	}
	lastMu.Unlock()
	if got := p.stat("http.ingress.rds.vhds.r1.config_reload"); got != 1 {
		t.Errorf("http.ingress.rds.vhds.r1.config_reload = %d; want 1", got)
	}

	called := false
	if _, ok := p.c.RequestVirtualHost("r1", "new.example", func() { called = true }); !ok || !called {
		t.Errorf("RequestVirtualHost for an answered host: ok = %v, called = %v; want true, true", ok, called)
	}
}

// vhdsHostsOf is the names of the virtual hosts VHDS holds for rc, for tests.
func (c *Client) vhdsHostsOf(rc string) []string {
	c.srdsMu.Lock()
	defer c.srdsMu.Unlock()
	var out []string
	for _, h := range c.vhds {
		for _, vh := range h.hostsOf(rc) {
			out = append(out, vh.GetName())
		}
	}
	return append([]string{"base"}, out...)
}

// TestVHDSAnswerWithoutHost: a delta response naming the requested alias without a virtual
// host (a server's "no such host") answers the request, and the route configuration is
// unchanged.
func TestVHDSAnswerWithoutHost(t *testing.T) {
	c := &Client{clock: clock.Real()}
	h := &vhdsHandler{c: c, hosts: map[string]*routev3.VirtualHost{}, raw: map[string]*anypb.Any{}, ready: true,
		routes: map[string]int{"r1": 1}, pending: map[string]map[uint64]func(){}, answered: map[string]bool{}, stats: map[string]*vhdsStatsRef{},
		updates: map[string]vhdsUpdate{}}
	h.m = &mux{c: c, watches: map[string]*watch{}, wake: make(chan struct{}, 1)}
	var calls int
	h.requestHost("r1/gone.example", func() { calls++ })
	h.requestHost("r1/gone.example", func() { calls++ })
	if err := h.apply(nil, update{resources: []*anypb.Any{nil}, names: []string{"r1/vh-x"}, aliases: [][]string{{"r1/gone.example"}}}); err != nil {
		t.Fatalf("apply = %v; want nil", err)
	}
	if calls != 2 {
		t.Errorf("callbacks = %d; want 2", calls)
	}
	if len(h.hosts) != 0 {
		t.Errorf("virtual hosts = %v; want none", h.hosts)
	}
}
