package tracing

import (
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/stats"
)

// TestDecide checks Envoy's decision order on UUID request ids: a reason already in the id
// stands, x-client-trace-id (client_sampling) comes before x-envoy-force-trace, random
// sampling reads the id's first 8 hex digits modulo 10000, and overall_sampling can veto.
func TestDecide(t *testing.T) {
	const low = "00000001-1111-4111-8111-111111111111"  // integer 1
	const high = "0000270f-1111-4111-8111-111111111111" // integer 9999
	full := Config{Sampling: Sampling{Client: 10000, Random: 10000, Overall: 10000}}
	for _, tc := range []struct {
		name    string
		cfg     Config
		req     Request
		want    Reason
		changed bool
	}{
		{"random", Config{Sampling: Sampling{Random: 2, Overall: 10000}}, Request{RequestID: low}, Sampled, true},
		{"random misses", Config{Sampling: Sampling{Random: 2, Overall: 10000}}, Request{RequestID: high}, NotTraceable, false},
		{"client first", full, Request{RequestID: low, ClientTraceID: true, ForceTrace: true}, ClientForced, true},
		{"forced", Config{Sampling: Sampling{Overall: 10000}}, Request{RequestID: high, ForceTrace: true}, ServiceForced, true},
		{"already sampled", Config{Sampling: Sampling{Overall: 10000}}, Request{RequestID: "00000001-1111-9111-8111-111111111111"}, Sampled, false},
		{"overall vetoes", Config{Sampling: Sampling{Random: 10000, Overall: 2}}, Request{RequestID: high}, NotTraceable, false},
		{"overall clears", Config{Sampling: Sampling{Overall: 2}}, Request{RequestID: "0000270f-1111-a111-8111-111111111111"}, NotTraceable, true},
		{"not a uuid", full, Request{RequestID: "abc"}, NotTraceable, false},
		{"route sampling replaces", full, Request{RequestID: high, Route: &Sampling{Random: 2, Overall: 10000}}, NotTraceable, false},
		{"route samples", Config{}, Request{RequestID: low, Route: &Sampling{Random: 2, Overall: 10000}}, Sampled, true},
	} {
		var st HCMStats
		got, changed := tc.cfg.Decide(tc.req, &st)
		if got != tc.want || changed != tc.changed {
			t.Errorf("%s: Decide = %v, %v; want %v, %v", tc.name, got, changed, tc.want, tc.changed)
		}
	}
}

// TestTraceparent checks W3C traceparent parsing and formatting round trip and refusals.
func TestTraceparent(t *testing.T) {
	const v = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	c, ok := ParseTraceparent(v)
	if !ok || !c.Sampled || string(c.AppendTraceparent(nil)) != v {
		t.Fatalf("ParseTraceparent(%q) = %+v, %v; want a sampled context that formats back", v, c, ok)
	}
	for _, bad := range []string{"", "01" + v[2:], strings.Replace(v, "0af7", "zzzz", 1), "00-00000000000000000000000000000000-b7ad6b7169203331-01", v + "x"} {
		if _, ok := ParseTraceparent(bad); ok {
			t.Errorf("ParseTraceparent(%q) accepted", bad)
		}
	}
}

