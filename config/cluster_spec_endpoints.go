package config

import (
	"fmt"
	"net/netip"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/internal/fraction"
	"github.com/legateproxy/legate/internal/proxyproto"
)

// Endpoint metadata namespaces read for load balancing: Envoy's, and the spelling the spec uses.
const (
	LbMetadataNamespace     = "envoy.lb"
	LbMetadataNamespaceSpec = "proxy.lb"
)

// MaxEndpointWeight is the largest endpoint load_balancing_weight: the spec limits host
// weights to 1..100 (Envoy's v2 limit was 128; v3 has none). A weight outside is refused,
// never clamped.
const MaxEndpointWeight = 100

// LoadAssignmentFromProto converts a ClusterLoadAssignment (from load_assignment or EDS). Errors
// name the field path below the assignment.
func LoadAssignmentFromProto(la *endpointv3.ClusterLoadAssignment) (LoadAssignment, error) {
	out := LoadAssignment{
		ClusterName:            la.GetClusterName(),
		OverprovisioningFactor: u32Or(la.GetPolicy().GetOverprovisioningFactor(), DefaultOverprovisioningFactor),
		WeightedPriorityHealth: la.GetPolicy().GetWeightedPriorityHealth(),
	}
	if out.OverprovisioningFactor == 0 {
		return out, fmt.Errorf("policy.overprovisioning_factor = 0; must be > 0")
	}
	for i, d := range la.GetPolicy().GetDropOverloads() {
		pm, err := perMillion(d.GetDropPercentage())
		if err != nil {
			return out, fmt.Errorf("policy.drop_overloads[%d].drop_percentage: %w", i, err)
		}
		out.DropOverloads = append(out.DropOverloads, DropOverload{Category: d.GetCategory(), PerMillion: pm})
	}
	for li, l := range la.GetEndpoints() {
		le := LocalityEndpoints{
			Region:      l.GetLocality().GetRegion(),
			Zone:        l.GetLocality().GetZone(),
			SubZone:     l.GetLocality().GetSubZone(),
			Priority:    l.GetPriority(),
			Weight:      u32Or(l.GetLoadBalancingWeight(), 0),
			SocketMatch: socketMatchMetadata(l.GetMetadata()),
			RawMetadata: l.GetMetadata(),
		}
		if l.GetLoadBalancingWeight() != nil {
			out.HasLocalityWeights = true
			if le.Weight == 0 {
				return out, fmt.Errorf("endpoints[%d].load_balancing_weight = 0; must be >= 1", li)
			}
		}
		for ei, e := range l.GetLbEndpoints() {
			at := fmt.Sprintf("endpoints[%d].lb_endpoints[%d]", li, ei)
			if e.GetEndpoint() == nil {
				return out, fmt.Errorf("%s.endpoint is missing; named endpoints are not supported", at)
			}
			addr, err := AddressFromProto(e.GetEndpoint().GetAddress())
			if err != nil {
				return out, fmt.Errorf("%s.endpoint.address: %w", at, err)
			}
			ep := Endpoint{
				Address:      addr,
				Hostname:     e.GetEndpoint().GetHostname(),
				Weight:       u32Or(e.GetLoadBalancingWeight(), 0),
				HealthStatus: HealthStatus(e.GetHealthStatus()),
			}
			if e.GetLoadBalancingWeight() != nil && (ep.Weight == 0 || ep.Weight > MaxEndpointWeight) {
				return out, fmt.Errorf("%s.load_balancing_weight = %d; must be in 1..%d", at, ep.Weight, MaxEndpointWeight)
			}
			if ep.HealthStatus > HealthDegraded {
				return out, fmt.Errorf("%s.health_status = %d; not a HealthStatus", at, e.GetHealthStatus())
			}
			ep.Metadata, ep.Canary = lbMetadata(e.GetMetadata())
			ep.SocketMatch = socketMatchMetadata(e.GetMetadata())
			ep.FilterMetadata = e.GetMetadata().GetFilterMetadata()
			ep.RawMetadata = e.GetMetadata()
			if ep.ProxyProtocolTLVs, err = hostProxyTLVs(at+".metadata", e.GetMetadata()); err != nil {
				return out, err
			}
			le.Endpoints = append(le.Endpoints, ep)
		}
		out.Localities = append(out.Localities, le)
	}
	return out, nil
}

