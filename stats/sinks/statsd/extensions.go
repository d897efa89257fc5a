package statsd

import (
	"context"
	"errors"
	"net"

	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/stats"
)

// The sinks' Envoy names.
const (
	Name    = "envoy.stat_sinks.statsd"
	DogName = "envoy.stat_sinks.dog_statsd"
)

// Register adds the statsd and dog_statsd sinks' factories.
func Register(b *registry.Builder) {
	registry.Add(b, stats.Sinks, Name, &metricsv3.StatsdSink{}, newStatsd)
	registry.Add(b, stats.Sinks, DogName, &metricsv3.DogStatsdSink{}, newDogStatsd)
	b.Alias(registry.StatsSink, "envoy.statsd", Name)
	b.Alias(registry.StatsSink, "envoy.dog_statsd", DogName)
}

func newStatsd(path string, config proto.Message, c stats.SinkContext) (stats.Sink, error) {
	return stats.AsSink(FromStatsd(path, config.(*metricsv3.StatsdSink), clusterDialer(c)))
}

func newDogStatsd(path string, config proto.Message, _ stats.SinkContext) (stats.Sink, error) {
	return stats.AsSink(FromDogStatsd(path, config.(*metricsv3.DogStatsdSink)))
}

// clusterDialer dials a tcp_cluster_name. As in Envoy the cluster must be a static one; each
// connection goes to a host its load balancer picks, with the cluster's connect_timeout, bind
// and socket options and transport socket.
func clusterDialer(c stats.SinkContext) ClusterDialer {
	return func(name string) (Dialer, error) {
		if c.ClusterExists != nil && !c.ClusterExists(name) {
			return nil, errors.New("not a static cluster of the bootstrap")
		}
		return func() (net.Conn, error) { return c.Dial(context.Background(), name) }, nil
	}
}