// TestFromProtoRefuses checks that the fields Legate does not implement stop the configuration
// with "not implemented by Legate".
func TestFromProtoRefuses(t *testing.T) {
	otel := `provider: {name: envoy.tracers.opentelemetry, typed_config: {"@type": type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig, grpc_service: {envoy_grpc: {cluster_name: c}}%s}}`
	for _, y := range []string{
		"custom_tags: [{tag: a, metadata: {kind: {host: {}}, metadata_key: {key: k, path: [{key: p}]}}}]\n" + strings.Replace(otel, "%s", "", 1),
		`provider: {name: envoy.tracers.zipkin, typed_config: {"@type": type.googleapis.com/envoy.config.trace.v3.ZipkinConfig, collector_cluster: c, collector_endpoint: /api/v2/spans, collector_endpoint_version: HTTP_PROTO}}`,
		`provider: {name: envoy.tracers.datadog, typed_config: {"@type": type.googleapis.com/envoy.config.trace.v3.DatadogConfig, collector_cluster: c, service_name: s}}`,
		strings.Replace(otel, "%s", `, sampler: {name: d, typed_config: {"@type": type.googleapis.com/envoy.extensions.tracers.opentelemetry.samplers.v3.DynatraceSamplerConfig}}`, 1),
		strings.Replace(otel, "%s", `, resource_detectors: [{name: d, typed_config: {"@type": type.googleapis.com/envoy.extensions.tracers.opentelemetry.resource_detectors.v3.DynatraceResourceDetectorConfig}}]`, 1),
		`provider: {name: envoy.tracers.opentelemetry, typed_config: {"@type": type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig, http_service: {http_uri: {uri: "http://x/v1/traces", cluster: c, timeout: 1s}, formatters: [{name: f, typed_config: {"@type": type.googleapis.com/envoy.extensions.tracers.opentelemetry.resource_detectors.v3.EnvironmentResourceDetectorConfig}}]}}}`,
	} {
		var pb hcmv3.HttpConnectionManager_Tracing
		j, err := yaml.YAMLToJSON([]byte(y))
		if err != nil {
			t.Fatal(err)
		}
		if err := protojson.Unmarshal(j, &pb); err != nil {
			t.Fatalf("%s: %v", y, err)
		}
		_, err = FromProto("tracing", &pb, Deps{})
		if err == nil || !strings.Contains(err.Error(), "not implemented by Legate") {
			t.Errorf("%s: FromProto = %v; want not implemented by Legate", y, err)
		}
	}
}

// TestB3 checks the B3 multi and single header forms, and the contexts Begin makes from them
// with and without shared_span_context.
func TestB3(t *testing.T) {
	c := &Config{Format: B3, SharedContext: true}
	h := http.Header{"X-B3-Traceid": {"463ac35c9f6413ad"}, "X-B3-Spanid": {"a2fb4a1d1a96d312"}, "X-B3-Parentspanid": {"0020000000000001"}, "X-B3-Sampled": {"1"}}
	in, ok := c.Extract(h)
	if !ok || !in.Sampled || hex.EncodeToString(in.TraceID[:]) != "0000000000000000463ac35c9f6413ad" || hex.EncodeToString(in.Parent[:]) != "0020000000000001" {
		t.Fatalf("Extract(multi) = %+v, %v", in, ok)
	}
	ctx, parent := c.Begin(in, ok, false)
	if ctx.SpanID != in.SpanID || parent != in.Parent || !ctx.Sampled {
		t.Errorf("shared Begin = %+v parent %x; want the client's span id and parent, sampled by the header", ctx, parent)
	}
	c.SharedContext = false
	ctx, parent = c.Begin(in, ok, false)
	if ctx.SpanID == in.SpanID || parent != in.SpanID {
		t.Errorf("unshared Begin = %+v parent %x; want a new span under the client's", ctx, parent)
	}
	got := map[string]string{}
	c.Inject(ctx, parent, nil, func(k string, v []byte) { got[k] = string(v) })
	if got["X-B3-Traceid"] != "463ac35c9f6413ad" || got["X-B3-Spanid"] != hex.EncodeToString(ctx.SpanID[:]) || got["X-B3-Parentspanid"] != "a2fb4a1d1a96d312" || got["X-B3-Sampled"] != "1" {
		t.Errorf("Inject = %v", got)
	}
	in, ok = c.Extract(http.Header{"B3": {"80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-0-05e3ac9a4f6e3b90"}})
	if !ok || in.Sampled || !in.SampledSet || hex.EncodeToString(in.Parent[:]) != "05e3ac9a4f6e3b90" || hex.EncodeToString(in.TraceID[:]) != "80f198ee56343ba864fe8b2a57d3eff7" {
		t.Errorf("Extract(single) = %+v, %v", in, ok)
	}
	for _, bad := range []string{"1", "x-y", "80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-7"} {
		if _, ok := c.Extract(http.Header{"B3": {bad}}); ok {
			t.Errorf("Extract(b3: %q) accepted", bad)
		}
	}
}

