package opentelemetry

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	otelsinkv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/stat_sinks/open_telemetry/v3"
	detectorsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/tracers/opentelemetry/resource_detectors/v3"
	collectorv1 "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	metricsv1 "go.opentelemetry.io/proto/otlp/metrics/v1"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/internal/clock/clocktest"
	"github.com/legateproxy/legate/stats"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// export is one request the collector received, with its metadata.
type export struct {
	req *collectorv1.ExportMetricsServiceRequest
	md  metadata.MD
}

// collector is an OTLP MetricsService on 127.0.0.1 (grpc-go, the generated OTLP service) that
// hands over every export it receives.
type collector struct {
	collectorv1.UnimplementedMetricsServiceServer
	exports chan export
	addr    string
}

func (c *collector) Export(ctx context.Context, req *collectorv1.ExportMetricsServiceRequest) (*collectorv1.ExportMetricsServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	c.exports <- export{req, md}
	return &collectorv1.ExportMetricsServiceResponse{}, nil
}

func newCollector(t *testing.T) *collector {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{exports: make(chan export, 64), addr: ln.Addr().String()}
	srv := grpc.NewServer()
	collectorv1.RegisterMetricsServiceServer(srv, c)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return c
}

func (c *collector) next(t *testing.T) export {
	t.Helper()
	select {
	case e := <-c.exports:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no export within 10s")
		return export{}
	}
}

type upstream struct {
	RqTotal  stats.Counter   `stat:"upstream_rq_total"`
	RqRetry  stats.Counter   `stat:"upstream_rq_retry"` // unused: not sent
	CxActive stats.Gauge     `stat:"upstream_cx_active"`
	RqTime   stats.Histogram `stat:"upstream_rq_time,unit=ms"`
}

func config(cluster string, mutate func(*otelsinkv3.SinkConfig)) *otelsinkv3.SinkConfig {
	pb := &otelsinkv3.SinkConfig{ProtocolSpecifier: &otelsinkv3.SinkConfig_GrpcService{GrpcService: &corev3.GrpcService{
		TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: cluster}},
	}}}
	if mutate != nil {
		mutate(pb)
	}
	return pb
}

var flushTime = time.UnixMilli(1735689600123)

