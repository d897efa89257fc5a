package metricsservice

import (
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/stats"
)

// Name is the sink's Envoy name.
const Name = "envoy.stat_sinks.metrics_service"

// Register adds the sink's factory.
func Register(b *registry.Builder) {
	registry.Add(b, stats.Sinks, Name, &metricsv3.MetricsServiceConfig{}, newSink)
	b.Alias(registry.StatsSink, "envoy.metrics_service", Name)
}

func newSink(path string, config proto.Message, c stats.SinkContext) (stats.Sink, error) {
	return stats.AsSink(New(path, config.(*metricsv3.MetricsServiceConfig), Deps{
		Node: c.Node, Dial: c.Dial, ClusterExists: c.ClusterExists}))
}
