package resource

import (
	"fmt"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// DecodeScopedRoute decodes an SRDS resource (ScopedRouteConfiguration): the type URL,
// protoc-gen-validate rules, a route_configuration_name (inline route_configuration is not
// supported), and a key made of string_key fragments only.
func DecodeScopedRoute(a *anypb.Any) (*routev3.ScopedRouteConfiguration, error) {
	pb := &routev3.ScopedRouteConfiguration{}
	name, err := decodeValidated(a, ScopedRouteType, "scoped_route", pb, pb.GetName)
	if err != nil {
		return nil, err
	}
	if err := CheckScopedRoute(fmt.Sprintf("scoped_route %q", name), pb); err != nil {
		return nil, err
	}
	return pb, nil
}

// CheckScopedRoute applies the rules DecodeScopedRoute adds to protoc-gen-validate's; path
// names the scope in errors. Inline scoped_route_configurations_list entries use it too.
func CheckScopedRoute(path string, pb *routev3.ScopedRouteConfiguration) error {
	if pb.GetRouteConfiguration() != nil {
		return fmt.Errorf("%s: route_configuration is set; only route_configuration_name (RDS) is supported", path)
	}
	if pb.GetRouteConfigurationName() == "" {
		return fmt.Errorf("%s: route_configuration_name is empty; a scope needs a route configuration", path)
	}
	if pb.GetOnDemand() {
		return fmt.Errorf("%s: on_demand = true; on-demand scopes are not supported", path)
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
