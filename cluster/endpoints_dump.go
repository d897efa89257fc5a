package cluster

import (
	"net"
	"strconv"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/host"
)

// EndpointsDump is the /config_dump?include_eds section: one
// ClusterLoadAssignment per active cluster, built from its live host sets
// (Envoy's EndpointsConfigDump). It returns nil, so the section is left out,
// when no cluster is active. match filters by the assignment's cluster_name
// (the EDS service name, else the cluster name).
func (m *Manager) EndpointsDump(match func(string) bool) proto.Message {
	clusters := m.Snapshot()
	if len(clusters) == 0 {
		return nil
	}
	out := &adminv3.EndpointsConfigDump{}
	for _, c := range clusters {
		snap := c.Snapshot()
		if snap == nil {
			continue
		}
		cla := loadAssignment(c, snap)
		if !match(cla.GetClusterName()) {
			continue
		}
		packed, err := anypb.New(cla)
		if err != nil {
			continue
		}
		if c.AddedViaAPI() {
			out.DynamicEndpointConfigs = append(out.DynamicEndpointConfigs, &adminv3.EndpointsConfigDump_DynamicEndpointConfig{
				VersionInfo: c.Version(), EndpointConfig: packed, LastUpdated: timestamppb.Now(),
			})
		} else {
			out.StaticEndpointConfigs = append(out.StaticEndpointConfigs, &adminv3.EndpointsConfigDump_StaticEndpointConfig{
				EndpointConfig: packed, LastUpdated: timestamppb.Now(),
			})
		}
	}
	return out
}

// loadAssignment rebuilds a cluster's assignment from its snapshot: one
// LocalityLbEndpoints per non-empty locality of each priority.
func loadAssignment(c *Cluster, snap *Snapshot) *endpointv3.ClusterLoadAssignment {
	name := c.EDSServiceName()
	if name == "" {
		name = c.Name()
	}
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: name, Policy: &endpointv3.ClusterLoadAssignment_Policy{}}
	for _, d := range snap.DropOverloads {
		cla.Policy.DropOverloads = append(cla.Policy.DropOverloads, &endpointv3.ClusterLoadAssignment_Policy_DropOverload{
			Category:       d.Category,
			DropPercentage: &typev3.FractionalPercent{Numerator: d.PerMillion, Denominator: typev3.FractionalPercent_MILLION},
		})
	}
	for _, set := range snap.PrioritySet.Sets() {
		cla.Policy.OverprovisioningFactor = wrapperspb.UInt32(set.OverprovisioningFactor())
		weights := set.LocalityWeights()
		for i, hosts := range set.HostsPerLocality() {
			if len(hosts) == 0 {
				continue
			}
			l := hosts[0].Locality()
			lle := &endpointv3.LocalityLbEndpoints{
				Locality: &corev3.Locality{Region: l.Region, Zone: l.Zone, SubZone: l.SubZone},
				Priority: set.Priority(),
			}
			if i < len(weights) && weights[i] > 0 {
				lle.LoadBalancingWeight = wrapperspb.UInt32(weights[i])
			}
			for _, h := range hosts {
				lle.LbEndpoints = append(lle.LbEndpoints, lbEndpoint(h))
			}
			cla.Endpoints = append(cla.Endpoints, lle)
		}
	}
	return cla
}

func lbEndpoint(h *host.Host) *endpointv3.LbEndpoint {
	ep := &endpointv3.Endpoint{
		Address:           socketAddress(h.Address()),
		Hostname:          h.Hostname(),
		HealthCheckConfig: &endpointv3.Endpoint_HealthCheckConfig{},
	}
	status := corev3.HealthStatus_UNKNOWN
	switch h.Health() {
	case host.Healthy:
		status = corev3.HealthStatus_HEALTHY
	case host.Degraded:
		status = corev3.HealthStatus_DEGRADED
	case host.Unhealthy:
		status = corev3.HealthStatus_UNHEALTHY
	}
	return &endpointv3.LbEndpoint{
		HostIdentifier:      &endpointv3.LbEndpoint_Endpoint{Endpoint: ep},
		HealthStatus:        status,
		LoadBalancingWeight: wrapperspb.UInt32(h.Weight()),
	}
}

// socketAddress turns "ip:port" back into an Address; anything else (a pipe
// path) becomes a pipe.
func socketAddress(addr string) *corev3.Address {
	hostPart, portPart, err := net.SplitHostPort(addr)
	port, perr := strconv.ParseUint(portPart, 10, 32)
	if err != nil || perr != nil {
		return &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: addr}}}
	}
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: hostPart, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
	}}}
}