// hostProxyTLVs reads the PerHostConfig an endpoint's typed_filter_metadata has for the
// upstream proxy_protocol socket: the TLVs its connections' headers add. A value of another
// type is refused (Envoy logs it and sends the socket's TLVs only).
func hostProxyTLVs(path string, md *corev3.Metadata) ([]proxyproto.TLV, error) {
	a, ok := md.GetTypedFilterMetadata()[proxyproto.UpstreamName]
	if !ok {
		return nil, nil
	}
	at := fmt.Sprintf("%s.typed_filter_metadata[%q]", path, proxyproto.UpstreamName)
	var pb corev3.PerHostConfig
	if want := pb.ProtoReflect().Descriptor().FullName(); a.MessageName() != want {
		return nil, fmt.Errorf("%s: type %q; want %s", at, a.MessageName(), want)
	}
	if err := a.UnmarshalTo(&pb); err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	return proxyproto.HostTLVsFromProto(at, &pb)
}

// perMillion converts a FractionalPercent to parts per million (capped at 100%).
func perMillion(f *typev3.FractionalPercent) (uint32, error) {
	den, ok := fraction.Denominator(f.GetDenominator())
	if !ok {
		return 0, fmt.Errorf("denominator = %d; not a FractionalPercent denominator", f.GetDenominator())
	}
	return uint32(min(uint64(f.GetNumerator())*(1_000_000/den), 1_000_000)), nil
}

// lbMetadata reads the envoy.lb (and proxy.lb) metadata of an endpoint, stringified.
func lbMetadata(md *corev3.Metadata) (map[string]string, bool) {
	fm := md.GetFilterMetadata()
	var out map[string]string
	for _, ns := range []string{LbMetadataNamespaceSpec, LbMetadataNamespace} {
		s, ok := fm[ns]
		if !ok {
			continue
		}
		m := structStrings(s.GetFields())
		if out == nil {
			out = m
			continue
		}
		for k, v := range m {
			out[k] = v // envoy.lb wins over proxy.lb
		}
	}
	canary := false
	if s, ok := fm[LbMetadataNamespace]; ok {
		canary = s.GetFields()["canary"].GetBoolValue()
	}
	if s, ok := fm[LbMetadataNamespaceSpec]; ok && !canary {
		canary = s.GetFields()["canary"].GetBoolValue()
	}
	return out, canary
}

// structStrings stringifies the scalar fields of a Struct: strings as is, numbers in Go's %v
// form, booleans as "true"/"false". Lists, structs and nulls are skipped.
func structStrings(fields map[string]*structpb.Value) map[string]string {
	if len(fields) == 0 {
		return nil
	}
	out := make(map[string]string, len(fields))
	for k, v := range fields {
		switch x := v.GetKind().(type) {
		case *structpb.Value_StringValue:
			out[k] = x.StringValue
		case *structpb.Value_NumberValue:
			out[k] = fmt.Sprintf("%v", x.NumberValue)
		case *structpb.Value_BoolValue:
			out[k] = strconv.FormatBool(x.BoolValue)
		}
	}
	return out
}

// AddressFromProto converts a core.Address.
func AddressFromProto(a *corev3.Address) (Address, error) {
	switch {
	case a == nil:
		return Address{}, fmt.Errorf("address is missing")
	case a.GetSocketAddress() != nil:
		sa := a.GetSocketAddress()
		out := Address{Kind: SocketAddress, Host: sa.GetAddress(), Port: sa.GetPortValue(), UDP: sa.GetProtocol() == corev3.SocketAddress_UDP}
		if out.Host == "" {
			return out, fmt.Errorf("socket_address.address is empty")
		}
		if sa.GetNamedPort() != "" {
			return out, fmt.Errorf("socket_address.named_port = %q; named ports are not supported", sa.GetNamedPort())
		}
		if out.Port > 65535 {
			return out, fmt.Errorf("socket_address.port_value = %d; must be <= 65535", out.Port)
		}
		return out, nil
	case a.GetPipe() != nil:
		if a.GetPipe().GetPath() == "" {
			return Address{}, fmt.Errorf("pipe.path is empty")
		}
		return Address{Kind: PipeAddress, Path: a.GetPipe().GetPath()}, nil
	case a.GetEnvoyInternalAddress() != nil:
		ia := a.GetEnvoyInternalAddress()
		return Address{Kind: InternalAddress, Path: ia.GetServerListenerName(), EndpointID: ia.GetEndpointId()}, nil
	}
	return Address{}, fmt.Errorf("no address set; one of socket_address, pipe, envoy_internal_address is required")
}

// String renders the address as Envoy's Address::asString: "1.2.3.4:80", "[::1]:80", the pipe
// path, or "envoy://listener/endpoint_id".
func (a Address) String() string {
	switch a.Kind {
	case PipeAddress:
		return a.Path
	case InternalAddress:
		return "envoy://" + a.Path + "/" + a.EndpointID
	}
	if ip, err := netip.ParseAddr(a.Host); err == nil {
		return netip.AddrPortFrom(ip, uint16(a.Port)).String()
	}
	return a.Host + ":" + strconv.FormatUint(uint64(a.Port), 10)
}

func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}
