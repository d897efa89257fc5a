package opentelemetry

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	otelsinkv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/stat_sinks/open_telemetry/v3"
	collectorv1 "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	metricsv1 "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcev1 "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/internal/grpcclient"
	"github.com/legateproxy/legate/internal/httpservice"
	"github.com/legateproxy/legate/internal/otelres"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/stats/histogram"
)

// Deps are what a sink is built with.
type Deps struct {
	// Dial connects to a host of the named cluster (with its TLS, if any).
	Dial grpcclient.Dial
	// ClusterExists reports whether the named cluster may be used; nil accepts any.
	ClusterExists func(cluster string) bool
	// Clock gives the start of the first flush's points; nil means the system clock.
	Clock clock.Clock
	// Getenv reads the environment for the environment resource detector; nil is os.Getenv.
	Getenv func(string) string
}

// Sink exports each flush to an OTLP metrics collector.
type Sink struct {
	conn      *grpc.ClientConn                 // OTLP over gRPC (grpc_service)
	client    collectorv1.MetricsServiceClient // on conn
	web       *httpservice.Client              // OTLP over HTTP (http_service)
	resource  *resourcev1.Resource             // the resource detectors' attributes
	timeout   time.Duration
	counterDt bool     // report_counters_as_deltas
	histDt    bool     // report_histograms_as_deltas
	tags      bool     // emit_tags_as_attributes
	extracted bool     // use_tag_extracted_name
	prefix    string   // prefix and ".", or ""
	maxPoints int      // max_data_points_per_request; 0 is no limit
	metadata  []string // grpc_service.initial_metadata as key, value pairs

	// last is the previous flush's time: the start of the points of this one. Only Flush uses
	// it, and Flush calls do not overlap.
	last time.Time

	mu     sync.Mutex // guards closed
	closed bool
}

// New builds the sink of one stats_sinks entry; path names its typed_config in errors.
func New(path string, pb *otelsinkv3.SinkConfig, d Deps) (*Sink, error) {
	switch {
	case pb.GetCustomMetricConversions() != nil:
		return nil, fmt.Errorf("%s.custom_metric_conversions: not implemented by Legate", path)
	case pb.GetGrpcService() == nil && pb.GetHttpService() == nil:
		return nil, fmt.Errorf("%s: one of grpc_service and http_service is required", path)
	case pb.GetGrpcService() != nil && pb.GetHttpService() != nil:
		return nil, fmt.Errorf("%s: grpc_service and http_service are both set; set one", path)
	}
	if d.Clock == nil {
		d.Clock = clock.Real()
	}
	k := &Sink{
		timeout:   5 * time.Second,
		counterDt: pb.GetReportCountersAsDeltas(),
		histDt:    pb.GetReportHistogramsAsDeltas(),
		tags:      pb.GetEmitTagsAsAttributes() == nil || pb.GetEmitTagsAsAttributes().GetValue(),
		extracted: pb.GetUseTagExtractedName() == nil || pb.GetUseTagExtractedName().GetValue(),
		maxPoints: int(pb.GetMaxDataPointsPerRequest()),
		last:      d.Clock.Now(),
	}
	var err error
	if k.resource, err = otelres.Build(path, nil, pb.GetResourceDetectors(), d.Getenv); err != nil {
		return nil, err
	}
	if hs := pb.GetHttpService(); hs != nil {
		if k.web, err = httpservice.New(path+".http_service", hs, d.ClusterExists, d.Dial); err != nil {
			return nil, err
		}
	} else if err := k.dialGRPC(path, pb.GetGrpcService(), d); err != nil {
		return nil, err
	}
	if p := pb.GetPrefix(); p != "" {
		k.prefix = p + "."
	}
	return k, nil
}

// dialGRPC sets up OTLP over gRPC to grpc_service's cluster.
func (k *Sink) dialGRPC(path string, gs *corev3.GrpcService, d Deps) error {
	cluster, authority, err := grpcclient.EnvoyGrpc(path+".grpc_service", gs, d.ClusterExists)
	if err != nil {
		return err
	}
	for i, h := range gs.GetInitialMetadata() {
		if h.GetKey() == "" {
			return fmt.Errorf("%s.grpc_service.initial_metadata[%d].key: must not be empty", path, i)
		}
		k.metadata = append(k.metadata, strings.ToLower(h.GetKey()), h.GetValue())
	}
	if t := gs.GetTimeout(); t != nil {
		if err := t.CheckValid(); err != nil || t.AsDuration() <= 0 {
			return fmt.Errorf("%s.grpc_service.timeout: must be a positive duration", path)
		}
		k.timeout = t.AsDuration()
	}
	conn, err := grpcclient.New(cluster, authority, d.Dial)
	if err != nil {
		return fmt.Errorf("%s.grpc_service: %w", path, err)
	}
	k.conn, k.client = conn, collectorv1.NewMetricsServiceClient(conn)
	return nil
}

// export sends one request over the configured transport.
func (k *Sink) export(req *collectorv1.ExportMetricsServiceRequest) error {
	if k.web != nil {
		body, err := proto.Marshal(req)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), k.timeout)
		defer cancel()
		status, err := k.web.Post(ctx, "application/x-protobuf", body)
		if err == nil && status/100 != 2 {
			err = fmt.Errorf("OTLP/HTTP export answered %d", status)
		}
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), k.timeout)
	defer cancel()
	if len(k.metadata) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, k.metadata...)
	}
	_, err := k.client.Export(ctx, req)
	return err
}

