package e2e

import (
	"context"
	"encoding/hex"
	"net"
	"net/http"
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
