package metricsservice

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	msv3 "github.com/envoyproxy/go-control-plane/envoy/service/metrics/v3"
	prom "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/internal/clock/clocktest"
	"github.com/legateproxy/legate/stats"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// manualClock never moves: the store never ticks and the tests flush it themselves.
func manualClock() *clocktest.Fake { return clocktest.NewFake(time.UnixMilli(1735689600123)) }

// collector is a MetricsService on 127.0.0.1 that hands over every message it receives.
type collector struct {
	msv3.UnimplementedMetricsServiceServer
	msgs chan *msv3.StreamMetricsMessage
	addr string
}

func (c *collector) StreamMetrics(st grpc.ClientStreamingServer[msv3.StreamMetricsMessage, msv3.StreamMetricsResponse]) error {
	for {
		m, err := st.Recv()
		if err != nil {
			return nil
		}
		c.msgs <- m
	}
}

func newCollector(t *testing.T) *collector {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{msgs: make(chan *msv3.StreamMetricsMessage, 64), addr: ln.Addr().String()}
	srv := grpc.NewServer()
	msv3.RegisterMetricsServiceServer(srv, c)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return c
}

func (c *collector) next(t *testing.T) *msv3.StreamMetricsMessage {
	t.Helper()
	select {
	case m := <-c.msgs:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no StreamMetricsMessage within 10s")
		return nil
	}
}

type upstream struct {
	RqTotal  stats.Counter   `stat:"upstream_rq_total"`
	RqRetry  stats.Counter   `stat:"upstream_rq_retry"` // unused: not sent
	CxActive stats.Gauge     `stat:"upstream_cx_active"`
	RqTime   stats.Histogram `stat:"upstream_rq_time,unit=ms"`
}

func config(cluster string, mutate func(*metricsv3.MetricsServiceConfig)) *metricsv3.MetricsServiceConfig {
	pb := &metricsv3.MetricsServiceConfig{
		TransportApiVersion: corev3.ApiVersion_V3,
		GrpcService: &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
			EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: cluster}}},
	}
	if mutate != nil {
		mutate(pb)
	}
	return pb
}

