package opentelemetry

import (
	otelsinkv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/stat_sinks/open_telemetry/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/stats"
)

// Name is the sink's Envoy name.
const Name = "envoy.stat_sinks.open_telemetry"

// Register adds the sink's factory.
func Register(b *registry.Builder) {
	registry.Add(b, stats.Sinks, Name, &otelsinkv3.SinkConfig{}, newSink)
}

func newSink(path string, config proto.Message, c stats.SinkContext) (stats.Sink, error) {
	return stats.AsSink(New(path, config.(*otelsinkv3.SinkConfig), Deps{
		Dial: c.Dial, ClusterExists: c.ClusterExists, Clock: c.Clock}))
}
