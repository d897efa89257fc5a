package hystrix

import (
	"fmt"

	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/stats"
)

// Name is the sink's Envoy name.
const Name = "envoy.stat_sinks.hystrix"

// Register adds the sink's factory.
func Register(b *registry.Builder) {
	registry.Add(b, stats.Sinks, Name, &metricsv3.HystrixSink{}, newSink)
	b.Alias(registry.StatsSink, "envoy.hystrix", Name)
}

func newSink(path string, config proto.Message, c stats.SinkContext) (stats.Sink, error) {
	h, err := New(config.(*metricsv3.HystrixSink), c.FlushInterval)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}
