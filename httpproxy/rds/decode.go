package rds

import (
	"errors"
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/xds/resource"
	"github.com/legateproxy/legate/xds/watch"
)

// DecodeRouteConfig decodes an RDS resource: the type URL, protoc-gen-validate rules, then a
// trial compile with httpproxy/route and opts (the data plane's per-filter configuration
// checks and cluster lookup; clusters are checked only when the resource sets
// validate_clusters, whose RDS default is false as in Envoy), so that a route configuration
// the connection managers could not serve is NACKed.
func DecodeRouteConfig(a *anypb.Any, opts route.Options) (*routev3.RouteConfiguration, error) {
	rc := &routev3.RouteConfiguration{}
	name, err := watch.DecodeNamed(a, watch.RouteType, "route_config", rc, rc.GetName)
	if err != nil {
		return nil, err
	}
	trial := rc
	if v := rc.GetVhds(); v != nil {
		if err := checkVHDSSource(v.GetConfigSource()); err != nil {
			return nil, fmt.Errorf("route_config %q: vhds.config_source: %w", name, err)
		}
		// The virtual hosts of VHDS join the configuration later (routeWatch merges them);
		// the rest must compile now.
		trial = proto.Clone(rc).(*routev3.RouteConfiguration)
		trial.Vhds = nil
	}
	opts.ValidateClusters = false
	if _, err := route.Compile(trial, opts); err != nil {
		return nil, fmt.Errorf("route_config %q: %w", name, err)
	}
	return rc, nil
}

// DecodeScopedRoute decodes an SRDS resource (ScopedRouteConfiguration): the type URL,
// protoc-gen-validate rules, a route_configuration_name (as in Envoy, a scope delivered by SRDS
// takes its routes from RDS; an inline route_configuration next to it is not used), and a key
// made of string_key fragments only. on_demand scopes are accepted: their route configuration
// is fetched when a request first needs it (envoy.filters.http.on_demand).
func DecodeScopedRoute(a *anypb.Any) (*routev3.ScopedRouteConfiguration, error) {
	pb := &routev3.ScopedRouteConfiguration{}
	name, err := watch.DecodeNamed(a, watch.ScopedRouteType, "scoped_route", pb, pb.GetName)
	if err != nil {
		return nil, err
	}
	if err := CheckScopedRoute(fmt.Sprintf("scoped_route %q", name), pb, false); err != nil {
		return nil, err
	}
	return pb, nil
}

// CheckScopedRoute applies the rules DecodeScopedRoute adds to protoc-gen-validate's; path
// names the scope in errors. With inline set it applies instead Envoy's rules for the entries
// of scoped_route_configurations_list: each carries its route_configuration, and
// route_configuration_name (RDS) is refused.
func CheckScopedRoute(path string, pb *routev3.ScopedRouteConfiguration, inline bool) error {
	switch {
	case inline && pb.GetRouteConfigurationName() != "":
		return fmt.Errorf("%s: route_configuration_name = %q; fetching routes via RDS is not supported with inline scoped routes (set route_configuration)", path, pb.GetRouteConfigurationName())
	case inline && pb.GetRouteConfiguration() == nil:
		return fmt.Errorf("%s: route_configuration is unset; inline scoped routes need a route_configuration", path)
	case !inline && pb.GetRouteConfigurationName() == "":
		return fmt.Errorf("%s: route_configuration_name is empty; a scope delivered by SRDS needs a route configuration name", path)
	}
	_, err := ScopeKey(path, pb)
	return err
}

// ScopeKey is the lookup key of a scope: its string_key fragments joined with NUL, the form
// httpproxy builds from request headers.
func ScopeKey(path string, pb *routev3.ScopedRouteConfiguration) (string, error) {
	fs := pb.GetKey().GetFragments()
	parts := make([]string, len(fs))
	for i, f := range fs {
		if _, ok := f.GetType().(*routev3.ScopedRouteConfiguration_Key_Fragment_StringKey); !ok {
			return "", fmt.Errorf("%s: key.fragments[%d]: only string_key is supported", path, i)
		}
		parts[i] = f.GetStringKey()
	}
	return strings.Join(parts, "\x00"), nil
}

// ScopedRouteName returns the name of an SRDS resource without validating it, or "".
func ScopedRouteName(a *anypb.Any) string {
	pb := &routev3.ScopedRouteConfiguration{}
	if a.GetTypeUrl() != watch.ScopedRouteType || proto.Unmarshal(a.GetValue(), pb) != nil {
		return ""
	}
	return pb.GetName()
}

// checkVHDSSource applies Envoy's rule for vhds.config_source: VHDS exists only in the
// incremental protocol, so the source must be an api_config_source of type DELTA_GRPC.
func checkVHDSSource(cs *corev3.ConfigSource) error {
	src, err := resource.SourceFromProto(cs)
	if err != nil {
		return err
	}
	if src.API == nil || src.API.Type != resource.DeltaGRPC {
		return errors.New("only an api_config_source with api_type DELTA_GRPC is supported (VHDS is delta-only)")
	}
	return nil
}

// DecodeVirtualHost decodes a VHDS resource: the type URL, protoc-gen-validate rules and a name
// of the form "<route configuration name>/<anything>" (the route configuration the virtual
// host joins).
func DecodeVirtualHost(a *anypb.Any) (*routev3.VirtualHost, error) {
	pb := &routev3.VirtualHost{}
	name, err := watch.DecodeNamed(a, watch.VirtualHostType, "virtual_host", pb, pb.GetName)
	if err != nil {
		return nil, err
	}
	if rc, _, ok := strings.Cut(name, "/"); !ok || rc == "" {
		return nil, fmt.Errorf("virtual_host %q: name has no route configuration prefix; VHDS names are <route_config_name>/<host>", name)
	}
	return pb, nil
}

// VirtualHostName returns the name of a VHDS resource without validating it, or "".
func VirtualHostName(a *anypb.Any) string {
	pb := &routev3.VirtualHost{}
	if a.GetTypeUrl() != watch.VirtualHostType || proto.Unmarshal(a.GetValue(), pb) != nil {
		return ""
	}
	return pb.GetName()
}
