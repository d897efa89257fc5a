package xds

import (
	"sort"
	"strings"
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
		cp.setAll(v, res)
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

// TestVHDSListenerWarming: an LDS listener whose route configuration has vhds warms until the
// VHDS source answers.
func TestVHDSListenerWarming(t *testing.T) {
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
	delta := grpcSource(corev3.ApiConfigSource_DELTA_GRPC)
	cp.setAll("1", map[resourcev3.Type][]types.Resource{
		resourcev3.ListenerType: {rdsListener("l1", "r1", 10003)},
		resourcev3.RouteType:    {vhdsRoute("r1", delta)},
	})
	p.waitFor("RDS r1", func() bool { return p.stat("http.ingress.rds.r1.update_success") >= 1 })
	if got := lm.state("l1"); got != "" {
		t.Fatalf("listener l1 active (version %q) before VHDS answered; want warming", got)
	}
	cp.setAll("2", map[resourcev3.Type][]types.Resource{
		resourcev3.ListenerType:    {rdsListener("l1", "r1", 10003)},
		resourcev3.RouteType:       {vhdsRoute("r1", delta)},
		resourcev3.VirtualHostType: {vhost("r1/extra", "extra.example")},
	})
	p.waitFor("listener l1 active", func() bool { return lm.state("l1") != "" })
}
