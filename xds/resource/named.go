package resource

import (
	"fmt"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	runtimev3 "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/xds/watch"
)

// DecodeRouteConfig decodes an RDS resource: the type URL, protoc-gen-validate rules, then a
// trial compile with httpproxy/route and opts (the data plane's per-filter configuration
// checks and cluster lookup; clusters are checked only when the resource sets
// validate_clusters, whose RDS default is false as in Envoy), so that a route configuration
// the connection managers could not serve is NACKed.
func DecodeRouteConfig(a *anypb.Any, opts route.Options) (*routev3.RouteConfiguration, error) {
	rc := &routev3.RouteConfiguration{}
	name, err := watch.DecodeNamed(a, RouteType, "route_config", rc, rc.GetName)
	if err != nil {
		return nil, err
	}
	trial := rc
	if v := rc.GetVhds(); v != nil {
		if err := checkVHDSSource(v.GetConfigSource()); err != nil {
			return nil, fmt.Errorf("route_config %q: vhds.config_source: %w", name, err)
		}
		// The virtual hosts of VHDS join the configuration later (xds merges them); the
		// rest must compile now.
		trial = proto.Clone(rc).(*routev3.RouteConfiguration)
		trial.Vhds = nil
	}
	opts.ValidateClusters = false
	if _, err := route.Compile(trial, opts); err != nil {
		return nil, fmt.Errorf("route_config %q: %w", name, err)
	}
	return rc, nil
}

// NamedResourceName returns the name of an RDS, SDS or RTDS resource without validating it,
// or "" when it does not decode.
func NamedResourceName(a *anypb.Any) string {
	var msg interface {
		proto.Message
		GetName() string
	}
	switch a.GetTypeUrl() {
	case RouteType:
		msg = &routev3.RouteConfiguration{}
	case SecretType:
		msg = &tlsv3.Secret{}
	case RuntimeType:
		msg = &runtimev3.Runtime{}
	case ExtensionConfigType:
		return ExtensionConfigName(a)
	default:
		return ""
	}
	if proto.Unmarshal(a.GetValue(), msg) != nil {
		return ""
	}
	return msg.GetName()
}
