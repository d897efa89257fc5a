package tracing

import (
	"encoding/binary"
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	samplersv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/tracers/opentelemetry/samplers/v3"
	resourcev1 "go.opentelemetry.io/proto/otlp/resource/v1"

	"github.com/legateproxy/legate/internal/fraction"
	"github.com/legateproxy/legate/internal/otelres"
)

// The OpenTelemetry tracer's resource detectors and samplers Legate implements.
const (
	AlwaysOnSamplerName = "envoy.tracers.opentelemetry.samplers.always_on"
	RatioSamplerName    = "envoy.tracers.opentelemetry.samplers.trace_id_ratio_based"
	ParentSamplerName   = "envoy.tracers.opentelemetry.samplers.parent_based"
)

// otelResource is the Resource spans are exported under: service.name (service_name, default
// unknown_service:envoy) and the SDK's attributes, then each resource detector's attributes.
func otelResource(path string, pb *tracev3.OpenTelemetryConfig, d Deps) (*resourcev1.Resource, error) {
	service := pb.GetServiceName()
	if service == "" {
		service = "unknown_service:envoy"
	}
	return otelres.Build(path, map[string]string{
		"service.name":           service,
		"telemetry.sdk.language": "go",
		"telemetry.sdk.name":     "legate",
	}, pb.GetResourceDetectors(), d.Getenv)
}

// Sampler is an OpenTelemetry sampler: it decides, instead of the connection manager's
// sampling, whether a span is sampled, from its trace id and its parent (when hasParent; a
// value, so that deciding allocates nothing).
type Sampler func(traceID [16]byte, parent Context, hasParent bool) bool

// newSampler builds the sampler configured on the tracer; nil when none.
func newSampler(path string, tc *corev3.TypedExtensionConfig) (Sampler, error) {
	if tc == nil {
		return nil, nil
	}
	switch tc.GetTypedConfig().GetTypeUrl() {
	case "type.googleapis.com/envoy.extensions.tracers.opentelemetry.samplers.v3.AlwaysOnSamplerConfig":
		return func([16]byte, Context, bool) bool { return true }, nil
	case "type.googleapis.com/envoy.extensions.tracers.opentelemetry.samplers.v3.TraceIdRatioBasedSamplerConfig":
		var c samplersv3.TraceIdRatioBasedSamplerConfig
		if err := unpack(path+".typed_config", tc.GetTypedConfig(), &c); err != nil {
			return nil, err
		}
		num := uint64(c.GetSamplingPercentage().GetNumerator())
		den, ok := fraction.Denominator(c.GetSamplingPercentage().GetDenominator())
		if !ok {
			den = 100
		}
		// The first 8 bytes of the trace id as Envoy reads them (little endian), modulo the
		// denominator, below the numerator.
		return func(id [16]byte, _ Context, _ bool) bool {
			return num > 0 && binary.LittleEndian.Uint64(id[:8])%den < num
		}, nil
	case "type.googleapis.com/envoy.extensions.tracers.opentelemetry.samplers.v3.ParentBasedSamplerConfig":
		var c samplersv3.ParentBasedSamplerConfig
		if err := unpack(path+".typed_config", tc.GetTypedConfig(), &c); err != nil {
			return nil, err
		}
		root, err := newSampler(path+".typed_config.wrapped_sampler", c.GetWrappedSampler())
		if err != nil {
			return nil, err
		}
		if root == nil {
			return nil, fmt.Errorf("%s.typed_config.wrapped_sampler: required", path)
		}
		return func(id [16]byte, parent Context, hasParent bool) bool {
			if hasParent {
				return parent.Sampled
			}
			return root(id, Context{}, false)
		}, nil
	}
	return nil, fmt.Errorf("%s: %q (%s): not implemented by Legate (only %s, %s and %s)", path, tc.GetName(), tc.GetTypedConfig().GetTypeUrl(), AlwaysOnSamplerName, RatioSamplerName, ParentSamplerName)
}
