package httpproxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	coltracev1 "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/tracing"
)

// otlpHTTPReport is one OTLP/HTTP export as a net/http collector received it.
type otlpHTTPReport struct {
	path, contentType, host, auth string
	req                           *coltracev1.ExportTraceServiceRequest
}

// TestOpenTelemetryOverHTTP checks the tracer's http_service: spans reach a real net/http
// OTLP/HTTP collector as protobuf POSTed to the URI's path with its host and the configured
// headers, under a Resource with the static resource detector's attributes; the always_on
// sampler samples a request that random_sampling 0 would not.
func TestOpenTelemetryOverHTTP(t *testing.T) {
	reports := make(chan otlpHTTPReport, 16)
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req coltracev1.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		reports <- otlpHTTPReport{r.URL.Path, r.Header.Get("Content-Type"), r.Host, r.Header.Get("Authorization"), &req}
	}))
	t.Cleanup(col.Close)
	hcm := webHCM + `tracing:
  random_sampling: {value: 0}
  provider:
    name: envoy.tracers.opentelemetry
    typed_config:
      "@type": type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig
      service_name: edge
      http_service:
        http_uri: {uri: "http://otel.example:4318/v1/traces", cluster: otel, timeout: 2s}
        request_headers_to_add:
        - header: {key: authorization, value: "Bearer t0k"}
      resource_detectors:
      - name: envoy.tracers.opentelemetry.resource_detectors.static_config
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.tracers.opentelemetry.resource_detectors.v3.StaticConfigResourceDetectorConfig
          attributes: {deployment.environment: prod}
      sampler:
        name: envoy.tracers.opentelemetry.samplers.always_on
        typed_config: {"@type": type.googleapis.com/envoy.extensions.tracers.opentelemetry.samplers.v3.AlwaysOnSamplerConfig}
`
	var e *env
	e = newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", echoTraceparent(t)), staticCluster("otel", "", col.Listener.Addr().String())},
		hcm:      hcm,
		runtime:  flushEachSpan,
		tracing:  tracing.Deps{Dial: clusterDialer(&e), NodeID: "node-1"},
	})
	resp, _ := e.get(e.client(), "/")
	if tp := resp.Header.Get("X-Seen-Traceparent"); len(tp) != 55 || tp[53:] != "01" {
		t.Errorf("upstream traceparent %q; want a sampled context (always_on)", tp)
	}
	var r otlpHTTPReport
	select {
	case r = <-reports:
	case <-time.After(wait):
		t.Fatal("no OTLP/HTTP export reached the collector")
	}
	if r.path != "/v1/traces" || r.contentType != "application/x-protobuf" || r.host != "otel.example:4318" || r.auth != "Bearer t0k" {
		t.Errorf("export POST %s type %q host %q authorization %q; want /v1/traces, application/x-protobuf, otel.example:4318, Bearer t0k", r.path, r.contentType, r.host, r.auth)
	}
	rs := r.req.GetResourceSpans()
	if len(rs) != 1 || len(rs[0].GetScopeSpans()) != 1 || len(rs[0].GetScopeSpans()[0].GetSpans()) != 1 {
		t.Fatalf("export = %v; want one span", r.req)
	}
	attrs := map[string]string{}
	for _, kv := range rs[0].GetResource().GetAttributes() {
		attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
	}
	if attrs["service.name"] != "edge" || attrs["deployment.environment"] != "prod" {
		t.Errorf("resource %v; want service.name edge and deployment.environment prod", attrs)
	}
	// One exporter goroutine sends batches in turn: once a second export arrives, the first
	// one's answer has been counted.
	e.get(e.client(), "/")
	select {
	case <-reports:
	case <-time.After(wait):
		t.Fatal("no second OTLP/HTTP export reached the collector")
	}
	if got := e.stat("tracing.opentelemetry.spans_sent"); got < 1 {
		t.Errorf("tracing.opentelemetry.spans_sent = %d; want the first export counted", got)
	}
}
