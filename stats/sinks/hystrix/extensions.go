package hystrix

import (
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"

	"github.com/legateproxy/legate/internal/registry"
)

// Register declares the sink.
func Register(b *registry.Builder) {
	b.Declare(registry.StatsSink, "envoy.stat_sinks.hystrix", &metricsv3.HystrixSink{})
}
