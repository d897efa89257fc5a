// Package otelres builds the OpenTelemetry Resource that Legate's OTLP exporters (the
// tracer, the stats sink, the access logger) send their data under, from Envoy's resource
// detectors: envoy.tracers.opentelemetry.resource_detectors.environment
// (OTEL_RESOURCE_ATTRIBUTES) and .static_config. Others are refused.
package otelres

import (
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	detectorsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/tracers/opentelemetry/resource_detectors/v3"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	resourcev1 "go.opentelemetry.io/proto/otlp/resource/v1"
)

// The resource detectors Legate implements.
const (
	EnvironmentName = "envoy.tracers.opentelemetry.resource_detectors.environment"
	StaticName      = "envoy.tracers.opentelemetry.resource_detectors.static_config"
)

// Build returns a Resource with the initial attributes, then each detector's in order, a later
// one replacing an earlier one's key (OpenTelemetry's merge, as Envoy does), sorted by key.
// getenv reads the environment (nil: os.Getenv); path names the detectors in errors.
func Build(path string, initial map[string]string, detectors []*corev3.TypedExtensionConfig, getenv func(string) string) (*resourcev1.Resource, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	attrs := make(map[string]string, len(initial))
	for k, v := range initial {
		attrs[k] = v
	}
	for i, rd := range detectors {
		detected, err := detect(fmt.Sprintf("%s.resource_detectors[%d]", path, i), rd, getenv)
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
		r.Attributes = append(r.Attributes, &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: attrs[k]}}})
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
		if err := rd.GetTypedConfig().UnmarshalTo(&c); err != nil {
			return nil, fmt.Errorf("%s.typed_config: %w", path, err)
		}
		if err := c.ValidateAll(); err != nil {
			return nil, fmt.Errorf("%s.typed_config: %w", path, err)
		}
		return c.GetAttributes(), nil
	}
	return nil, fmt.Errorf("%s: %q (%s): not implemented by Legate (only %s and %s)", path, rd.GetName(), rd.GetTypedConfig().GetTypeUrl(), EnvironmentName, StaticName)
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
