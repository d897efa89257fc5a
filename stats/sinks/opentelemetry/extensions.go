package opentelemetry

import (
	otelsinkv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/stat_sinks/open_telemetry/v3"

	"github.com/legateproxy/legate/internal/registry"
)

// Register declares the sink.
func Register(b *registry.Builder) {
	b.Declare(registry.StatsSink, "envoy.stat_sinks.open_telemetry", &otelsinkv3.SinkConfig{})
}
