package httpproxy

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	coltracev1 "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"

	"github.com/legateproxy/legate/tracing"
)

// traceCollector is an OTLP TraceService (grpc-go, the generated OTLP service) on 127.0.0.1
// that hands over every span it receives.
type traceCollector struct {
	coltracev1.UnimplementedTraceServiceServer
	spans   chan *tracev1.Span
	service chan string
}

func (c *traceCollector) Export(_ context.Context, req *coltracev1.ExportTraceServiceRequest) (*coltracev1.ExportTraceServiceResponse, error) {
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				select {
				case c.service <- kv.GetValue().GetStringValue():
				default:
				}
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				select {
				case c.spans <- sp:
				default: // benchmarks do not read them
				}
			}
		}
	}
	return &coltracev1.ExportTraceServiceResponse{}, nil
}

func startTraceCollector(t testing.TB) (*traceCollector, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &traceCollector{spans: make(chan *tracev1.Span, 1024), service: make(chan string, 1024)}
	srv := grpc.NewServer()
	coltracev1.RegisterTraceServiceServer(srv, c)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return c, ln.Addr().String()
}

func otelTraceHCM(extra string) string {
	return webHCM + `tracing:
  max_path_tag_length: 6
  custom_tags:
  - {tag: team, literal: {value: blue}}
  - {tag: tenant, request_header: {name: x-tenant, default_value: none}}
  provider:
    name: envoy.tracers.opentelemetry
    typed_config:
      "@type": type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig
      service_name: edge-proxy
      grpc_service: {envoy_grpc: {cluster_name: otel}}
` + extra
}

// flushEachSpan sends every span as soon as it ends (min_flush_spans 1).
func flushEachSpan(key string, def uint64) uint64 {
	if key == "tracing.opentelemetry.min_flush_spans" {
		return 1
	}
	return def
}

func newTraceEnv(t testing.TB, hcm string, runtime func(string, uint64) uint64) (*env, *traceCollector) {
	return newTraceEnvUp(t, hcm, runtime, echoTraceparent(t))
}

func newTraceEnvUp(t testing.TB, hcm string, runtime func(string, uint64) uint64, up string) (*env, *traceCollector) {
	col, addr := startTraceCollector(t)
	var e *env
	e = newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up), staticCluster("otel", "", addr)},
		hcm:      hcm,
		runtime:  runtime,
		tracing:  tracing.Deps{Dial: clusterDialer(&e), NodeID: "node-1", Zone: "z1"},
	})
	return e, col
}

// echoTraceparent is an upstream answering with the traceparent and x-request-id it received.
func echoTraceparent(t testing.TB) string {
	up := echo(t, "a")
	return up.Listener.Addr().String()
}

// TestOpenTelemetryTracing sends a sampled request through a real listener and checks the span
// a real OTLP collector receives (name, kind, Envoy's tags, custom tags, the path cut at
// max_path_tag_length, service.name) and the traceparent the upstream saw: the same trace id,
// the span's id, sampled.
func TestOpenTelemetryTracing(t *testing.T) {
	e, col := newTraceEnv(t, otelTraceHCM(""), flushEachSpan)
	c := e.client()
	resp, _ := e.get(c, "/abcdefgh", "user-agent", "tester", "x-tenant", "t7", "x-envoy-force-trace", "1")
	tp := resp.Header.Get("X-Seen-Traceparent")
	sp := awaitSpan(t, col)
	if got := <-col.service; got != "edge-proxy" {
		t.Errorf("service.name = %q; want edge-proxy", got)
	}
	if sp.GetName() != "ingress" || sp.GetKind() != tracev1.Span_SPAN_KIND_SERVER || len(sp.GetParentSpanId()) != 0 {
		t.Errorf("span %q kind %v parent %x; want a root SERVER span named ingress", sp.GetName(), sp.GetKind(), sp.GetParentSpanId())
	}
	want := "00-" + hex.EncodeToString(sp.GetTraceId()) + "-" + hex.EncodeToString(sp.GetSpanId()) + "-01"
	if tp != want {
		t.Errorf("upstream traceparent = %q; want %q (the span's context, sampled)", tp, want)
	}
	tags := map[string]string{}
	for _, kv := range sp.GetAttributes() {
		tags[kv.GetKey()] = kv.GetValue().GetStringValue()
	}
	rid := resp.Header.Get("X-Seen-Request-Id")
	for k, v := range map[string]string{
		"component": "proxy", "node_id": "node-1", "zone": "z1", "http.url": "http://" + e.addr + "/abcde",
		"http.method": "GET", "user_agent": "tester", "downstream_cluster": "-", "http.protocol": "HTTP/1.1",
		"http.status_code": "200", "response_flags": "-", "upstream_cluster": "web", "upstream_cluster.name": "web",
		"team": "blue", "tenant": "t7", "guid:x-request-id": rid,
	} {
		if tags[k] != v {
			t.Errorf("tag %s = %q; want %q", k, tags[k], v)
		}
	}
	if _, ok := tags["error"]; ok {
		t.Errorf("error tag set on a 200")
	}
	if len(rid) != 36 || rid[14] != 'a' {
		t.Errorf("x-request-id = %q; want a UUID whose 15th character is a (forced)", rid)
	}
	if n := e.stat("http.ingress.tracing.service_forced"); n != 1 {
		t.Errorf("tracing.service_forced = %d; want 1", n)
	}
}

