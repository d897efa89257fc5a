package resource

import (
	"fmt"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	runtimev3 "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/bootstrap"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/tlsutil"
)

// validated is a generated message with protoc-gen-validate's ValidateAll.
type validated interface {
	proto.Message
	ValidateAll() error
}

// unmarshalNamed checks a's type URL and decodes it into msg; kind names the resource in
// errors ("route_config").
func unmarshalNamed(a *anypb.Any, typeURL, kind string, msg proto.Message) error {
	if a == nil {
		return fmt.Errorf("%s: resource is empty", kind)
	}
	if err := checkTypeURL(a.GetTypeUrl(), typeURL); err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	if err := proto.Unmarshal(a.GetValue(), msg); err != nil {
		return fmt.Errorf("%s: cannot decode the resource: %v", kind, err)
	}
	if err := bootstrap.OpenTypedStructs("", msg); err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	return nil
}

// decodeValidated unmarshals and validates msg, naming it with the name nameOf returns.
func decodeValidated(a *anypb.Any, typeURL, kind string, msg validated, nameOf func() string) (string, error) {
	if err := unmarshalNamed(a, typeURL, kind, msg); err != nil {
		return "", err
	}
	name := nameOf()
	if name == "" {
		return "", fmt.Errorf("%s %q: name is empty; a %s delivered by xDS needs a name", kind, name, kind)
	}
	if err := msg.ValidateAll(); err != nil {
		return name, fmt.Errorf("%s %q: %w", kind, name, flatten(err))
	}
	return name, nil
}

// DecodeRouteConfig decodes an RDS resource: the type URL, protoc-gen-validate rules, then a
// trial compile with httpproxy/route and opts (the data plane's per-filter configuration
// checks and cluster lookup; clusters are checked only when the resource sets
// validate_clusters, whose RDS default is false as in Envoy), so that a route configuration
// the connection managers could not serve is NACKed.
func DecodeRouteConfig(a *anypb.Any, opts route.Options) (*routev3.RouteConfiguration, error) {
	rc := &routev3.RouteConfiguration{}
	name, err := decodeValidated(a, RouteType, "route_config", rc, rc.GetName)
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

// DecodeSecret decodes an SDS resource into its proto and tlsutil's form.
func DecodeSecret(a *anypb.Any) (*tlsv3.Secret, tlsutil.Secret, error) {
	pb := &tlsv3.Secret{}
	name, err := decodeValidated(a, SecretType, "secret", pb, pb.GetName)
	if err != nil {
		return nil, tlsutil.Secret{}, err
	}
	s, err := tlsutil.SecretFromProto(fmt.Sprintf("secret %q", name), pb)
	if err != nil {
		return nil, tlsutil.Secret{}, err
	}
	return pb, s, nil
}

// DecodeRuntime decodes an RTDS resource: its name and its layer as structpb.Struct.AsMap
// returns it (runtime.Runtime.SetRTDSLayer's input).
func DecodeRuntime(a *anypb.Any) (string, map[string]any, error) {
	pb := &runtimev3.Runtime{}
	name, err := decodeValidated(a, RuntimeType, "runtime", pb, pb.GetName)
	if err != nil {
		return name, nil, err
	}
	if pb.GetLayer() == nil {
		return name, map[string]any{}, nil
	}
	return name, pb.GetLayer().AsMap(), nil
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