// Flush exports the snapshot's used stats. A failed export is lost, as in Envoy: the next
// flush sends its own figures (deltas from this flush on).
func (k *Sink) Flush(s *stats.Snapshot) {
	k.mu.Lock()
	closed := k.closed
	k.mu.Unlock()
	start := k.last
	k.last = s.Time
	if closed {
		return
	}
	metrics := k.metrics(s, uint64(start.UnixNano()))
	for len(metrics) > 0 {
		n := len(metrics)
		if k.maxPoints > 0 && n > k.maxPoints {
			n = k.maxPoints // every metric has one point
		}
		req := &collectorv1.ExportMetricsServiceRequest{ResourceMetrics: []*metricsv1.ResourceMetrics{{
			Resource:     k.resource,
			ScopeMetrics: []*metricsv1.ScopeMetrics{{Metrics: metrics[:n]}},
		}}}
		if k.export(req) != nil {
			return
		}
		metrics = metrics[n:]
	}
}

// metrics converts the used stats of s in Envoy's order: gauges, counters, histograms.
func (k *Sink) metrics(s *stats.Snapshot, start uint64) []*metricsv1.Metric {
	now := uint64(s.Time.UnixNano())
	var out []*metricsv1.Metric
	point := func(m *stats.Metric, v uint64) *metricsv1.NumberDataPoint {
		return &metricsv1.NumberDataPoint{
			Attributes: k.attributes(m), StartTimeUnixNano: start, TimeUnixNano: now,
			Value: &metricsv1.NumberDataPoint_AsInt{AsInt: int64(v)},
		}
	}
	for i := range s.Gauges {
		g := &s.Gauges[i]
		if !g.Used {
			continue
		}
		out = append(out, &metricsv1.Metric{Name: k.name(&g.Metric), Data: &metricsv1.Metric_Gauge{Gauge: &metricsv1.Gauge{
			DataPoints: []*metricsv1.NumberDataPoint{point(&g.Metric, g.Value)},
		}}})
	}
	counterT := temporality(k.counterDt)
	for i := range s.Counters {
		c := &s.Counters[i]
		if !c.Used {
			continue
		}
		v := c.Value
		if k.counterDt {
			v = c.Delta
		}
		out = append(out, &metricsv1.Metric{Name: k.name(&c.Metric), Data: &metricsv1.Metric_Sum{Sum: &metricsv1.Sum{
			IsMonotonic: true, AggregationTemporality: counterT,
			DataPoints: []*metricsv1.NumberDataPoint{point(&c.Metric, v)},
		}}})
	}
	histT := temporality(k.histDt)
	for i := range s.Histograms {
		h := &s.Histograms[i]
		if !h.Used {
			continue
		}
		snap := h.Cumulative
		if k.histDt {
			snap = h.Interval
		}
		out = append(out, &metricsv1.Metric{Name: k.name(&h.Metric), Data: &metricsv1.Metric_Histogram{Histogram: &metricsv1.Histogram{
			AggregationTemporality: histT,
			DataPoints:             []*metricsv1.HistogramDataPoint{k.histogramPoint(&h.Metric, snap, h.Bounds, start, now)},
		}}})
	}
	return out
}

func (k *Sink) histogramPoint(m *stats.Metric, snap *histogram.Snapshot, bounds []float64, start, now uint64) *metricsv1.HistogramDataPoint {
	p := &metricsv1.HistogramDataPoint{
		Attributes: k.attributes(m), StartTimeUnixNano: start, TimeUnixNano: now,
		ExplicitBounds: bounds, BucketCounts: make([]uint64, 0, len(bounds)+1),
	}
	if snap == nil {
		p.BucketCounts = append(p.BucketCounts, make([]uint64, len(bounds)+1)...)
		return p
	}
	count, sum := snap.Count(), snap.Sum()
	p.Count, p.Sum = count, &sum
	inBounds := uint64(0)
	for _, c := range snap.DisjointBuckets(bounds) {
		p.BucketCounts = append(p.BucketCounts, c)
		inBounds += c
	}
	// The overflow bucket: samples above the last bound.
	p.BucketCounts = append(p.BucketCounts, count-min(inBounds, count))
	return p
}

func temporality(delta bool) metricsv1.AggregationTemporality {
	if delta {
		return metricsv1.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA
	}
	return metricsv1.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE
}

func (k *Sink) name(m *stats.Metric) string {
	if k.extracted {
		return k.prefix + m.TagExtractedName
	}
	return k.prefix + m.Name
}

func (k *Sink) attributes(m *stats.Metric) []*commonv1.KeyValue {
	if !k.tags || len(m.Tags) == 0 {
		return nil
	}
	out := make([]*commonv1.KeyValue, len(m.Tags))
	for i, t := range m.Tags {
		out[i] = &commonv1.KeyValue{Key: t.Name, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: t.Value}}}
	}
	return out
}

// Close ends the client connection; later flushes send nothing.
func (k *Sink) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil
	}
	k.closed = true
	if k.web != nil {
		k.web.Close()
		return nil
	}
	return k.conn.Close()
}