func awaitSpan(t *testing.T, col *traceCollector) *tracev1.Span {
	t.Helper()
	select {
	case sp := <-col.spans:
		return sp
	case <-time.After(wait):
		t.Fatal("no span reached the collector")
	}
	return nil
}

// TestOpenTelemetryParent checks that a request with a sampled W3C parent continues its trace:
// the span has the parent's trace id and span id as parent, and the upstream sees the new span.
func TestOpenTelemetryParent(t *testing.T) {
	e, col := newTraceEnv(t, otelTraceHCM("  random_sampling: {value: 0}\n"), flushEachSpan)
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	resp, _ := e.get(e.client(), "/", "traceparent", parent)
	sp := awaitSpan(t, col)
	if hex.EncodeToString(sp.GetTraceId()) != "0af7651916cd43dd8448eb211c80319c" || hex.EncodeToString(sp.GetParentSpanId()) != "b7ad6b7169203331" {
		t.Errorf("span trace %x parent %x; want the traceparent's", sp.GetTraceId(), sp.GetParentSpanId())
	}
	if got := resp.Header.Get("X-Seen-Traceparent"); !strings.HasPrefix(got, "00-0af7651916cd43dd8448eb211c80319c-"+hex.EncodeToString(sp.GetSpanId())) {
		t.Errorf("upstream traceparent = %q; want the trace with span %x", got, sp.GetSpanId())
	}
}

// TestOpenTelemetrySampledFraction sends requests at random_sampling 50 % and checks that the
// sampled fraction (counted, and the spans exported) follows the request ids' integers.
func TestOpenTelemetrySampledFraction(t *testing.T) {
	e, col := newTraceEnv(t, otelTraceHCM("  random_sampling: {value: 50}\n"), flushEachSpan)
	c := e.client()
	const n = 200
	want := 0
	for range n {
		resp, _ := e.get(c, "/")
		rid := resp.Header.Get("X-Seen-Request-Id")
		if rid[14] == '9' {
			want++
		}
		// Every request carries a context (Envoy's tracers propagate unsampled ones too);
		// its flags say whether it is sampled.
		if tp := resp.Header.Get("X-Seen-Traceparent"); len(tp) != 55 || strings.HasSuffix(tp, "-01") != (rid[14] == '9') {
			t.Fatalf("request id %s, traceparent %q: want a context whose sampled flag follows the id", rid, tp)
		}
	}
	for range want {
		awaitSpan(t, col)
	}
	if got := e.stat("http.ingress.tracing.random_sampling"); got != uint64(want) || want < n/4 || want > 3*n/4 {
		t.Errorf("random_sampling = %d, sampled ids %d of %d; want equal and near half", got, want, n)
	}
	if got := e.stat("http.ingress.tracing.not_traceable"); got != uint64(n-want) {
		t.Errorf("not_traceable = %d; want %d", got, n-want)
	}
}

