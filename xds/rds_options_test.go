package xds

import (
	"errors"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/httpproxy/route"
)

// TestRDSRouteOptions checks that RDS route configurations are trial-compiled with the
// server's route options before they are accepted: a typed_per_filter_config the HTTP filters
// refuse is NACKed, and so is an unknown cluster when the resource sets validate_clusters
// (false by default for RDS, as in Envoy).
func TestRDSRouteOptions(t *testing.T) {
	cp := newControlPlane(t, true)
	dr := &bootstrapv3.Bootstrap_DynamicResources{AdsConfig: grpcSource(corev3.ApiConfigSource_DELTA_GRPC).GetApiConfigSource()}
	p := startProxy(t, dr, withDial(cp), func(s *proxySetup) {
		s.routeOptions = route.Options{
			PerFilterConfig: func(name string, _ *anypb.Any, _ bool) (any, error) {
				if name == "refused" {
					return nil, errors.New("refused per-route configuration")
				}
				return nil, nil
			},
			ClusterExists: func(name string) bool { return name == "known" },
		}
	})
	clusterRoute := func(name, cluster string) *routev3.RouteConfiguration {
		return &routev3.RouteConfiguration{Name: name, VirtualHosts: []*routev3.VirtualHost{{
			Name: "all", Domains: []string{"*"},
			Routes: []*routev3.Route{{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster}}},
			}},
		}}}
	}
	perFilter := clusterRoute("per_filter", "known")
	cfg, err := anypb.New(&routev3.FilterConfig{})
	if err != nil {
		t.Fatal(err)
	}
	perFilter.VirtualHosts[0].TypedPerFilterConfig = map[string]*anypb.Any{"refused": cfg}
	validated := clusterRoute("validated", "unknown")
	validated.ValidateClusters = wrapperspb.Bool(true)
	unvalidated := clusterRoute("unvalidated", "unknown")

	for _, name := range []string{"per_filter", "validated", "unvalidated"} {
		if _, _, cancel, err := p.r.WatchRoutes(name, adsSource(), name, func(uint64, *routev3.RouteConfiguration) {}); err != nil {
			t.Fatal(err)
		} else {
			t.Cleanup(cancel)
		}
	}
	cp.Set("1", map[resourcev3.Type][]types.Resource{resourcev3.RouteType: {perFilter, validated, unvalidated}})
	// The server may answer each subscription as it comes, so a configuration can be in
	// several responses and rejected more than once: the wait is for at least one answer
	// each, woken by every response, its bound generous for a loaded machine.
	p.timeout = time.Minute
	p.waitFor("all three answered", func() bool {
		return p.stat("http.unvalidated.rds.unvalidated.update_success") >= 1 &&
			p.stat("http.per_filter.rds.per_filter.update_rejected") >= 1 &&
			p.stat("http.validated.rds.validated.update_rejected") >= 1
	})
	for stat, want := range map[string]uint64{
		"http.unvalidated.rds.unvalidated.update_rejected": 0,
		"http.per_filter.rds.per_filter.update_success":    0,
		"http.validated.rds.validated.update_success":      0,
	} {
		if got := p.stat(stat); got != want {
			t.Errorf("%s = %d; want %d", stat, got, want)
		}
	}
}
