package tracing

import (
	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	detectorsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/tracers/opentelemetry/resource_detectors/v3"
	samplersv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/tracers/opentelemetry/samplers/v3"

	"github.com/legateproxy/legate/internal/otelres"
	"github.com/legateproxy/legate/internal/registry"
)

// Register declares the OpenTelemetry and Zipkin tracers and the OpenTelemetry tracer's
// resource detectors and samplers, which the connection manager builds in place
// from its tracing block (FromProto).
func Register(b *registry.Builder) {
	b.Declare(registry.Tracer, OTelName, &tracev3.OpenTelemetryConfig{})
	b.Declare(registry.Tracer, ZipkinName, &tracev3.ZipkinConfig{})
	b.Declare(registry.OTelResourceDetector, otelres.EnvironmentName, &detectorsv3.EnvironmentResourceDetectorConfig{})
	b.Declare(registry.OTelResourceDetector, otelres.StaticName, &detectorsv3.StaticConfigResourceDetectorConfig{})
	b.Declare(registry.OTelSampler, AlwaysOnSamplerName, &samplersv3.AlwaysOnSamplerConfig{})
	b.Declare(registry.OTelSampler, RatioSamplerName, &samplersv3.TraceIdRatioBasedSamplerConfig{})
	b.Declare(registry.OTelSampler, ParentSamplerName, &samplersv3.ParentBasedSamplerConfig{})
}
