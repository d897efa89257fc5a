package tracing

import (
	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	detectorsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/tracers/opentelemetry/resource_detectors/v3"
	samplersv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/tracers/opentelemetry/samplers/v3"

	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/internal/otelres"
	"github.com/legateproxy/legate/internal/registry"
)

// Tracers is the kind of tracer extensions: the providers of a connection manager's tracing,
// which FromProto builds with the factory Deps.Tracers has for the provider's type. A tracer
// package registers itself with
//
//	registry.Add(b, tracing.Tracers, Name, &pb.Config{}, factory)
var Tracers = registry.Kind[TracerFactory]{Category: registry.Tracer}

// TracerFactory builds a provider from its config, a message of the registered type that
// passed its validation rules; path names the config in errors.
type TracerFactory func(path string, config proto.Message, d Deps) (Provider, error)

// Provider is what a tracer gives a connection manager's tracing (Config's fields of the
// same names): its exporter, its sampler if any, and its context headers.
type Provider struct {
	Exporter                  Exporter
	Sample                    Sampler
	Format                    Format
	SharedContext, TraceID128 bool
}

// Register adds the OpenTelemetry and Zipkin tracers, and declares the OpenTelemetry
// tracer's resource detectors and samplers, which it builds in place.
func Register(b *registry.Builder) {
	registry.Add(b, Tracers, OTelName, &tracev3.OpenTelemetryConfig{}, newOTelProvider)
	registry.Add(b, Tracers, ZipkinName, &tracev3.ZipkinConfig{}, newZipkinProvider)
	b.Declare(registry.OTelResourceDetector, otelres.EnvironmentName, &detectorsv3.EnvironmentResourceDetectorConfig{})
	b.Declare(registry.OTelResourceDetector, otelres.StaticName, &detectorsv3.StaticConfigResourceDetectorConfig{})
	b.Declare(registry.OTelSampler, AlwaysOnSamplerName, &samplersv3.AlwaysOnSamplerConfig{})
	b.Declare(registry.OTelSampler, RatioSamplerName, &samplersv3.TraceIdRatioBasedSamplerConfig{})
	b.Declare(registry.OTelSampler, ParentSamplerName, &samplersv3.ParentBasedSamplerConfig{})
}

// builtin is the registry of this package's tracers, for a connection manager built without
// the server's.
func builtin() (*registry.Registry, error) {
	b := registry.NewBuilder()
	Register(b)
	return b.Build()
}

func newOTelProvider(path string, config proto.Message, d Deps) (Provider, error) {
	exp, err := NewOTel(path, config.(*tracev3.OpenTelemetryConfig), d)
	if err != nil {
		return Provider{}, err
	}
	return Provider{Exporter: exp, Sample: exp.sampler}, nil
}

func newZipkinProvider(path string, config proto.Message, d Deps) (Provider, error) {
	zc := config.(*tracev3.ZipkinConfig)
	exp, err := NewZipkin(path, zc, d)
	if err != nil {
		return Provider{}, err
	}
	return Provider{Exporter: exp, Format: B3, TraceID128: zc.GetTraceId_128Bit(),
		SharedContext: zc.GetSharedSpanContext() == nil || zc.GetSharedSpanContext().GetValue()}, nil
}
