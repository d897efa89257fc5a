package headermutation

import (
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// routeConfig is one virtual host with one route to cluster c carrying perRoute under the
// filter's name.
func routeConfig(perRoute *anypb.Any) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{{
		Name: "vh", Domains: []string{"*"},
		Routes: []*routev3.Route{{
			Match:                &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action:               &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "c"}}},
			TypedPerFilterConfig: map[string]*anypb.Any{Name: perRoute},
		}},
	}}}
}
