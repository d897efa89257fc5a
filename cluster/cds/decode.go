package cds

import (
	"errors"
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	internalupstreamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/internal_upstream/v3"
	upppv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/proxy_protocol/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/bootstrap"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/xds/resource"
	"github.com/legateproxy/legate/xds/watch"
)

// Cluster is a decoded and validated CDS resource.
type Cluster struct {
	// Name is the cluster's name.
	Name string
	// Config is the converted cluster; Config.Proto is the decoded proto.
	Config *config.Cluster
	// EDS is the cluster's eds_cluster_config.eds_config for an EDS cluster, else nil.
	EDS *resource.Source
	// Secrets are the SDS secrets the cluster's UpstreamTlsContext loads from an sds_config
	// (tls_certificate_sds_secret_configs, validation_context_sds_secret_config); the cluster
	// warms until they arrive.
	Secrets []resource.Dependency
}

// DecodeCluster decodes a CDS resource: the Any's type URL, protoc-gen-validate rules, then
// config.ClusterFromProto and, for EDS clusters, the eds_config source. lim carries
// --max-obj-name-len.
func DecodeCluster(a *anypb.Any, lim config.Limits) (*Cluster, error) {
	c, err := unmarshalCluster(a)
	if err != nil {
		return nil, err
	}
	at := fmt.Sprintf("cluster %q", c.GetName())
	if err := c.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", at, watch.Flatten(err))
	}
	cfg, err := config.ClusterFromProto(c, lim)
	if err != nil {
		return nil, err
	}
	out := &Cluster{Name: c.GetName(), Config: cfg}
	if cfg.Type == config.EDS {
		cs := c.GetEdsClusterConfig().GetEdsConfig()
		if cs == nil {
			return nil, fmt.Errorf("%s: eds_cluster_config.eds_config is not set; an EDS cluster needs a config source", at)
		}
		src, err := resource.SourceFromProto(cs)
		if err != nil {
			return nil, fmt.Errorf("%s: eds_cluster_config.eds_config.%w", at, err)
		}
		out.EDS = &src
	}
	if out.Secrets, err = UpstreamSecretDependencies(at+": transport_socket", c.GetTransportSocket()); err != nil {
		return nil, err
	}
	for i, m := range c.GetTransportSocketMatches() {
		deps, err := UpstreamSecretDependencies(fmt.Sprintf("%s: transport_socket_matches[%d].transport_socket", at, i), m.GetTransportSocket())
		if err != nil {
			return nil, err
		}
		out.Secrets = append(out.Secrets, deps...)
	}
	return out, nil
}

// ClusterName returns the name of a CDS resource without validating it, or "" when it does not
// decode, to keep a cluster whose update is rejected.
func ClusterName(a *anypb.Any) string {
	c, err := unmarshalCluster(a)
	if err != nil {
		return ""
	}
	return c.GetName()
}

func unmarshalCluster(a *anypb.Any) (*clusterv3.Cluster, error) {
	if a == nil {
		return nil, errors.New("cluster: resource is empty")
	}
	if err := watch.CheckTypeURL(a.GetTypeUrl(), watch.ClusterType); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	c := &clusterv3.Cluster{}
	if err := proto.Unmarshal(a.GetValue(), c); err != nil {
		return nil, fmt.Errorf("cluster: cannot decode the resource: %v", err)
	}
	if err := bootstrap.OpenTypedStructs("", c); err != nil {
		return nil, fmt.Errorf("cluster %q: %w", c.GetName(), err)
	}
	return c, nil
}

// upstreamTLSTypeURL is the typed_config type of a cluster's TLS transport socket.
const upstreamTLSTypeURL = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"

// HasUpstreamSecrets reports whether a cluster's transport socket loads secrets over SDS.
func HasUpstreamSecrets(ts *corev3.TransportSocket) bool {
	deps, err := UpstreamSecretDependencies("transport_socket", ts)
	return err == nil && len(deps) > 0
}

// UpstreamSecretDependencies returns the SDS secrets (those with an sds_config) of a cluster's
// transport socket when it is an UpstreamTlsContext; nil for any other socket. path names the
// transport socket in errors.
func UpstreamSecretDependencies(path string, ts *corev3.TransportSocket) ([]resource.Dependency, error) {
	a := ts.GetTypedConfig()
	var iu internalupstreamv3.InternalUpstreamTransport
	if a.MessageIs(&iu) {
		// internal_upstream wraps the socket that holds the secrets.
		if err := a.UnmarshalTo(&iu); err != nil {
			return nil, fmt.Errorf("%s.typed_config: %v", path, err)
		}
		return UpstreamSecretDependencies(path+".typed_config.transport_socket", iu.GetTransportSocket())
	}
	var pp upppv3.ProxyProtocolUpstreamTransport
	if a.MessageIs(&pp) {
		// So does proxy_protocol.
		if err := a.UnmarshalTo(&pp); err != nil {
			return nil, fmt.Errorf("%s.typed_config: %v", path, err)
		}
		return UpstreamSecretDependencies(path+".typed_config.transport_socket", pp.GetTransportSocket())
	}
	if a.GetTypeUrl() != upstreamTLSTypeURL {
		return nil, nil
	}
	var tc tlsv3.UpstreamTlsContext
	if err := a.UnmarshalTo(&tc); err != nil {
		return nil, fmt.Errorf("%s.typed_config: %v", path, err)
	}
	return resource.SecretDependencies(path+".typed_config.common_tls_context", tc.GetCommonTlsContext())
}

// Endpoints is a decoded and validated EDS resource.
type Endpoints struct {
	// Name is cluster_name: the EDS service name the assignment is for.
	Name string
	// Proto is the decoded assignment, handed to cluster.Cluster.ApplyAssignment.
	Proto *endpointv3.ClusterLoadAssignment
	// Assignment is the converted assignment.
	Assignment config.LoadAssignment
}

// DecodeEndpoints decodes an EDS resource: the Any's type URL, protoc-gen-validate rules, then
// config.LoadAssignmentFromProto.
func DecodeEndpoints(a *anypb.Any) (*Endpoints, error) {
	if a == nil {
		return nil, errors.New("cluster_load_assignment: resource is empty")
	}
	if err := watch.CheckTypeURL(a.GetTypeUrl(), watch.EndpointType); err != nil {
		return nil, fmt.Errorf("cluster_load_assignment: %w", err)
	}
	cla := &endpointv3.ClusterLoadAssignment{}
	if err := proto.Unmarshal(a.GetValue(), cla); err != nil {
		return nil, fmt.Errorf("cluster_load_assignment: cannot decode the resource: %v", err)
	}
	at := fmt.Sprintf("cluster_load_assignment %q", cla.GetClusterName())
	if err := cla.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", at, watch.Flatten(err))
	}
	la, err := config.LoadAssignmentFromProto(cla)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	return &Endpoints{Name: cla.GetClusterName(), Proto: cla, Assignment: la}, nil
}