// setup returns a store with the cluster "backend" flushing into a sink streaming to col.
func setup(t *testing.T, col *collector, pb *metricsv3.MetricsServiceConfig) (*stats.Store, *upstream) {
	t.Helper()
	store, err := stats.New(stats.Config{Clock: manualClock(), FlushInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	k, err := New("stats_sinks[0].typed_config", pb, Deps{
		Node: &corev3.Node{Id: "node-1", Cluster: "mesh"},
		Dial: func(ctx context.Context, cluster string) (net.Conn, error) {
			if cluster != "metrics" {
				t.Errorf("dialled cluster %q; want metrics", cluster)
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

func byName(fams []*prom.MetricFamily) map[string][]*prom.MetricFamily {
	m := map[string][]*prom.MetricFamily{}
	for _, f := range fams {
		m[f.GetName()] = append(m[f.GetName()], f)
	}
	return m
}

// TestStreamsMetricFamilies checks the default configuration: the node in the first message
// only, full names without labels, counters as totals, gauges, and each histogram as a
// summary of Envoy's ten quantiles and a histogram of cumulative bucket counts, all stamped
// with the flush time; unused stats are not sent.
func TestStreamsMetricFamilies(t *testing.T) {
	col := newCollector(t)
	store, u := setup(t, col, config("metrics", nil))
	u.RqTotal.Add(3)
	u.CxActive.Set(2)
	u.RqTime.Record(7)  // in the bin [7, 7.1): below the bound 10
	u.RqTime.Record(30) // in [30, 31): below 50
	store.Flush()
	first := col.next(t)
	if got := first.GetIdentifier().GetNode().GetId(); got != "node-1" {
		t.Errorf("first message node id = %q; want node-1", got)
	}
	fams := byName(first.GetEnvoyMetrics())
	if _, ok := fams["cluster.backend.upstream_rq_retry"]; ok {
		t.Error("an unused counter was sent")
	}
	c := fams["cluster.backend.upstream_rq_total"]
	if len(c) != 1 || c[0].GetType() != prom.MetricType_COUNTER || c[0].GetMetric()[0].GetCounter().GetValue() != 3 ||
		c[0].GetMetric()[0].GetTimestampMs() != 1735689600123 || len(c[0].GetMetric()[0].GetLabel()) != 0 {
		t.Errorf("counter family = %v; want one COUNTER 3 at 1735689600123 without labels", c)
	}
	g := fams["cluster.backend.upstream_cx_active"]
	if len(g) != 1 || g[0].GetType() != prom.MetricType_GAUGE || g[0].GetMetric()[0].GetGauge().GetValue() != 2 {
		t.Errorf("gauge family = %v; want one GAUGE 2", g)
	}
	h := fams["cluster.backend.upstream_rq_time"]
	if len(h) != 2 || h[0].GetType() != prom.MetricType_SUMMARY || h[1].GetType() != prom.MetricType_HISTOGRAM {
		t.Fatalf("histogram families = %v; want a SUMMARY then a HISTOGRAM", h)
	}
	sum := h[0].GetMetric()[0].GetSummary()
	if sum.GetSampleCount() != 2 || len(sum.GetQuantile()) != 10 || sum.GetQuantile()[9].GetQuantile() != 1 {
		t.Errorf("summary = %v; want 2 samples and Envoy's 10 quantiles", sum)
	}
	hist := h[1].GetMetric()[0].GetHistogram()
	bounds := u.RqTime.Bounds()
	if hist.GetSampleCount() != 2 || len(hist.GetBucket()) != len(bounds) {
		t.Fatalf("histogram = %v; want 2 samples in %d buckets", hist, len(bounds))
	}
	for i, b := range hist.GetBucket() {
		want := uint64(0)
		if bounds[i] >= 50 {
			want = 2
		} else if bounds[i] >= 10 {
			want = 1
		}
		if b.GetUpperBound() != bounds[i] || b.GetCumulativeCount() != want {
			t.Errorf("bucket %d = %v; want le %v count %d", i, b, bounds[i], want)
		}
	}

	u.RqTotal.Add(2)
	store.Flush()
	second := col.next(t)
	if second.GetIdentifier() != nil {
		t.Error("the second message repeats the identifier")
	}
	if v := byName(second.GetEnvoyMetrics())["cluster.backend.upstream_rq_total"][0].GetMetric()[0].GetCounter().GetValue(); v != 5 {
		t.Errorf("second counter value = %v; want the total 5", v)
	}
}

// TestDeltasLabelsModeAndBatches checks report_counters_as_deltas, emit_tags_as_labels
// (tag-extracted names, tags as labels), histogram_emit_mode HISTOGRAM and batch_size.
func TestDeltasLabelsModeAndBatches(t *testing.T) {
	col := newCollector(t)
	store, u := setup(t, col, config("metrics", func(pb *metricsv3.MetricsServiceConfig) {
		pb.ReportCountersAsDeltas = wrapperspb.Bool(true)
		pb.EmitTagsAsLabels = true
		pb.HistogramEmitMode = metricsv3.HistogramEmitMode_HISTOGRAM
		pb.BatchSize = 2
	}))
	u.RqTotal.Add(3)
	u.CxActive.Set(2)
	u.RqTime.Record(10)
	store.Flush()
	a, b := col.next(t), col.next(t)
	if len(a.GetEnvoyMetrics()) != 2 || len(b.GetEnvoyMetrics()) != 1 || a.GetIdentifier() == nil || b.GetIdentifier() != nil {
		t.Fatalf("batches of %d and %d families; want 2 then 1, the node in the first", len(a.GetEnvoyMetrics()), len(b.GetEnvoyMetrics()))
	}
	fams := byName(append(a.GetEnvoyMetrics(), b.GetEnvoyMetrics()...))
	c := fams["cluster.upstream_rq_total"]
	if len(c) != 1 {
		t.Fatalf("families %v; want cluster.upstream_rq_total", fams)
	}
	labels := c[0].GetMetric()[0].GetLabel()
	if len(labels) != 1 || labels[0].GetName() != "envoy.cluster_name" || labels[0].GetValue() != "backend" {
		t.Errorf("labels = %v; want envoy.cluster_name=backend", labels)
	}
	if h := fams["cluster.upstream_rq_time"]; len(h) != 1 || h[0].GetType() != prom.MetricType_HISTOGRAM {
		t.Errorf("histogram families = %v; want only a HISTOGRAM", h)
	}
	u.RqTotal.Add(2)
	store.Flush()
	m := col.next(t)
	for len(m.GetEnvoyMetrics()) == 0 || m.GetEnvoyMetrics()[0].GetName() != "cluster.upstream_rq_total" {
		m = col.next(t)
	}
	if v := m.GetEnvoyMetrics()[0].GetMetric()[0].GetCounter().GetValue(); v != 2 {
		t.Errorf("second flush counter = %v; want the delta 2", v)
	}
}

// TestConfigErrors checks that unimplemented and invalid options are refused with their path.
func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		pb   *metricsv3.MetricsServiceConfig
		want string
	}{
		{config("metrics", func(pb *metricsv3.MetricsServiceConfig) { pb.TransportApiVersion = corev3.ApiVersion_AUTO }), "stats_sinks[0].typed_config.transport_api_version = AUTO; only V3 is supported"},
		{config("metrics", func(pb *metricsv3.MetricsServiceConfig) {
			pb.GrpcService = &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_GoogleGrpc_{GoogleGrpc: &corev3.GrpcService_GoogleGrpc{}}}
		}), "stats_sinks[0].typed_config.grpc_service: only envoy_grpc is implemented; google_grpc is not implemented by Legate"},
		{config("metrics", func(pb *metricsv3.MetricsServiceConfig) {
			pb.GrpcService.InitialMetadata = []*corev3.HeaderValue{{Key: "k", Value: "v"}}
		}), "stats_sinks[0].typed_config.grpc_service.initial_metadata: not implemented by Legate"},
		{config("nope", nil), `stats_sinks[0].typed_config.grpc_service.envoy_grpc.cluster_name = "nope"; unknown cluster`},
	} {
		_, err := New("stats_sinks[0].typed_config", c.pb, Deps{ClusterExists: func(n string) bool { return n == "metrics" }})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v; want %q", err, c.want)
		}
	}
}