// zipkinReport is one span of a Zipkin v2 JSON report, as the test receiver decodes it.
type zipkinReport struct {
	TraceID, ID, ParentID, Name, Kind string
	Shared                            bool
	LocalEndpoint                     struct{ ServiceName string }
	Tags                              map[string]string
}

// startZipkin is a Zipkin collector (net/http on 127.0.0.1) handing over every span POSTed as
// JSON to /api/v2/spans.
func startZipkin(t *testing.T) (chan zipkinReport, string) {
	spans := make(chan zipkinReport, 1024)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rep []zipkinReport
		if r.URL.Path != "/api/v2/spans" || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("report %s %s (%s); want POST /api/v2/spans, application/json", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
		}
		if err := json.NewDecoder(r.Body).Decode(&rep); err != nil {
			t.Errorf("report: %v", err)
		}
		for _, sp := range rep {
			spans <- sp
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(srv.Close)
	return spans, srv.Listener.Addr().String()
}

func zipkinHCM(extra string) string {
	return webHCM + `tracing:
  provider:
    name: envoy.tracers.zipkin
    typed_config:
      "@type": type.googleapis.com/envoy.config.trace.v3.ZipkinConfig
      collector_cluster: zipkin
      collector_endpoint: /api/v2/spans
      collector_endpoint_version: HTTP_JSON
` + extra
}

func newZipkinEnv(t *testing.T, hcm string) (*env, chan zipkinReport) {
	spans, addr := startZipkin(t)
	up := echoTraceparent(t)
	var e *env
	e = newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up), staticCluster("zipkin", "", addr)},
		hcm:      hcm,
		runtime: func(key string, def uint64) uint64 {
			return flushEachSpan(strings.Replace(key, "zipkin", "opentelemetry", 1), def)
		},
		tracing: tracing.Deps{Dial: clusterDialer(&e), NodeID: "node-1", LocalCluster: "front"},
	})
	return e, spans
}

func awaitZipkin(t *testing.T, spans chan zipkinReport) zipkinReport {
	t.Helper()
	select {
	case sp := <-spans:
		return sp
	case <-time.After(wait):
		t.Fatal("no span reached the Zipkin receiver")
	}
	return zipkinReport{}
}

// TestZipkinTracing sends a sampled request without context through a real listener and checks
// the span a real Zipkin receiver gets (64-bit trace id, SERVER, named after the request's host
// as Envoy's Zipkin driver names it, node.cluster as
// service name, Envoy's tags) and the B3 headers the upstream saw (the span's ids, sampled).
func TestZipkinTracing(t *testing.T) {
	e, spans := newZipkinEnv(t, zipkinHCM(""))
	resp, _ := e.get(e.client(), "/z", "x-envoy-force-trace", "1")
	sp := awaitZipkin(t, spans)
	if sp.Name != e.addr || sp.Kind != "SERVER" || sp.ParentID != "" || len(sp.TraceID) != 16 || sp.LocalEndpoint.ServiceName != "front" {
		t.Errorf("span = %+v; want a root SERVER span named %s with a 64-bit trace id and service front", sp, e.addr)
	}
	if sp.Tags["http.status_code"] != "200" || sp.Tags["upstream_cluster"] != "web" || sp.Tags["node_id"] != "node-1" || sp.Tags["http.url"] != "http://"+e.addr+"/z" {
		t.Errorf("tags = %v", sp.Tags)
	}
	if resp.Header.Get("X-Seen-X-B3-Traceid") != sp.TraceID || resp.Header.Get("X-Seen-X-B3-Spanid") != sp.ID || resp.Header.Get("X-Seen-X-B3-Sampled") != "1" {
		t.Errorf("upstream B3 = %s/%s/%s; want %s/%s/1", resp.Header.Get("X-Seen-X-B3-Traceid"), resp.Header.Get("X-Seen-X-B3-Spanid"), resp.Header.Get("X-Seen-X-B3-Sampled"), sp.TraceID, sp.ID)
	}
}

