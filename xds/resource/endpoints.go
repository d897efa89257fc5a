package resource

import (
	"errors"
	"fmt"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/xds/watch"
)

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
	if err := watch.CheckTypeURL(a.GetTypeUrl(), EndpointType); err != nil {
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
