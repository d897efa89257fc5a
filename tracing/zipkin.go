package tracing

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"

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
	client  *http.Client
	url     string
	host    string
	service string
	store   *stats.Store
	st      *ZipkinStats
}

// NewZipkin starts the exporter of a ZipkinConfig; path names it in errors.
func NewZipkin(path string, pb *tracev3.ZipkinConfig, d Deps) (*Zipkin, error) {
	switch {
	case pb.GetCollectorService() != nil:
		return nil, fmt.Errorf("%s.collector_service: not implemented by Legate; use collector_cluster", path)
	case pb.GetSplitSpansForRequest():
		return nil, fmt.Errorf("%s.split_spans_for_request: not implemented by Legate", path)
	case pb.GetTraceContextOption() != tracev3.ZipkinConfig_USE_B3:
		return nil, fmt.Errorf("%s.trace_context_option = %s: not implemented by Legate (B3 only)", path, pb.GetTraceContextOption())
	case pb.GetTimestampTraceIds():
		return nil, fmt.Errorf("%s.timestamp_trace_ids: not implemented by Legate", path)
	case pb.GetCollectorEndpointVersion() == tracev3.ZipkinConfig_HTTP_PROTO || pb.GetCollectorEndpointVersion() == tracev3.ZipkinConfig_GRPC:
		return nil, fmt.Errorf("%s.collector_endpoint_version = %s: not implemented by Legate (HTTP_JSON only)", path, pb.GetCollectorEndpointVersion())
	case pb.GetCollectorCluster() == "":
		return nil, fmt.Errorf("%s.collector_cluster: required", path)
	case d.ClusterExists != nil && !d.ClusterExists(pb.GetCollectorCluster()):
		return nil, fmt.Errorf("%s.collector_cluster = %q; unknown cluster", path, pb.GetCollectorCluster())
	case !strings.HasPrefix(pb.GetCollectorEndpoint(), "/"):
		return nil, fmt.Errorf("%s.collector_endpoint = %q: must be a path", path, pb.GetCollectorEndpoint())
	}
	cluster := pb.GetCollectorCluster()
	z := &Zipkin{
		url: "http://" + cluster + pb.GetCollectorEndpoint(), host: cluster, service: d.LocalCluster, store: d.Stats,
		client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return d.Dial(ctx, cluster) },
		}},
	}
	if h := pb.GetCollectorHostname(); h != "" {
		z.host = h
	}
	z.st = acquireStats(d.Stats, zipkinPrefix, func() any { return &ZipkinStats{} }).(*ZipkinStats)
	z.batcher = batcher{prefix: zipkinPrefix, runtime: d.Runtime, clock: d.Clock, send: z.send, timerFlushed: &z.st.TimerFlushed, dropped: &z.st.SpansDropped}
	if d.Runtime != nil {
		z.client.Timeout = time.Duration(d.Runtime("tracing.zipkin.request_timeout", 5000)) * time.Millisecond
	}
	z.start(defaultBuffer)
	return z, nil
}

// Close sends the spans still queued and stops the exporter.
func (z *Zipkin) Close() {
	z.close(func() {
		z.client.CloseIdleConnections()
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
	Tags          map[string]string `json:"tags,omitempty"`
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
		spans[i] = zs
	}
	body, err := json.Marshal(spans)
	if err != nil {
		z.st.ReportsFailed.Inc()
		return
	}
	req, err := http.NewRequest(http.MethodPost, z.url, bytes.NewReader(body))
	if err != nil {
		z.st.ReportsFailed.Inc()
		return
	}
	req.Host = z.host
	req.Header.Set("Content-Type", "application/json")
	resp, err := z.client.Do(req)
	if err != nil {
		z.st.ReportsFailed.Inc()
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		z.st.ReportsDropped.Inc()
		return
	}
	z.st.ReportsSent.Inc()
	z.st.SpansSent.Add(uint64(len(batch)))
}