// TestZipkinSharedContext checks that a request carrying B3 context (single header) keeps its
// span id with shared_span_context (the default) and gets a child span under it without.
func TestZipkinSharedContext(t *testing.T) {
	const b3 = "80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1-05e3ac9a4f6e3b90"
	for _, tc := range []struct {
		extra        string
		id, parentID string // "" id: a new one
	}{
		{"", "e457b5a2e4d86bd1", "05e3ac9a4f6e3b90"},
		{"      shared_span_context: false\n", "", "e457b5a2e4d86bd1"},
	} {
		e, spans := newZipkinEnv(t, zipkinHCM(tc.extra))
		resp, _ := e.get(e.client(), "/", "b3", b3)
		sp := awaitZipkin(t, spans)
		if sp.TraceID != "80f198ee56343ba864fe8b2a57d3eff7" || sp.ParentID != tc.parentID || (tc.id != "" && sp.ID != tc.id) || (tc.id == "" && sp.ID == "e457b5a2e4d86bd1") {
			t.Errorf("%q: span %s/%s parent %s; want id %q parent %s", tc.extra, sp.TraceID, sp.ID, sp.ParentID, tc.id, tc.parentID)
		}
		if sp.Shared != (tc.id != "") {
			t.Errorf("%q: shared = %v", tc.extra, sp.Shared)
		}
		if got := resp.Header.Get("X-Seen-X-B3-Spanid"); got != sp.ID {
			t.Errorf("%q: upstream x-b3-spanid = %q; want the span's %s", tc.extra, got, sp.ID)
		}
	}
}

// TestOpenTelemetryUpstreamSpan checks spawn_upstream_span: the router's CLIENT span
// "router web egress" is a child of the downstream SERVER span in the same trace, and the
// upstream sees the router span's context in traceparent.
func TestOpenTelemetryUpstreamSpan(t *testing.T) {
	e, col := newTraceEnv(t, otelTraceHCM("  spawn_upstream_span: true\n"), flushEachSpan)
	resp, _ := e.get(e.client(), "/", "x-envoy-force-trace", "1")
	byKind := map[tracev1.Span_SpanKind]*tracev1.Span{}
	for range 2 {
		sp := awaitSpan(t, col)
		byKind[sp.GetKind()] = sp
	}
	down, up := byKind[tracev1.Span_SPAN_KIND_SERVER], byKind[tracev1.Span_SPAN_KIND_CLIENT]
	if down == nil || up == nil {
		t.Fatalf("spans by kind = %v; want one SERVER and one CLIENT", byKind)
	}
	if up.GetName() != "router web egress" || string(up.GetParentSpanId()) != string(down.GetSpanId()) || string(up.GetTraceId()) != string(down.GetTraceId()) {
		t.Errorf("upstream span %q parent %x trace %x; want router web egress under %x in trace %x", up.GetName(), up.GetParentSpanId(), up.GetTraceId(), down.GetSpanId(), down.GetTraceId())
	}
	want := "00-" + hex.EncodeToString(up.GetTraceId()) + "-" + hex.EncodeToString(up.GetSpanId()) + "-01"
	if got := resp.Header.Get("X-Seen-Traceparent"); got != want {
		t.Errorf("upstream traceparent = %q; want the router span's %q", got, want)
	}
}

// TestRouterStartChildSpan checks that the router's start_child_span asks for the upstream span
// as spawn_upstream_span does.
func TestRouterStartChildSpan(t *testing.T) {
	hcm := otelTraceHCM("") + `http_filters:
- name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router, start_child_span: true}
`
	e, col := newTraceEnv(t, hcm, flushEachSpan)
	e.get(e.client(), "/", "x-envoy-force-trace", "1")
	kinds := map[tracev1.Span_SpanKind]string{}
	for range 2 {
		sp := awaitSpan(t, col)
		kinds[sp.GetKind()] = sp.GetName()
	}
	if kinds[tracev1.Span_SPAN_KIND_CLIENT] != "router web egress" || kinds[tracev1.Span_SPAN_KIND_SERVER] != "ingress" {
		t.Errorf("spans = %v; want ingress (SERVER) and router web egress (CLIENT)", kinds)
	}
}
