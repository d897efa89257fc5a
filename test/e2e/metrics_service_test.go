package e2e

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	msv3 "github.com/envoyproxy/go-control-plane/envoy/service/metrics/v3"
	prom "github.com/prometheus/client_model/go"
	otlplogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	otlpmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	otlpmetricsdata "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/grpc"
)

// metricsCollector is a MetricsService that hands over every message it receives.
type metricsCollector struct {
	msv3.UnimplementedMetricsServiceServer
	msgs chan *msv3.StreamMetricsMessage
}

func (c *metricsCollector) StreamMetrics(st grpc.ClientStreamingServer[msv3.StreamMetricsMessage, msv3.StreamMetricsResponse]) error {
	for {
		m, err := st.Recv()
		if err != nil {
			return nil
		}
		c.msgs <- m
	}
}

// TestMetricsServiceSink runs the binary with an envoy.stat_sinks.metrics_service sink to a
// static cluster in front of a real MetricsService, flushing every 100 ms with counters as
// deltas and tags as labels, and checks that the stream starts with the node and that a
// request's upstream_rq counter arrives as a COUNTER of delta 1 labelled with its cluster and
// response code.
func TestMetricsServiceSink(t *testing.T) {
	col := &metricsCollector{msgs: make(chan *msv3.StreamMetricsMessage, 1024)}
	addr := serveGRPC(t, func(srv *grpc.Server) { msv3.RegisterMetricsServiceServer(srv, col) })
	up := named(t, "up")
	cfg := "node: {id: e2e-metrics, cluster: e2e}\n" + exampleBootstrap(exampleHCM("ingress_http", routeAllToUp, ""), exampleCluster("up", "", addrOf(up)),
		grpcCluster("metrics", addr)) + `
stats_flush_interval: 0.1s
stats_sinks:
- name: envoy.stat_sinks.metrics_service
  typed_config:
    "@type": type.googleapis.com/envoy.config.metrics.v3.MetricsServiceConfig
    transport_api_version: V3
    grpc_service: {envoy_grpc: {cluster_name: metrics}}
    report_counters_as_deltas: true
    emit_tags_as_labels: true
`
	p := start(t, "-c", writeConfig(t, cfg))
	first := true
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-col.msgs:
			if first {
				if got := m.GetIdentifier().GetNode().GetId(); got != "e2e-metrics" {
					t.Fatalf("first message's node id = %q; want e2e-metrics", got)
				}
				first = false
				// The request after the stream is up, so that its delta is in a later flush.
				expectBody(t, noRedirect, "http://"+p.listenerAddr("example")+"/x", http.StatusOK, "up /x")
			}
			for _, f := range m.GetEnvoyMetrics() {
				if f.GetName() != "cluster.upstream_rq" || f.GetType() != prom.MetricType_COUNTER {
					continue
				}
				labels := map[string]string{}
				for _, l := range f.GetMetric()[0].GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["envoy.cluster_name"] == "up" && labels["envoy.response_code"] == "200" && f.GetMetric()[0].GetCounter().GetValue() == 1 {
					return
				}
			}
		case <-deadline:
			t.Fatal("no cluster.upstream_rq COUNTER 1 for cluster up, code 200 within 10s")
		}
	}
}

// otlpCollector is an OTLP MetricsService (the generated OTLP service on grpc-go) that hands
// over every export it receives.
type otlpCollector struct {
	otlpmetrics.UnimplementedMetricsServiceServer
	exports chan *otlpmetrics.ExportMetricsServiceRequest
}

func (c *otlpCollector) Export(_ context.Context, req *otlpmetrics.ExportMetricsServiceRequest) (*otlpmetrics.ExportMetricsServiceResponse, error) {
	c.exports <- req
	return &otlpmetrics.ExportMetricsServiceResponse{}, nil
}

