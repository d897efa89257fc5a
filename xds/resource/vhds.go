package resource

import (
	"errors"
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/xds/watch"
)

// checkVHDSSource applies Envoy's rule for vhds.config_source: VHDS exists only in the
// incremental protocol, so the source must be an api_config_source of type DELTA_GRPC.
func checkVHDSSource(cs *corev3.ConfigSource) error {
	src, err := SourceFromProto(cs)
	if err != nil {
		return err
	}
	if src.API == nil || src.API.Type != DeltaGRPC {
		return errors.New("only an api_config_source with api_type DELTA_GRPC is supported (VHDS is delta-only)")
	}
	return nil
}

// DecodeVirtualHost decodes a VHDS resource: the type URL, protoc-gen-validate rules and a name
// of the form "<route configuration name>/<anything>" (the route configuration the virtual
// host joins).
func DecodeVirtualHost(a *anypb.Any) (*routev3.VirtualHost, error) {
	pb := &routev3.VirtualHost{}
	name, err := watch.DecodeNamed(a, VirtualHostType, "virtual_host", pb, pb.GetName)
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
	if a.GetTypeUrl() != VirtualHostType || proto.Unmarshal(a.GetValue(), pb) != nil {
		return ""
	}
	return pb.GetName()
}
