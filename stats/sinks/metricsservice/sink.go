package metricsservice

import (
	"context"
	"fmt"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	msv3 "github.com/envoyproxy/go-control-plane/envoy/service/metrics/v3"
	prom "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"

	"github.com/legateproxy/legate/internal/grpcclient"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/stats/histogram"
)

// Deps are what a sink is built with.
type Deps struct {
	// Node identifies Legate in the first message of each stream.
	Node *corev3.Node
	// Dial connects to a host of the named cluster (with its TLS, if any).
	Dial grpcclient.Dial
	// ClusterExists reports whether the named cluster may be used; nil accepts any.
	ClusterExists func(cluster string) bool
}

// Sink streams each flush to a MetricsService.
type Sink struct {
	node    *corev3.Node
	conn    *grpc.ClientConn
	client  msv3.MetricsServiceClient
	deltas  bool // report_counters_as_deltas
	labels  bool // emit_tags_as_labels
	summary bool // histogram_emit_mode has SUMMARY
	buckets bool // histogram_emit_mode has HISTOGRAM
	batch   int  // batch_size; 0 sends a flush in one message

	mu     sync.Mutex // guards what follows
	stream grpc.ClientStreamingClient[msv3.StreamMetricsMessage, msv3.StreamMetricsResponse]
	cancel context.CancelFunc
	closed bool
}

// New builds the sink of one stats_sinks entry; path names its typed_config in errors.
func New(path string, pb *metricsv3.MetricsServiceConfig, d Deps) (*Sink, error) {
	if v := pb.GetTransportApiVersion(); v != corev3.ApiVersion_V3 {
		return nil, fmt.Errorf("%s.transport_api_version = %s; only V3 is supported", path, v)
	}
	gs := pb.GetGrpcService()
	if len(gs.GetInitialMetadata()) > 0 {
		return nil, fmt.Errorf("%s.grpc_service.initial_metadata: not implemented by Legate", path)
	}
	cluster, authority, err := grpcclient.EnvoyGrpc(path+".grpc_service", gs, d.ClusterExists)
	if err != nil {
		return nil, err
	}
	k := &Sink{node: d.Node, deltas: pb.GetReportCountersAsDeltas().GetValue(), labels: pb.GetEmitTagsAsLabels(), batch: int(pb.GetBatchSize())}
	switch m := pb.GetHistogramEmitMode(); m {
	case metricsv3.HistogramEmitMode_SUMMARY_AND_HISTOGRAM:
		k.summary, k.buckets = true, true
	case metricsv3.HistogramEmitMode_SUMMARY:
		k.summary = true
	case metricsv3.HistogramEmitMode_HISTOGRAM:
		k.buckets = true
	default:
		return nil, fmt.Errorf("%s.histogram_emit_mode = %d; unknown", path, m)
	}
	conn, err := grpcclient.New(cluster, authority, d.Dial)
	if err != nil {
		return nil, fmt.Errorf("%s.grpc_service: %w", path, err)
	}
	k.conn, k.client = conn, msv3.NewMetricsServiceClient(conn)
	return k, nil
}

// Flush sends the snapshot's used stats.
func (k *Sink) Flush(s *stats.Snapshot) {
	families := k.families(s)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed || len(families) == 0 {
		return
	}
	identify := false
	if k.stream == nil {
		ctx, cancel := context.WithCancel(context.Background())
		st, err := k.client.StreamMetrics(ctx)
		if err != nil {
			cancel()
			return // the collector is unreachable: this flush is lost, as in Envoy
		}
		k.stream, k.cancel, identify = st, cancel, true
	}
	for len(families) > 0 {
		n := len(families)
		if k.batch > 0 && n > k.batch {
			n = k.batch
		}
		msg := &msv3.StreamMetricsMessage{EnvoyMetrics: families[:n]}
		if identify {
			msg.Identifier = &msv3.StreamMetricsMessage_Identifier{Node: k.node}
			identify = false
		}
		if err := k.stream.Send(msg); err != nil {
			k.dropStream()
			return
		}
		families = families[n:]
	}
}

func (k *Sink) dropStream() {
	k.cancel()
	k.stream, k.cancel = nil, nil
}

// families converts the used stats of s to MetricFamily messages, in Envoy's order: counters,
// gauges, then each histogram's summary and histogram.
func (k *Sink) families(s *stats.Snapshot) []*prom.MetricFamily {
	ms := s.Time.UnixMilli()
	var out []*prom.MetricFamily
	for i := range s.Counters {
		c := &s.Counters[i]
		if !c.Used {
			continue
		}
		v := c.Value
		if k.deltas {
			v = c.Delta
		}
		m := k.metric(&out, &c.Metric, prom.MetricType_COUNTER, ms)
		m.Counter = &prom.Counter{Value: ptr(float64(v))}
	}
	for i := range s.Gauges {
		if g := &s.Gauges[i]; g.Used {
			k.metric(&out, &g.Metric, prom.MetricType_GAUGE, ms).Gauge = &prom.Gauge{Value: ptr(float64(g.Value))}
		}
	}
	for i := range s.Histograms {
		h := &s.Histograms[i]
		if !h.Used {
			continue
		}
		if k.summary {
			k.metric(&out, &h.Metric, prom.MetricType_SUMMARY, ms).Summary = summary(h.Interval)
		}
		if k.buckets {
			k.metric(&out, &h.Metric, prom.MetricType_HISTOGRAM, ms).Histogram = buckets(h.Interval, h.Bounds)
		}
	}
	return out
}

// metric appends a family of one metric named as the sink names stats and returns the metric.
func (k *Sink) metric(out *[]*prom.MetricFamily, st *stats.Metric, typ prom.MetricType, ms int64) *prom.Metric {
	m := &prom.Metric{TimestampMs: ptr(ms)}
	name := st.Name
	if k.labels {
		name = st.TagExtractedName
		for _, t := range st.Tags {
			m.Label = append(m.Label, &prom.LabelPair{Name: ptr(t.Name), Value: ptr(t.Value)})
		}
	}
	*out = append(*out, &prom.MetricFamily{Name: ptr(name), Type: typ.Enum(), Metric: []*prom.Metric{m}})
	return m
}

func summary(iv *histogram.Snapshot) *prom.Summary {
	qs := histogram.SupportedQuantiles()
	vs := iv.Quantiles(qs)
	s := &prom.Summary{SampleCount: ptr(iv.Count()), SampleSum: ptr(iv.Sum())}
	for i, q := range qs {
		s.Quantile = append(s.Quantile, &prom.Quantile{Quantile: ptr(q), Value: ptr(vs[i])})
	}
	return s
}

func buckets(iv *histogram.Snapshot, bounds []float64) *prom.Histogram {
	counts := iv.CumulativeBuckets(bounds)
	h := &prom.Histogram{SampleCount: ptr(iv.Count()), SampleSum: ptr(iv.Sum())}
	for i, b := range bounds {
		h.Bucket = append(h.Bucket, &prom.Bucket{UpperBound: ptr(b), CumulativeCount: ptr(counts[i])})
	}
	return h
}

func ptr[T any](v T) *T { return &v }

// Close ends the stream and the client connection; later flushes send nothing.
func (k *Sink) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil
	}
	k.closed = true
	if k.stream != nil {
		k.stream.CloseSend()
		k.dropStream()
	}
	return k.conn.Close()
}
