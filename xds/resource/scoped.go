package resource

import (
	"fmt"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/xds/watch"
)

// DecodeScopedRoute decodes an SRDS resource (ScopedRouteConfiguration): the type URL,
// protoc-gen-validate rules, a route_configuration_name (as in Envoy, a scope delivered by SRDS
// takes its routes from RDS; an inline route_configuration next to it is not used), and a key
// made of string_key fragments only. on_demand scopes are accepted: their route configuration
// is fetched when a request first needs it (envoy.filters.http.on_demand).
func DecodeScopedRoute(a *anypb.Any) (*routev3.ScopedRouteConfiguration, error) {
	pb := &routev3.ScopedRouteConfiguration{}
	name, err := watch.DecodeNamed(a, ScopedRouteType, "scoped_route", pb, pb.GetName)
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
	if a.GetTypeUrl() != ScopedRouteType || proto.Unmarshal(a.GetValue(), pb) != nil {
		return ""
	}
	return pb.GetName()
}