// setup returns a store with the cluster "backend" flushing into a sink exporting to col.
func setup(t *testing.T, col *collector, pb *otelsinkv3.SinkConfig) (*stats.Store, *upstream) {
	t.Helper()
	store, err := stats.New(stats.Config{Clock: clocktest.NewFake(flushTime), FlushInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	k, err := New("stats_sinks[0].typed_config", pb, Deps{
		Dial: func(ctx context.Context, cluster string) (net.Conn, error) {
			if cluster != "otel" {
				t.Errorf("dialled cluster %q; want otel", cluster)
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", col.addr)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	store.AddSink(k)
	u := new(upstream)
	store.Register("cluster.backend.", u)
	return store, u
}

func byName(e export, t *testing.T) map[string]*metricsv1.Metric {
	t.Helper()
	rm := e.req.GetResourceMetrics()
	if len(rm) != 1 || len(rm[0].GetScopeMetrics()) != 1 {
		t.Fatalf("export has %d ResourceMetrics; want one with one ScopeMetrics", len(rm))
	}
	out := map[string]*metricsv1.Metric{}
	for _, m := range rm[0].GetScopeMetrics()[0].GetMetrics() {
		out[m.GetName()] = m
	}
	return out
}

// TestExportsOTLP checks the default configuration against Envoy's shape: tag-extracted names,
// tags as attributes, gauges as int gauges, counters as cumulative monotonic sums, histograms
// with the configured bounds, disjoint counts and an overflow bucket; unused stats not sent;
// points stamped with the flush time.
func TestExportsOTLP(t *testing.T) {
	col := newCollector(t)
	store, u := setup(t, col, config("otel", nil))
	u.RqTotal.Add(3)
	u.CxActive.Set(2)
	u.RqTime.Record(7)       // below the bound 10
	u.RqTime.Record(30)      // below 50
	u.RqTime.Record(4000000) // above the last bound: the overflow bucket
	store.Flush()
	ms := byName(col.next(t), t)
	if _, ok := ms["cluster.upstream_rq_retry"]; ok {
		t.Error("an unused counter was sent")
	}
	c := ms["cluster.upstream_rq_total"].GetSum()
	if c == nil || !c.GetIsMonotonic() || c.GetAggregationTemporality() != metricsv1.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE ||
		len(c.GetDataPoints()) != 1 || c.GetDataPoints()[0].GetAsInt() != 3 {
		t.Fatalf("counter = %v; want a cumulative monotonic sum of 3", ms["cluster.upstream_rq_total"])
	}
	p := c.GetDataPoints()[0]
	if p.GetTimeUnixNano() != uint64(flushTime.UnixNano()) {
		t.Errorf("time_unix_nano = %d; want the flush time %d", p.GetTimeUnixNano(), flushTime.UnixNano())
	}
	if a := p.GetAttributes(); len(a) != 1 || a[0].GetKey() != "envoy.cluster_name" || a[0].GetValue().GetStringValue() != "backend" {
		t.Errorf("attributes = %v; want envoy.cluster_name=backend", a)
	}
	if g := ms["cluster.upstream_cx_active"].GetGauge(); g == nil || g.GetDataPoints()[0].GetAsInt() != 2 {
		t.Errorf("gauge = %v; want 2", ms["cluster.upstream_cx_active"])
	}
	h := ms["cluster.upstream_rq_time"].GetHistogram()
	if h == nil || len(h.GetDataPoints()) != 1 {
		t.Fatalf("histogram = %v; want one point", ms["cluster.upstream_rq_time"])
	}
	hp := h.GetDataPoints()[0]
	bounds := u.RqTime.Bounds()
	if hp.GetCount() != 3 || len(hp.GetExplicitBounds()) != len(bounds) || len(hp.GetBucketCounts()) != len(bounds)+1 {
		t.Fatalf("histogram point = %v; want 3 samples, %d bounds and %d counts", hp, len(bounds), len(bounds)+1)
	}
	var sum uint64
	for i, n := range hp.GetBucketCounts() {
		sum += n
		switch {
		case i < len(bounds) && bounds[i] == 10, i < len(bounds) && bounds[i] == 50, i == len(bounds):
			if n != 1 {
				t.Errorf("bucket %d count %d; want 1", i, n)
			}
		}
	}
	if sum != 3 {
		t.Errorf("bucket counts add to %d; want 3 (disjoint counts)", sum)
	}

	u.RqTotal.Add(2)
	store.Flush()
	if v := byName(col.next(t), t)["cluster.upstream_rq_total"].GetSum().GetDataPoints()[0].GetAsInt(); v != 5 {
		t.Errorf("second flush counter = %d; want the total 5", v)
	}
}

// TestDeltasNamesPrefixAndSplit checks report_counters_as_deltas, report_histograms_as_deltas,
// use_tag_extracted_name false, emit_tags_as_attributes false, prefix,
// max_data_points_per_request and initial_metadata.
func TestDeltasNamesPrefixAndSplit(t *testing.T) {
	col := newCollector(t)
	store, u := setup(t, col, config("otel", func(pb *otelsinkv3.SinkConfig) {
		pb.ReportCountersAsDeltas = true
		pb.ReportHistogramsAsDeltas = true
		pb.UseTagExtractedName = wrapperspb.Bool(false)
		pb.EmitTagsAsAttributes = wrapperspb.Bool(false)
		pb.Prefix = "legate"
		pb.MaxDataPointsPerRequest = 2
		pb.GetGrpcService().InitialMetadata = []*corev3.HeaderValue{{Key: "X-Tenant", Value: "blue"}}
	}))
	u.RqTotal.Add(3)
	u.CxActive.Set(2)
	u.RqTime.Record(10)
	store.Flush()
	a, b := col.next(t), col.next(t)
	if got := a.md.Get("x-tenant"); len(got) != 1 || got[0] != "blue" {
		t.Errorf("metadata x-tenant = %v; want blue", got)
	}
	na := len(a.req.GetResourceMetrics()[0].GetScopeMetrics()[0].GetMetrics())
	nb := len(b.req.GetResourceMetrics()[0].GetScopeMetrics()[0].GetMetrics())
	if na != 2 || nb != 1 {
		t.Fatalf("requests of %d and %d metrics; want 2 then 1", na, nb)
	}
	ms := byName(a, t)
	for k, v := range byName(b, t) {
		ms[k] = v
	}
	c := ms["legate.cluster.backend.upstream_rq_total"]
	if c == nil {
		t.Fatalf("metrics %v; want legate.cluster.backend.upstream_rq_total", ms)
	}
	if c.GetSum().GetAggregationTemporality() != metricsv1.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA || len(c.GetSum().GetDataPoints()[0].GetAttributes()) != 0 {
		t.Errorf("counter = %v; want DELTA without attributes", c)
	}
	if h := ms["legate.cluster.backend.upstream_rq_time"].GetHistogram(); h.GetAggregationTemporality() != metricsv1.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA || h.GetDataPoints()[0].GetCount() != 1 {
		t.Errorf("histogram = %v; want DELTA with the interval's 1 sample", h)
	}
	u.RqTotal.Add(2)
	store.Flush()
	for {
		m := byName(col.next(t), t)["legate.cluster.backend.upstream_rq_total"]
		if m == nil {
			continue
		}
		if v := m.GetSum().GetDataPoints()[0].GetAsInt(); v != 2 {
			t.Errorf("second flush counter = %d; want the delta 2", v)
		}
		break
	}
}

// TestConfigErrors checks that unimplemented and invalid options are refused with their path.
func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		pb   *otelsinkv3.SinkConfig
		want string
	}{
		{&otelsinkv3.SinkConfig{}, "stats_sinks[0].typed_config: one of grpc_service and http_service is required"},
		{&otelsinkv3.SinkConfig{ProtocolSpecifier: &otelsinkv3.SinkConfig_HttpService{HttpService: &corev3.HttpService{}}},
			"stats_sinks[0].typed_config.http_service.http_uri: required"},
		{&otelsinkv3.SinkConfig{ProtocolSpecifier: &otelsinkv3.SinkConfig_HttpService{HttpService: &corev3.HttpService{HttpUri: &corev3.HttpUri{Uri: "http://c/v1/metrics", HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: "nope"}}}}},
			`stats_sinks[0].typed_config.http_service.http_uri.cluster = "nope": unknown cluster`},
		{config("otel", func(pb *otelsinkv3.SinkConfig) {
			pb.ResourceDetectors = []*corev3.TypedExtensionConfig{{Name: "env"}}
		}), "stats_sinks[0].typed_config.resource_detectors[0]: \"env\" (): not implemented by Legate"},
		{config("otel", func(pb *otelsinkv3.SinkConfig) {
			pb.GetGrpcService().TargetSpecifier = &corev3.GrpcService_GoogleGrpc_{GoogleGrpc: &corev3.GrpcService_GoogleGrpc{}}
		}), "stats_sinks[0].typed_config.grpc_service: only envoy_grpc is implemented; google_grpc is not implemented by Legate"},
		{config("nope", nil), `stats_sinks[0].typed_config.grpc_service.envoy_grpc.cluster_name = "nope"; unknown cluster`},
	} {
		_, err := New("stats_sinks[0].typed_config", c.pb, Deps{ClusterExists: func(n string) bool { return n == "otel" }})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v; want %q", err, c.want)
		}
	}
}

// TestExportsOTLPOverHTTP checks http_service: a flush reaches a real net/http OTLP/HTTP
// collector as a protobuf ExportMetricsServiceRequest POSTed to the URI's path, under the
// static resource detector's attributes.
func TestExportsOTLPOverHTTP(t *testing.T) {
	got := make(chan *collectorv1.ExportMetricsServiceRequest, 4)
	paths := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req collectorv1.ExportMetricsServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		paths <- r.URL.Path
		got <- &req
	}))
	t.Cleanup(srv.Close)
	static, err := anypb.New(&detectorsv3.StaticConfigResourceDetectorConfig{Attributes: map[string]string{"host.name": "edge-1"}})
	if err != nil {
		t.Fatal(err)
	}
	pb := &otelsinkv3.SinkConfig{
		ProtocolSpecifier: &otelsinkv3.SinkConfig_HttpService{HttpService: &corev3.HttpService{HttpUri: &corev3.HttpUri{
			Uri: "http://collector:4318/v1/metrics", HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: "otel"}, Timeout: durationpb.New(2 * time.Second),
		}}},
		ResourceDetectors: []*corev3.TypedExtensionConfig{{Name: "static", TypedConfig: static}},
	}
	col := &collector{addr: srv.Listener.Addr().String()}
	store, u := setup(t, col, pb)
	u.RqTotal.Add(3)
	store.Flush()
	var req *collectorv1.ExportMetricsServiceRequest
	select {
	case req = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no OTLP/HTTP export within 10s")
	}
	if p := <-paths; p != "/v1/metrics" {
		t.Errorf("POST %s; want /v1/metrics", p)
	}
	ms := byName(export{req: req}, t)
	if c := ms["cluster.upstream_rq_total"].GetSum(); c == nil || c.GetDataPoints()[0].GetAsInt() != 3 {
		t.Errorf("counter = %v; want 3", ms["cluster.upstream_rq_total"])
	}
	if a := req.GetResourceMetrics()[0].GetResource().GetAttributes(); len(a) != 1 || a[0].GetKey() != "host.name" || a[0].GetValue().GetStringValue() != "edge-1" {
		t.Errorf("resource = %v; want host.name edge-1", a)
	}
}
