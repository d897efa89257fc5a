package xds

import (
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
)

// TestVHDSStatsAndDump: after an on-demand VHDS answer, the route configuration's VHDS
// subscription has Envoy's subscription stats under http.<stat_prefix>.rds.vhds.<name>., and
// the routes dump (decoded strictly into admin.v3.RoutesConfigDump) shows the RDS route
// configuration with the delivered virtual host merged in, at the VHDS version.
func TestVHDSStatsAndDump(t *testing.T) {
	cp := newControlPlane(t, true)
	dr := &bootstrapv3.Bootstrap_DynamicResources{AdsConfig: grpcSource(corev3.ApiConfigSource_DELTA_GRPC).GetApiConfigSource()}
	p := startProxy(t, dr, withDial(cp))
	delta := grpcSource(corev3.ApiConfigSource_DELTA_GRPC)
	rc := vhdsRoute("r1", delta)
	rc.VirtualHosts = append(rc.VirtualHosts, vhost("a-first", "first.example"))
	cp.Set("1", map[resourcev3.Type][]types.Resource{resourcev3.RouteType: {rc}, resourcev3.VirtualHostType: {}})
	_, _, cancel, err := p.r.WatchRoutes("r1", adsSource(), "ingress", func(uint64, *routev3.RouteConfiguration) {})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	// The route watch serves r1 with VHDS once it has registered r1's VHDS subscription stats.
	p.waitFor("VHDS serving r1", func() bool { return p.stat("http.ingress.rds.vhds.r1.update_attempt") >= 1 })
	done := make(chan struct{})
	if _, ok := p.r.RequestVirtualHost("r1", "new.example", func() { close(done) }); !ok {
		t.Fatal("RequestVirtualHost(r1) ok = false; want true")
	}
	p.waitFor("subscription to r1/new.example", func() bool {
		for _, r := range cp.DeltaRequests() {
			for _, n := range r.GetResourceNamesSubscribe() {
				if n == "r1/new.example" {
					return true
				}
			}
		}
		return false
	})
	cp.Set("2", map[resourcev3.Type][]types.Resource{resourcev3.RouteType: {rc}, resourcev3.VirtualHostType: {vhost("r1/new.example", "new.example")}})
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("on-demand request not answered")
	}

	const prefix = "http.ingress.rds.vhds.r1."
	for _, name := range []string{"update_attempt", "update_success", "config_reload"} {
		if got := p.stat(prefix + name); got < 1 {
			t.Errorf("%s%s = %d; want >= 1", prefix, name, got)
		}
	}
	for _, name := range []string{"update_rejected", "update_failure", "init_fetch_timeout", "update_empty"} {
		if got := p.stat(prefix + name); got != 0 {
			t.Errorf("%s%s = %d; want 0", prefix, name, got)
		}
	}
	if got := p.text(prefix + "version_text"); got != "2" {
		t.Errorf("%sversion_text = %q; want %q", prefix, got, "2")
	}
	if got, want := p.stat(prefix+"version"), versionHash("2"); got != want {
		t.Errorf("%sversion = %d; want %d", prefix, got, want)
	}
	if got := p.stat(prefix + "update_time"); got == 0 {
		t.Errorf("%supdate_time = 0; want the time of the answer", prefix)
	}

	j, err := protojson.Marshal(p.r.RoutesConfigDump(nil))
	if err != nil {
		t.Fatal(err)
	}
	var dump adminv3.RoutesConfigDump
	if err := (protojson.UnmarshalOptions{}).Unmarshal(j, &dump); err != nil {
		t.Fatalf("strict decode of the routes dump: %v", err)
	}
	if len(dump.GetDynamicRouteConfigs()) != 1 {
		t.Fatalf("dynamic_route_configs = %d entries; want 1", len(dump.GetDynamicRouteConfigs()))
	}
	d := dump.GetDynamicRouteConfigs()[0]
	var got routev3.RouteConfiguration
	if err := d.GetRouteConfig().UnmarshalTo(&got); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, vh := range got.GetVirtualHosts() {
		names = append(names, vh.GetName())
	}
	// RDS's virtual hosts in name order, then VHDS's, as Envoy rebuilds them.
	if want := []string{"a-first", "base", "r1/new.example"}; !cmp.Equal(names, want) {
		t.Errorf("dumped virtual hosts = %q; want %q", names, want)
	}
	if got.GetVhds() == nil {
		t.Error("dumped route configuration lost its vhds")
	}
	if d.GetVersionInfo() != "2" || d.GetLastUpdated() == nil {
		t.Errorf("version_info = %q, last_updated = %v; want the VHDS answer's version 2 and its time", d.GetVersionInfo(), d.GetLastUpdated())
	}
}

// TestVHDSInScope: a scope's route configuration with vhds gets the virtual hosts VHDS
// delivers for it, as Envoy's scoped RDS serves scopes through RDS route config providers.
func TestVHDSInScope(t *testing.T) {
	cp := newControlPlane(t, true)
	dr := &bootstrapv3.Bootstrap_DynamicResources{AdsConfig: grpcSource(corev3.ApiConfigSource_DELTA_GRPC).GetApiConfigSource()}
	p := startProxy(t, dr, withDial(cp))
	delta := grpcSource(corev3.ApiConfigSource_DELTA_GRPC)
	got := make(chan []string, 100)
	sr := &hcmv3.ScopedRoutes{Name: "scopes", RdsConfigSource: adsSource(),
		ConfigSpecifier: &hcmv3.ScopedRoutes_ScopedRds{ScopedRds: &hcmv3.ScopedRds{ScopedRdsConfigSource: adsSource()}}}
	cancel, err := p.r.WatchScopedRoutes(sr, "ingress", func(_ uint64, _ []*routev3.ScopedRouteConfiguration, routes map[string]*routev3.RouteConfiguration) {
		var names []string
		for _, vh := range routes["ra"].GetVirtualHosts() {
			names = append(names, vh.GetName())
		}
		got <- names
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	cp.Set("1", map[resourcev3.Type][]types.Resource{
		resourcev3.ScopedRouteType: {scopedRoute("sa", "ra", "a")},
		resourcev3.RouteType:       {vhdsRoute("ra", delta)},
		resourcev3.VirtualHostType: {vhost("ra/extra", "extra.example")},
	})
	want := []string{"base", "ra/extra"}
	deadline := time.After(10 * time.Second)
	var last []string
	for !cmp.Equal(last, want) {
		select {
		case last = <-got:
		case <-deadline:
			t.Fatalf("scope ra virtual hosts = %q; want %q", last, want)
		}
	}
	if got := p.stat("http.ingress.rds.vhds.ra.update_success"); got < 1 {
		t.Errorf("http.ingress.rds.vhds.ra.update_success = %d; want >= 1", got)
	}
}
