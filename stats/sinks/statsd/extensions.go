package statsd

import (
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"

	"github.com/legateproxy/legate/internal/registry"
)

// Register declares the statsd and dog_statsd sinks.
func Register(b *registry.Builder) {
	b.Declare(registry.StatsSink, "envoy.stat_sinks.statsd", &metricsv3.StatsdSink{})
	b.Declare(registry.StatsSink, "envoy.stat_sinks.dog_statsd", &metricsv3.DogStatsdSink{})
}