// TestBootstrapProviderIsTheDefault: a connection manager's tracing that names no provider
// uses the bootstrap's tracing.http, as in Envoy; with neither, it is refused.
func TestBootstrapProviderIsTheDefault(t *testing.T) {
	var def tracev3.Tracing_Http
	j, err := yaml.YAMLToJSON([]byte(`{name: envoy.tracers.zipkin, typed_config: {"@type": type.googleapis.com/envoy.config.trace.v3.ZipkinConfig, collector_cluster: c, collector_endpoint: /api/v2/spans, collector_endpoint_version: HTTP_JSON}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := protojson.Unmarshal(j, &def); err != nil {
		t.Fatal(err)
	}
	store, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := FromProto("tracing", &hcmv3.HttpConnectionManager_Tracing{}, Deps{Default: &def, Stats: store})
	if err != nil {
		t.Fatalf("FromProto with the bootstrap's provider: %v", err)
	}
	defer c.Exporter.Close()
	if c.Format != B3 {
		t.Errorf("Format = %v; want B3 (the bootstrap's Zipkin tracer)", c.Format)
	}
	if _, err := FromProto("tracing", &hcmv3.HttpConnectionManager_Tracing{}, Deps{}); err == nil || !strings.Contains(err.Error(), "tracing.provider: required") {
		t.Errorf("FromProto without any provider = %v; want tracing.provider: required", err)
	}
}

// TestSamplers checks the OpenTelemetry samplers: always_on samples everything, the trace id
// ratio sampler reads the id's first 8 bytes as Envoy does (little endian) modulo the
// denominator, and parent_based follows a parent's flag and asks its wrapped sampler for roots.
func TestSamplers(t *testing.T) {
	build := func(y string) Sampler {
		t.Helper()
		var tc corev3.TypedExtensionConfig
		j, err := yaml.YAMLToJSON([]byte(y))
		if err != nil {
			t.Fatal(err)
		}
		if err := protojson.Unmarshal(j, &tc); err != nil {
			t.Fatalf("%s: %v", y, err)
		}
		s, err := newSampler("sampler", &tc)
		if err != nil {
			t.Fatalf("%s: %v", y, err)
		}
		return s
	}
	var low, high [16]byte
	low[0] = 5   // 5 % 100 < 10
	high[0] = 50 // 50 % 100 >= 10
	on := build(`{name: always, typed_config: {"@type": type.googleapis.com/envoy.extensions.tracers.opentelemetry.samplers.v3.AlwaysOnSamplerConfig}}`)
	ratio := build(`{name: r, typed_config: {"@type": type.googleapis.com/envoy.extensions.tracers.opentelemetry.samplers.v3.TraceIdRatioBasedSamplerConfig, sampling_percentage: {numerator: 10}}}`)
	parent := build(`{name: p, typed_config: {"@type": type.googleapis.com/envoy.extensions.tracers.opentelemetry.samplers.v3.ParentBasedSamplerConfig, wrapped_sampler: {name: r, typed_config: {"@type": type.googleapis.com/envoy.extensions.tracers.opentelemetry.samplers.v3.TraceIdRatioBasedSamplerConfig, sampling_percentage: {numerator: 10}}}}}`)
	for _, tc := range []struct {
		name string
		s    Sampler
		id   [16]byte
		p    *Context
		want bool
	}{
		{"always_on", on, high, &Context{}, true},
		{"ratio in", ratio, low, nil, true},
		{"ratio out", ratio, high, nil, false},
		{"parent sampled", parent, high, &Context{Sampled: true}, true},
		{"parent unsampled", parent, low, &Context{}, false},
		{"root by ratio", parent, low, nil, true},
	} {
		var p Context
		if tc.p != nil {
			p = *tc.p
		}
		if got := tc.s(tc.id, p, tc.p != nil); got != tc.want {
			t.Errorf("%s: sampled %v; want %v", tc.name, got, tc.want)
		}
	}
}

// TestResourceDetectors checks the exported Resource: service_name, then the environment
// detector's OTEL_RESOURCE_ATTRIBUTES (percent-decoded) and the static detector's attributes,
// a later detector winning on a shared key; a malformed variable fails the configuration.
func TestResourceDetectors(t *testing.T) {
	y := `{service_name: svc, grpc_service: {envoy_grpc: {cluster_name: c}}, resource_detectors: [
  {name: env, typed_config: {"@type": type.googleapis.com/envoy.extensions.tracers.opentelemetry.resource_detectors.v3.EnvironmentResourceDetectorConfig}},
  {name: static, typed_config: {"@type": type.googleapis.com/envoy.extensions.tracers.opentelemetry.resource_detectors.v3.StaticConfigResourceDetectorConfig, attributes: {region: eu, team: red}}}]}`
	var pb tracev3.OpenTelemetryConfig
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if err := protojson.Unmarshal(j, &pb); err != nil {
		t.Fatal(err)
	}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "OTEL_RESOURCE_ATTRIBUTES" {
				return v
			}
			return ""
		}
	}
	r, err := otelResource("otel", &pb, Deps{Getenv: env("service.name=from%20env, team=blue,zone=z1")})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range r.GetAttributes() {
		got[kv.GetKey()] = kv.GetValue().GetStringValue()
	}
	for k, v := range map[string]string{"service.name": "from env", "team": "red", "zone": "z1", "region": "eu"} {
		if got[k] != v {
			t.Errorf("%s = %q; want %q (all: %v)", k, got[k], v, got)
		}
	}
	if _, err := otelResource("otel", &pb, Deps{Getenv: env("novalue")}); err == nil || !strings.Contains(err.Error(), "novalue") {
		t.Errorf("malformed OTEL_RESOURCE_ATTRIBUTES: err = %v; want it named", err)
	}
}

// TestFromProtoBuildsTheRegisteredTracer checks that the provider comes from the factory
// Deps.Tracers registers for its type, and that a type it lacks is refused naming what it has.
func TestFromProtoBuildsTheRegisteredTracer(t *testing.T) {
	b := registry.NewBuilder()
	var got *tracev3.DatadogConfig
	registry.Add(b, Tracers, "envoy.tracers.datadog", &tracev3.DatadogConfig{}, func(path string, config proto.Message, d Deps) (Provider, error) {
		got = config.(*tracev3.DatadogConfig)
		return Provider{Format: B3}, nil
	})
	r, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	pb := func(y string) *hcmv3.HttpConnectionManager_Tracing {
		var pb hcmv3.HttpConnectionManager_Tracing
		j, err := yaml.YAMLToJSON([]byte(y))
		if err != nil {
			t.Fatal(err)
		}
		if err := protojson.Unmarshal(j, &pb); err != nil {
			t.Fatal(err)
		}
		return &pb
	}
	c, err := FromProto("tracing", pb(`provider: {name: dd, typed_config: {"@type": type.googleapis.com/envoy.config.trace.v3.DatadogConfig, collector_cluster: c, service_name: s}}`), Deps{Tracers: r})
	if err != nil || c.Format != B3 || got.GetServiceName() != "s" {
		t.Fatalf("FromProto = %+v, %v (factory saw %v); want the registered tracer's provider", c, err, got)
	}
	_, err = FromProto("tracing", pb(`provider: {name: envoy.tracers.zipkin, typed_config: {"@type": type.googleapis.com/envoy.config.trace.v3.ZipkinConfig, collector_cluster: c, collector_endpoint: /x}}`), Deps{Tracers: r})
	if want := "only envoy.tracers.datadog are implemented"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("FromProto(zipkin) = %v; want an error containing %q", err, want)
	}
}
