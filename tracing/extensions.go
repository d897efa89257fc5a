package tracing

import (
	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"

	"github.com/legateproxy/legate/internal/registry"
)

// Register declares the OpenTelemetry and Zipkin tracers, which the connection manager builds in place
// from its tracing block (FromProto).
func Register(b *registry.Builder) {
	b.Declare(registry.Tracer, OTelName, &tracev3.OpenTelemetryConfig{})
	b.Declare(registry.Tracer, ZipkinName, &tracev3.ZipkinConfig{})
}
