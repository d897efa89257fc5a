package tracing

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/legateproxy/legate/internal/httpservice"
	"github.com/legateproxy/legate/stats"
)

// ZipkinName and ZipkinTypeURL name the Zipkin provider.
const (
	ZipkinName    = "envoy.tracers.zipkin"
	ZipkinTypeURL = "type.googleapis.com/envoy.config.trace.v3.ZipkinConfig"
	zipkinPrefix  = "tracing.zipkin."
)

// ZipkinStats are Envoy's tracing.zipkin.* counters, and spans_dropped (Legate's: the span
// buffer was full).
type ZipkinStats struct {
	SpansSent      stats.Counter `stat:"spans_sent"`
	TimerFlushed   stats.Counter `stat:"timer_flushed"`
	ReportsSent    stats.Counter `stat:"reports_sent"`
	ReportsDropped stats.Counter `stat:"reports_dropped"`
	ReportsFailed  stats.Counter `stat:"reports_failed"`
	SpansDropped   stats.Counter `stat:"spans_dropped"`
}

// Zipkin posts batches of spans as Zipkin v2 JSON to collector_endpoint on a host of
// collector_cluster, from its own goroutine.
type Zipkin struct {
	batcher
	web     *httpservice.Client
	service string
	store   *stats.Store
	st      *ZipkinStats
}

// NewZipkin starts the exporter of a ZipkinConfig; path names it in errors.
func NewZipkin(path string, pb *tracev3.ZipkinConfig, d Deps) (*Zipkin, error) {
	switch {
	case pb.GetSplitSpansForRequest():
		return nil, fmt.Errorf("%s.split_spans_for_request: not implemented by Legate", path)
	case pb.GetTraceContextOption() != tracev3.ZipkinConfig_USE_B3:
		return nil, fmt.Errorf("%s.trace_context_option = %s: not implemented by Legate (B3 only)", path, pb.GetTraceContextOption())
	case pb.GetTimestampTraceIds():
		return nil, fmt.Errorf("%s.timestamp_trace_ids: not implemented by Legate", path)
	case pb.GetCollectorEndpointVersion() == tracev3.ZipkinConfig_HTTP_PROTO || pb.GetCollectorEndpointVersion() == tracev3.ZipkinConfig_GRPC:
		return nil, fmt.Errorf("%s.collector_endpoint_version = %s: not implemented by Legate (HTTP_JSON only)", path, pb.GetCollectorEndpointVersion())
	}
	hs, hsPath, err := zipkinService(path, pb, d)
	if err != nil {
		return nil, err
	}
	z := &Zipkin{service: d.LocalCluster, store: d.Stats}
	if z.web, err = httpservice.New(hsPath, hs, d.ClusterExists, d.Dial); err != nil {
		return nil, err
	}
	z.st = acquireStats(d.Stats, zipkinPrefix, func() any { return &ZipkinStats{} }).(*ZipkinStats)
	z.batcher = batcher{prefix: zipkinPrefix, runtime: d.Runtime, clock: d.Clock, send: z.send, timerFlushed: &z.st.TimerFlushed, dropped: &z.st.SpansDropped}
	z.start(defaultBuffer)
	return z, nil
}

