package config

import (
	"errors"
	"fmt"

	aggregatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/aggregate/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// AggregateConfig is envoy.extensions.clusters.aggregate.v3.ClusterConfig, the settings of an
// envoy.clusters.aggregate cluster.
type AggregateConfig struct {
	// Clusters are the member clusters in priority order (clusters); at least one, never the
	// aggregate itself.
	Clusters []string
}

func decodeAggregate(cluster string, typedConfig *anypb.Any) (any, error) {
	if typedConfig == nil {
		return nil, fmt.Errorf("typed_config is missing; %s needs a ClusterConfig listing its clusters", AggregateClusterType)
	}
	var agg aggregatev3.ClusterConfig
	if err := typedConfig.UnmarshalTo(&agg); err != nil {
		return nil, fmt.Errorf("typed_config: %v; %s needs an envoy.extensions.clusters.aggregate.v3.ClusterConfig", err, AggregateClusterType)
	}
	if len(agg.GetClusters()) == 0 {
		return nil, errors.New("typed_config.clusters is empty; an aggregate cluster needs at least one cluster")
	}
	for i, name := range agg.GetClusters() {
		if name == cluster {
			return nil, fmt.Errorf("typed_config.clusters[%d] = %q; an aggregate cluster cannot contain itself", i, name)
		}
	}
	return &AggregateConfig{Clusters: agg.GetClusters()}, nil
}
