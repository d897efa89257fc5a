package tracing

import (
	"encoding/binary"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	detectorsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/tracers/opentelemetry/resource_detectors/v3"
	samplersv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/tracers/opentelemetry/samplers/v3"
	resourcev1 "go.opentelemetry.io/proto/otlp/resource/v1"

	"github.com/legateproxy/legate/internal/fraction"
)

// The OpenTelemetry tracer's resource detectors and samplers Legate implements.
const (
	EnvironmentDetectorName = "envoy.tracers.opentelemetry.resource_detectors.environment"
	StaticDetectorName      = "envoy.tracers.opentelemetry.resource_detectors.static_config"
	AlwaysOnSamplerName     = "envoy.tracers.opentelemetry.samplers.always_on"
	RatioSamplerName        = "envoy.tracers.opentelemetry.samplers.trace_id_ratio_based"
	ParentSamplerName       = "envoy.tracers.opentelemetry.samplers.parent_based"
)

// otelResource is the Resource spans are exported under: service.name (service_name, default
// unknown_service:envoy) and the SDK's attributes, then each resource detector's attributes
// in order, a later one replacing an earlier one's key (OpenTelemetry's merge, as Envoy does).
func otelResource(path string, pb *tracev3.OpenTelemetryConfig, d Deps) (*resourcev1.Resource, error) {
	attrs := map[string]string{
		"service.name":           "unknown_service:envoy",
		"telemetry.sdk.language": "go",
		"telemetry.sdk.name":     "legate",
	}
	if s := pb.GetServiceName(); s != "" {
		attrs["service.name"] = s
	}
	lookup := d.Getenv
	if lookup == nil {
		lookup = os.Getenv
	}
	for i, rd := range pb.GetResourceDetectors() {
		dpath := fmt.Sprintf("%s.resource_detectors[%d]", path, i)
		detected, err := detect(dpath, rd, lookup)
		if err != nil {
			return nil, err
		}
		for k, v := range detected {
			attrs[k] = v
		}
	}
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	r := &resourcev1.Resource{}
	for _, k := range keys {
		r.Attributes = append(r.Attributes, strAttr(k, attrs[k]))
	}
	return r, nil
}

// detect runs one resource detector.
func detect(path string, rd *corev3.TypedExtensionConfig, getenv func(string) string) (map[string]string, error) {
	switch rd.GetTypedConfig().GetTypeUrl() {
	case "type.googleapis.com/envoy.extensions.tracers.opentelemetry.resource_detectors.v3.EnvironmentResourceDetectorConfig":
		return parseResourceAttributes(path, getenv("OTEL_RESOURCE_ATTRIBUTES"))
	case "type.googleapis.com/envoy.extensions.tracers.opentelemetry.resource_detectors.v3.StaticConfigResourceDetectorConfig":
		var c detectorsv3.StaticConfigResourceDetectorConfig
		if err := unpack(path+".typed_config", rd.GetTypedConfig(), &c); err != nil {
			return nil, err
		}
		return c.GetAttributes(), nil
	}
	return nil, fmt.Errorf("%s: %q (%s): not implemented by Legate (only %s and %s)", path, rd.GetName(), rd.GetTypedConfig().GetTypeUrl(), EnvironmentDetectorName, StaticDetectorName)
}

// parseResourceAttributes reads OTEL_RESOURCE_ATTRIBUTES: comma-separated key=value pairs,
// values percent-encoded, as the OpenTelemetry specification defines it. A malformed value
// fails the configuration, naming the pair.
func parseResourceAttributes(path, v string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(v) == "" {
		return out, nil
	}
	for _, pair := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%s: OTEL_RESOURCE_ATTRIBUTES: %q is not key=value", path, pair)
		}
		dec, err := url.PathUnescape(strings.TrimSpace(val))
		if err != nil {
			return nil, fmt.Errorf("%s: OTEL_RESOURCE_ATTRIBUTES: %q: %v", path, pair, err)
		}
		out[k] = dec
	}
	return out, nil
}

// Sampler is an OpenTelemetry sampler: it decides, instead of the connection manager's
// sampling, whether a span is sampled, from its trace id and its parent (nil for a root).
type Sampler func(traceID [16]byte, parent *Context) bool

// newSampler builds the sampler configured on the tracer; nil when none.
func newSampler(path string, tc *corev3.TypedExtensionConfig) (Sampler, error) {
	if tc == nil {
		return nil, nil
	}
	switch tc.GetTypedConfig().GetTypeUrl() {
	case "type.googleapis.com/envoy.extensions.tracers.opentelemetry.samplers.v3.AlwaysOnSamplerConfig":
		return func([16]byte, *Context) bool { return true }, nil
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
		return func(id [16]byte, _ *Context) bool {
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
		return func(id [16]byte, parent *Context) bool {
			if parent != nil {
				return parent.Sampled
			}
			return root(id, nil)
		}, nil
	}
	return nil, fmt.Errorf("%s: %q (%s): not implemented by Legate (only %s, %s and %s)", path, tc.GetName(), tc.GetTypedConfig().GetTypeUrl(), AlwaysOnSamplerName, RatioSamplerName, ParentSamplerName)
}
