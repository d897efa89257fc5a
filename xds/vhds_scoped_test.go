package xds

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// TestVHDSScopedListenerWarming: a listener with scoped routes whose scope's route
// configuration has vhds stays warming after the scopes and the route configuration arrive,
// until the first VHDS answer, as with plain RDS (Envoy's RDS subscription registers its
// VHDS subscription's init target while it warms).
func TestVHDSScopedListenerWarming(t *testing.T) {
	cp, lm, p := startLDSProxy(t, corev3.ApiConfigSource_DELTA_GRPC)
	early := goesLiveBeforeVHDS(p, lm)
	delta := grpcSource(corev3.ApiConfigSource_DELTA_GRPC)
	cp.Set("1", map[resourcev3.Type][]types.Resource{
		resourcev3.ListenerType:    {scopedListener("l1", 10004)},
		resourcev3.ScopedRouteType: {scopedRoute("sa", "ra", "a")},
		resourcev3.RouteType:       {vhdsRoute("ra", delta)},
	})
	p.waitFor("RDS ra", func() bool { return p.stat("http.ingress.rds.ra.update_success") >= 1 })
	cp.Set("2", map[resourcev3.Type][]types.Resource{
		resourcev3.ListenerType:    {scopedListener("l1", 10004)},
		resourcev3.ScopedRouteType: {scopedRoute("sa", "ra", "a")},
		resourcev3.RouteType:       {vhdsRoute("ra", delta)},
		resourcev3.VirtualHostType: {vhost("ra/extra", "extra.example")},
	})
	p.waitFor("listener l1 active", func() bool { return lm.state("l1") != "" })
	if early.Load() {
		t.Error("listener l1 went live before VHDS answered for its scope's route configuration; want it warming until then")
	}
}