// zipkinService is where reports go: collector_service, or the legacy collector_cluster,
// collector_endpoint and collector_hostname (the Host, default the cluster's name) in the same
// form, with the tracing.zipkin.request_timeout runtime key as its timeout. hsPath names it in
// errors.
func zipkinService(path string, pb *tracev3.ZipkinConfig, d Deps) (hs *corev3.HttpService, hsPath string, err error) {
	if cs := pb.GetCollectorService(); cs != nil {
		if pb.GetCollectorCluster() != "" || pb.GetCollectorEndpoint() != "" {
			return nil, "", fmt.Errorf("%s: collector_service and collector_cluster/collector_endpoint are both set; set one", path)
		}
		return cs, path + ".collector_service", nil
	}
	cluster := pb.GetCollectorCluster()
	switch {
	case cluster == "":
		return nil, "", fmt.Errorf("%s.collector_cluster: required (or collector_service)", path)
	case d.ClusterExists != nil && !d.ClusterExists(cluster):
		return nil, "", fmt.Errorf("%s.collector_cluster = %q; unknown cluster", path, cluster)
	case !strings.HasPrefix(pb.GetCollectorEndpoint(), "/"):
		return nil, "", fmt.Errorf("%s.collector_endpoint = %q: must be a path", path, pb.GetCollectorEndpoint())
	}
	host := cluster
	if h := pb.GetCollectorHostname(); h != "" {
		host = h
	}
	timeout := 5000 * time.Millisecond
	if d.Runtime != nil {
		timeout = time.Duration(d.Runtime("tracing.zipkin.request_timeout", 5000)) * time.Millisecond
	}
	u := url.URL{Scheme: "http", Host: host}
	u = *u.JoinPath(pb.GetCollectorEndpoint())
	return &corev3.HttpService{HttpUri: &corev3.HttpUri{
		Uri:              u.String(),
		HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: cluster},
		Timeout:          durationpb.New(timeout),
	}}, path, nil
}

// Close sends the spans still queued and stops the exporter.
func (z *Zipkin) Close() {
	z.close(func() {
		z.web.Close()
		releaseStats(z.store, zipkinPrefix)
	})
}

// zipkinSpan is a span in Zipkin's v2 JSON model.
type zipkinSpan struct {
	TraceID       string            `json:"traceId"`
	ID            string            `json:"id"`
	ParentID      string            `json:"parentId,omitempty"`
	Name          string            `json:"name"`
	Kind          string            `json:"kind"`
	Timestamp     int64             `json:"timestamp"`
	Duration      int64             `json:"duration"`
	Shared        bool              `json:"shared,omitempty"`
	LocalEndpoint zipkinEndpoint    `json:"localEndpoint"`
	Annotations   []zipkinNote      `json:"annotations,omitempty"`
	Tags          map[string]string `json:"tags,omitempty"`
}

// zipkinNote is a Zipkin annotation: a verbose span's timing event.
type zipkinNote struct {
	Timestamp int64  `json:"timestamp"`
	Value     string `json:"value"`
}

type zipkinEndpoint struct {
	ServiceName string `json:"serviceName"`
}

// send posts one report; a failed one is lost, as in Envoy, and counted.
func (z *Zipkin) send(batch []*Span) {
	spans := make([]zipkinSpan, len(batch))
	for i, s := range batch {
		zs := zipkinSpan{
			TraceID: string(appendTraceID(nil, s.TraceID)), ID: hex.EncodeToString(s.SpanID[:]),
			Name: s.Name, Kind: "SERVER", Timestamp: s.Start.UnixMicro(), Duration: max(s.End.Sub(s.Start).Microseconds(), 1),
			Shared: s.Shared, LocalEndpoint: zipkinEndpoint{ServiceName: z.service}, Tags: make(map[string]string, len(s.Tags)),
		}
		if s.Client {
			zs.Kind = "CLIENT"
		}
		if s.Parent != [8]byte{} {
			zs.ParentID = hex.EncodeToString(s.Parent[:])
		}
		for _, t := range s.Tags {
			zs.Tags[t.Key] = t.Value
		}
		for _, ev := range s.Events {
			zs.Annotations = append(zs.Annotations, zipkinNote{Timestamp: ev.Time.UnixMicro(), Value: ev.Name})
		}
		spans[i] = zs
	}
	body, err := json.Marshal(spans)
	if err != nil {
		z.st.ReportsFailed.Inc()
		return
	}
	status, err := z.web.Post(context.Background(), "application/json", body)
	if err != nil {
		z.st.ReportsFailed.Inc()
		return
	}
	if status/100 != 2 {
		z.st.ReportsDropped.Inc()
		return
	}
	z.st.ReportsSent.Inc()
	z.st.SpansSent.Add(uint64(len(batch)))
}