// TestOpenTelemetrySink runs the binary with an envoy.stat_sinks.open_telemetry sink (as Envoy
// Gateway's bootstrap sets it) to a static cluster in front of a real OTLP collector, flushing
// every 100 ms with counters as deltas, and checks that a request's upstream_rq counter
// arrives as a DELTA sum of 1 under its tag-extracted name, with its cluster and response code
// as attributes.
func TestOpenTelemetrySink(t *testing.T) {
	col := &otlpCollector{exports: make(chan *otlpmetrics.ExportMetricsServiceRequest, 1024)}
	addr := serveGRPC(t, func(srv *grpc.Server) { otlpmetrics.RegisterMetricsServiceServer(srv, col) })
	up := named(t, "up")
	cfg := "node: {id: e2e-otel, cluster: e2e}\n" + exampleBootstrap(exampleHCM("ingress_http", routeAllToUp, ""), exampleCluster("up", "", addrOf(up)),
		grpcCluster("otel", addr)) + `
stats_flush_interval: 0.1s
stats_sinks:
- name: envoy.stat_sinks.open_telemetry
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.stat_sinks.open_telemetry.v3.SinkConfig
    grpc_service: {envoy_grpc: {cluster_name: otel}, timeout: 2s}
    report_counters_as_deltas: true
`
	p := start(t, "-c", writeConfig(t, cfg))
	first := true
	deadline := time.After(10 * time.Second)
	for {
		select {
		case req := <-col.exports:
			if first {
				first = false
				// The request after the first export, so that its delta is in a later one.
				expectBody(t, noRedirect, "http://"+p.listenerAddr("example")+"/x", http.StatusOK, "up /x")
			}
			for _, rm := range req.GetResourceMetrics() {
				for _, sm := range rm.GetScopeMetrics() {
					for _, m := range sm.GetMetrics() {
						if m.GetName() != "cluster.upstream_rq" || m.GetSum() == nil {
							continue
						}
						for _, dp := range m.GetSum().GetDataPoints() {
							attrs := map[string]string{}
							for _, a := range dp.GetAttributes() {
								attrs[a.GetKey()] = a.GetValue().GetStringValue()
							}
							if attrs["envoy.cluster_name"] == "up" && attrs["envoy.response_code"] == "200" && dp.GetAsInt() == 1 &&
								m.GetSum().GetAggregationTemporality() == otlpmetricsdata.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA {
								return
							}
						}
					}
				}
			}
		case <-deadline:
			t.Fatal("no cluster.upstream_rq DELTA sum of 1 for cluster up, code 200 within 10s")
		}
	}
}

// otlpLogsCollector is an OTLP LogsService that hands over every export it receives.
type otlpLogsCollector struct {
	otlplogs.UnimplementedLogsServiceServer
	exports chan *otlplogs.ExportLogsServiceRequest
}

func (c *otlpLogsCollector) Export(_ context.Context, req *otlplogs.ExportLogsServiceRequest) (*otlplogs.ExportLogsServiceResponse, error) {
	c.exports <- req
	return &otlplogs.ExportLogsServiceResponse{}, nil
}

// TestOpenTelemetryAccessLog runs the binary with an envoy.access_loggers.open_telemetry access
// log (the shape of Envoy's OpenTelemetry example) to a static HTTP/2 cluster in front of a
// real OTLP logs collector, and checks that a request arrives as a LogRecord whose body and
// attributes are formatted from it, under a Resource naming the node.
func TestOpenTelemetryAccessLog(t *testing.T) {
	col := &otlpLogsCollector{exports: make(chan *otlplogs.ExportLogsServiceRequest, 64)}
	addr := serveGRPC(t, func(srv *grpc.Server) { otlplogs.RegisterLogsServiceServer(srv, col) })
	up := named(t, "up")
	accessLog := `
          access_log:
          - name: envoy.access_loggers.open_telemetry
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.open_telemetry.v3.OpenTelemetryAccessLogConfig
              common_config:
                log_name: otel_envoy_accesslog
                grpc_service: {envoy_grpc: {cluster_name: otel}}
                transport_api_version: V3
                buffer_flush_interval: 0.1s
              body: {string_value: "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL% %RESPONSE_CODE%"}
              attributes:
                values:
                - {key: "x-request-header", value: {string_value: "%REQ(X-TEST)%"}}`
	cfg := "node: {id: e2e-otel-log, cluster: e2e}\n" + exampleBootstrap(exampleHCM("ingress_http", routeAllToUp, accessLog), exampleCluster("up", "", addrOf(up)),
		grpcCluster("otel", addr))
	p := start(t, "-c", writeConfig(t, cfg))
	req, _ := http.NewRequest("GET", "http://"+p.listenerAddr("example")+"/x", nil)
	req.Header.Set("X-Test", "abc")
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case exp := <-col.exports:
		rl := exp.GetResourceLogs()[0]
		res := map[string]string{}
		for _, kv := range rl.GetResource().GetAttributes() {
			res[kv.GetKey()] = kv.GetValue().GetStringValue()
		}
		if res["node_name"] != "e2e-otel-log" || res["cluster_name"] != "e2e" || res["log_name"] != "otel_envoy_accesslog" {
			t.Errorf("resource attributes = %v; want node_name e2e-otel-log, cluster_name e2e, log_name otel_envoy_accesslog", res)
		}
		recs := rl.GetScopeLogs()[0].GetLogRecords()
		if len(recs) != 1 || recs[0].GetBody().GetStringValue() != "GET /x HTTP/1.1 200" {
			t.Fatalf("records = %v; want one with body %q", recs, "GET /x HTTP/1.1 200")
		}
		if a := recs[0].GetAttributes(); len(a) != 1 || a[0].GetKey() != "x-request-header" || a[0].GetValue().GetStringValue() != "abc" {
			t.Errorf("attributes = %v; want x-request-header abc", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no export within 10s")
	}
}

// serveGRPC starts a gRPC server on 127.0.0.1 with the services register adds, stopped when
// the test ends, and returns its address.
func serveGRPC(t *testing.T, register func(*grpc.Server)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	register(srv)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// grpcCluster is a STATIC cluster of one gRPC service at addr, HTTP/2 set the modern way
// (typed_extension_protocol_options).
func grpcCluster(name, addr string) string {
	return exampleCluster(name, `
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}`, addr)
}
