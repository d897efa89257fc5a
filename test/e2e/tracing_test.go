package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	otlptrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// traceCollector is an OTLP TraceService (the generated OTLP service on grpc-go) that hands
// over every span it receives.
type traceCollector struct {
	otlptrace.UnimplementedTraceServiceServer
	spans chan *tracev1.Span
}

func (c *traceCollector) Export(_ context.Context, req *otlptrace.ExportTraceServiceRequest) (*otlptrace.ExportTraceServiceResponse, error) {
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				c.spans <- sp
			}
		}
	}
	return &otlptrace.ExportTraceServiceResponse{}, nil
}

// TestOpenTelemetryTracing runs the binary with a listener whose connection manager traces
// every request to a real OTLP collector through a static cluster, and checks that one request
// produces one span, of the trace whose id (and span id) the upstream saw in traceparent.
func TestOpenTelemetryTracing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &traceCollector{spans: make(chan *tracev1.Span, 64)}
	srv := grpc.NewServer()
	otlptrace.RegisterTraceServiceServer(srv, col)
	go srv.Serve(ln)
	defer srv.Stop()
	up := named(t, "up")
	tracing := `
          tracing:
            provider:
              name: envoy.tracers.opentelemetry
              typed_config:
                "@type": type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig
                service_name: e2e
                grpc_service: {envoy_grpc: {cluster_name: otel}, timeout: 2s}`
	cfg := "node: {id: e2e-trace, cluster: e2e}\n" + exampleBootstrap(exampleHCM("ingress_http", routeAllToUp, tracing),
		exampleCluster("up", "", addrOf(up)), exampleCluster("otel", "", ln.Addr().String())) + `
layered_runtime:
  layers:
  - name: static
    static_layer: {tracing: {opentelemetry: {min_flush_spans: 1}}}
`
	p := start(t, "-c", writeConfig(t, cfg))
	_, hdr, _ := fetch(t, noRedirect, http.MethodGet, "http://"+p.listenerAddr("example")+"/traced")
	tp := hdr.Get("X-Seen-Traceparent")
	select {
	case sp := <-col.spans:
		want := "00-" + hex.EncodeToString(sp.GetTraceId()) + "-" + hex.EncodeToString(sp.GetSpanId()) + "-01"
		if tp != want || sp.GetName() != "ingress" {
			t.Errorf("span %q, upstream traceparent %q; want ingress and %q", sp.GetName(), tp, want)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("no span within 15s (upstream traceparent %q)", tp)
	}
	select {
	case sp := <-col.spans:
		t.Errorf("a second span %q; want one", sp.GetName())
	default:
	}
}

// zipkinSpan is the part of a Zipkin v2 JSON span the e2e test checks.
type zipkinSpan struct {
	TraceID, ID, ParentID, Name, Kind string
	LocalEndpoint                     struct{ ServiceName string }
	Tags                              map[string]string
}

// TestZipkinTracing runs the binary with Envoy's Zipkin example shape (the tracer in the
// bootstrap's tracing.http, a connection manager with a tracing block naming no provider, the
// x-b3 headers) against a real net/http Zipkin receiver: a client's sampled B3 context is
// continued (the shared span keeps the client's span id), and the upstream gets B3 headers for
// the same trace.
func TestZipkinTracing(t *testing.T) {
	spans := make(chan zipkinSpan, 16)
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var batch []zipkinSpan
		if r.URL.Path != "/api/v2/spans" || json.NewDecoder(r.Body).Decode(&batch) != nil {
			http.Error(w, "bad report", http.StatusBadRequest)
			return
		}
		for _, sp := range batch {
			spans <- sp
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer rx.Close()
	up := named(t, "up")
	cfg := "node: {id: e2e-zipkin, cluster: front-proxy}\n" + exampleBootstrap(exampleHCM("ingress_http", routeAllToUp, `
          tracing: {}`),
		exampleCluster("up", "", addrOf(up)), exampleCluster("zipkin", "", addrOf(rx))) + `
tracing:
  http:
    name: envoy.tracers.zipkin
    typed_config:
      "@type": type.googleapis.com/envoy.config.trace.v3.ZipkinConfig
      collector_cluster: zipkin
      collector_endpoint: "/api/v2/spans"
      collector_endpoint_version: HTTP_JSON
layered_runtime:
  layers:
  - name: static
    static_layer: {tracing: {zipkin: {min_flush_spans: 1}}}
`
	p := start(t, "-c", writeConfig(t, cfg))
	const trace, client = "463ac35c9f6413ad48485a3953bb6124", "a2fb4a1d1a96d312"
	_, hdr, _ := fetch(t, noRedirect, http.MethodGet, "http://"+p.listenerAddr("example")+"/z",
		"x-b3-traceid", trace, "x-b3-spanid", client, "x-b3-sampled", "1")
	select {
	case sp := <-spans:
		if sp.TraceID != trace || sp.ID != client || sp.Kind != "SERVER" || sp.LocalEndpoint.ServiceName != "front-proxy" || sp.Tags["http.status_code"] != "200" {
			t.Errorf("span %+v; want trace %s, the client's span id %s (shared), SERVER, service front-proxy, status 200", sp, trace, client)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no span reached the Zipkin receiver within 15s")
	}
	if got := hdr.Get("X-Seen-X-B3-Traceid"); got != trace || hdr.Get("X-Seen-X-B3-Sampled") != "1" {
		t.Errorf("upstream x-b3-traceid %q sampled %q; want %s, 1", got, hdr.Get("X-Seen-X-B3-Sampled"), trace)
	}
}
