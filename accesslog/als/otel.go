package als

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	grpcalsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	otelalsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/open_telemetry/v3"
	collogsv1 "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	logsv1 "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcev1 "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/internal/grpcclient"
	"github.com/legateproxy/legate/internal/httpservice"
	"github.com/legateproxy/legate/internal/otelres"
)

// OTelTypeURL is the typed_config type of an OpenTelemetry access log
// (envoy.access_loggers.open_telemetry).
const OTelTypeURL = "type.googleapis.com/envoy.extensions.access_loggers.open_telemetry.v3.OpenTelemetryAccessLogConfig"

// OTelName is the extension name of the OpenTelemetry access log.
const OTelName = "envoy.access_loggers.open_telemetry"

// otelExportTimeout bounds one Export call, so that a collector that does not answer holds
// at most one batch.
const otelExportTimeout = 5 * time.Second

// OTelLogger sends each entry as an OTLP LogRecord to an OpenTelemetry logs collector
// (opentelemetry.proto.collector.logs.v1.LogsService/Export): the record's time is the
// request's start, its body and attributes are the configured AnyValue and KeyValueList with
// every string formatted as a substitution format string, and custom_tags add attributes.
// Records are buffered like the gRPC access log's entries (buffer_size_bytes, every
// buffer_flush_interval) and exported in unary calls, one at a time, under a Resource with
// Envoy's built-in labels (log_name, zone_name, cluster_name, node_name) unless
// disable_builtin_labels, then resource_attributes.
type OTelLogger struct {
	m        *Manager
	s        settings
	stats    *Stats
	conn     *grpc.ClientConn            // OTLP over gRPC
	client   collogsv1.LogsServiceClient // on conn
	web      *httpservice.Client         // OTLP over HTTP (http_service)
	resource *resourcev1.Resource
	body     *anyFormat // nil: no body
	attrs    []kvFormat

	mu      sync.Mutex // guards pending and size
	pending []*logsv1.LogRecord
	size    int
	// out hands a full batch to run; one batch waits at most (a slow collector drops the rest).
	out chan []*logsv1.LogRecord
}

// anyFormat is an AnyValue whose strings (at any depth) are compiled format strings.
type anyFormat struct {
	fixed *commonv1.AnyValue // a value without strings
	text  *accesslog.Formatter
	list  []*anyFormat // array_value
	kvs   []kvFormat   // kvlist_value
	isKV  bool
}

type kvFormat struct {
	key   string
	value *anyFormat
}

// OTelLogger returns the logger for an OpenTelemetryAccessLogConfig, shared with every
// access_log entry of the same configuration. path names the config in errors.
func (m *Manager) OTelLogger(path string, pb *otelalsv3.OpenTelemetryAccessLogConfig) (*OTelLogger, error) {
	if err := pb.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(pb.GetFormatters()) > 0 {
		return nil, fmt.Errorf("%s.formatters: custom formatter extensions are not implemented by Legate", path)
	}
	cc := otelCommon(pb)
	var s settings
	if pb.GetHttpService() != nil {
		if cc.GetGrpcService() != nil {
			return nil, fmt.Errorf("%s: a gRPC service and http_service are both set; set one", path)
		}
		s = settings{logName: cc.GetLogName(), interval: DefaultBufferFlushInterval, maxBytes: DefaultBufferSizeBytes}
		if err := s.buffering(path, cc); err != nil {
			return nil, err
		}
	} else {
		var err error
		if s, err = settingsFromProto(path, cc, m.cfg.ClusterExists); err != nil {
			return nil, err
		}
	}
	return share(m, path, "otel", pb, func() (*OTelLogger, error) { return m.newOTelLogger(path, s, pb) })
}

// otelCommon merges the logger's own transport and buffer fields, which newer configurations
// set instead of common_config, over common_config.
func otelCommon(pb *otelalsv3.OpenTelemetryAccessLogConfig) *grpcalsv3.CommonGrpcAccessLogConfig {
	cc := proto.Clone(pb.GetCommonConfig()).(*grpcalsv3.CommonGrpcAccessLogConfig)
	if pb.GetCommonConfig() == nil {
		cc = &grpcalsv3.CommonGrpcAccessLogConfig{}
	}
	if gs := pb.GetGrpcService(); gs != nil {
		cc.GrpcService = gs
		cc.TransportApiVersion = corev3.ApiVersion_V3 // the top-level form has no version to choose
	}
	if n := pb.GetLogName(); n != "" {
		cc.LogName = n
	}
	if d := pb.GetBufferFlushInterval(); d != nil {
		cc.BufferFlushInterval = d
	}
	if b := pb.GetBufferSizeBytes(); b != nil {
		cc.BufferSizeBytes = b
	}
	if t := pb.GetCustomTags(); len(t) > 0 {
		cc.CustomTags = t
	}
	return cc
}

func (m *Manager) newOTelLogger(path string, s settings, pb *otelalsv3.OpenTelemetryAccessLogConfig) (*OTelLogger, error) {
	l := &OTelLogger{m: m, s: s, out: make(chan []*logsv1.LogRecord, 1)}
	var err error
	if b := pb.GetBody(); b != nil && b.GetValue() != nil {
		if l.body, err = compileAny(b, path+".body"); err != nil {
			return nil, err
		}
	}
	if l.attrs, err = compileKVs(pb.GetAttributes().GetValues(), path+".attributes"); err != nil {
		return nil, err
	}
	labels := map[string]string{}
	if !pb.GetDisableBuiltinLabels() {
		node := m.cfg.Node
		for _, kv := range [][2]string{{"log_name", s.logName}, {"zone_name", node.GetLocality().GetZone()}, {"cluster_name", node.GetCluster()}, {"node_name", node.GetId()}} {
			labels[kv[0]] = kv[1]
		}
	}
	if l.resource, err = otelres.Build(path, labels, pb.GetResourceDetectors(), nil); err != nil {
		return nil, err
	}
	for _, kv := range pb.GetResourceAttributes().GetValues() {
		l.resource.Attributes = setKV(l.resource.Attributes, kv)
	}
	prefix := "access_logs.open_telemetry_access_log."
	if p := pb.GetStatPrefix(); p != "" {
		prefix += p + "."
	}
	if hs := pb.GetHttpService(); hs != nil {
		if l.web, err = httpservice.New(path+".http_service", hs, m.cfg.ClusterExists, m.cfg.Dial); err != nil {
			return nil, err
		}
		l.s.cluster = l.web.Cluster
	} else {
		if l.conn, err = grpcclient.New(s.cluster, s.authority, m.cfg.Dial); err != nil {
			return nil, err
		}
		l.client = collogsv1.NewLogsServiceClient(l.conn)
	}
	l.stats = m.otelStats(prefix)
	return l, nil
}

// otelStats returns the counters under prefix, registered once per prefix for the Manager's
// life (loggers of the same stat_prefix share them, as Envoy's scope does).
func (m *Manager) otelStats(prefix string) *Stats {
	m.otelMu.Lock()
	defer m.otelMu.Unlock()
	if st := m.otel[prefix]; st != nil {
		return st
	}
	if m.otel == nil {
		m.otel = map[string]*Stats{}
	}
	st := new(Stats)
	m.otel[prefix] = st
	m.otelRegs = append(m.otelRegs, m.cfg.Stats.Register(prefix, st))
	return st
}

func stringKV(k, v string) *commonv1.KeyValue {
	return &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: v}}}
}

// setKV replaces the attribute with kv's key, or appends kv.
func setKV(attrs []*commonv1.KeyValue, kv *commonv1.KeyValue) []*commonv1.KeyValue {
	for i, a := range attrs {
		if a.GetKey() == kv.GetKey() {
			attrs[i] = kv
			return attrs
		}
	}
	return append(attrs, kv)
}

func compileKVs(kvs []*commonv1.KeyValue, path string) ([]kvFormat, error) {
	out := make([]kvFormat, 0, len(kvs))
	for i, kv := range kvs {
		v, err := compileAny(kv.GetValue(), fmt.Sprintf("%s.values[%d]", path, i))
		if err != nil {
			return nil, err
		}
		out = append(out, kvFormat{key: kv.GetKey(), value: v})
	}
	return out, nil
}

func compileAny(v *commonv1.AnyValue, path string) (*anyFormat, error) {
	switch x := v.GetValue().(type) {
	case *commonv1.AnyValue_StringValue:
		f, err := accesslog.ParseText(x.StringValue, accesslog.Options{})
		if err != nil {
			return nil, fmt.Errorf("%s.string_value: %w", path, err)
		}
		return &anyFormat{text: f}, nil
	case *commonv1.AnyValue_ArrayValue:
		a := &anyFormat{}
		for i, e := range x.ArrayValue.GetValues() {
			f, err := compileAny(e, fmt.Sprintf("%s.array_value.values[%d]", path, i))
			if err != nil {
				return nil, err
			}
			a.list = append(a.list, f)
		}
		return a, nil
	case *commonv1.AnyValue_KvlistValue:
		kvs, err := compileKVs(x.KvlistValue.GetValues(), path+".kvlist_value")
		if err != nil {
			return nil, err
		}
		return &anyFormat{kvs: kvs, isKV: true}, nil
	}
	return &anyFormat{fixed: v}, nil
}

// format renders f for e; buf is scratch space.
func (f *anyFormat) format(e *accesslog.Entry, buf *[]byte) *commonv1.AnyValue {
	switch {
	case f.text != nil:
		*buf = f.text.Format((*buf)[:0], e)
		return &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: string(*buf)}}
	case f.isKV:
		return &commonv1.AnyValue{Value: &commonv1.AnyValue_KvlistValue{KvlistValue: &commonv1.KeyValueList{Values: formatKVs(f.kvs, e, buf)}}}
	case f.fixed != nil:
		return f.fixed
	}
	arr := &commonv1.ArrayValue{Values: make([]*commonv1.AnyValue, len(f.list))}
	for i, x := range f.list {
		arr.Values[i] = x.format(e, buf)
	}
	return &commonv1.AnyValue{Value: &commonv1.AnyValue_ArrayValue{ArrayValue: arr}}
}

func formatKVs(kvs []kvFormat, e *accesslog.Entry, buf *[]byte) []*commonv1.KeyValue {
	out := make([]*commonv1.KeyValue, len(kvs))
	for i, kv := range kvs {
		out[i] = &commonv1.KeyValue{Key: kv.key, Value: kv.value.format(e, buf)}
	}
	return out
}

// Log converts e into a LogRecord and buffers it; it never waits on the network.
func (l *OTelLogger) Log(e *accesslog.Entry) {
	var buf []byte
	rec := &logsv1.LogRecord{TimeUnixNano: uint64(e.StartTime.UnixNano())}
	if l.body != nil {
		rec.Body = l.body.format(e, &buf)
	}
	rec.Attributes = formatKVs(l.attrs, e, &buf)
	for _, t := range l.s.tags {
		v := t.fixed
		if t.header != "" {
			if v, _ = accesslog.RequestHeader(e, t.header); v == "" {
				v = t.def
			}
		}
		rec.Attributes = append(rec.Attributes, stringKV(t.name, v))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.size >= max(l.s.maxBytes, 1) && !l.handOffLocked() {
		l.stats.LogsDropped.Inc()
		return
	}
	l.stats.LogsWritten.Inc()
	l.pending = append(l.pending, rec)
	l.size += proto.Size(rec)
	if l.size >= l.s.maxBytes {
		l.handOffLocked()
	}
}

// handOffLocked gives the buffer to run for export; false when run still holds a batch.
func (l *OTelLogger) handOffLocked() bool {
	if len(l.pending) == 0 {
		return true
	}
	select {
	case l.out <- l.pending:
		l.pending, l.size = nil, 0
		return true
	default:
		return false
	}
}

// Flush hands the buffered records to the exporter now (Envoy flushes on its timer).
func (l *OTelLogger) Flush() {
	l.mu.Lock()
	l.handOffLocked()
	l.mu.Unlock()
}

// run exports batches: the ones Log hands over and, every buffer_flush_interval, what is
// buffered.
func (l *OTelLogger) run(ctx context.Context) {
	tick := l.m.cfg.Clock.NewTicker(l.s.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
			l.Flush()
		case batch := <-l.out:
			l.export(ctx, batch)
		}
	}
}

func (l *OTelLogger) export(ctx context.Context, batch []*logsv1.LogRecord) {
	ctx, cancel := context.WithTimeout(ctx, otelExportTimeout)
	defer cancel()
	req := &collogsv1.ExportLogsServiceRequest{ResourceLogs: []*logsv1.ResourceLogs{{
		Resource:  l.resource,
		ScopeLogs: []*logsv1.ScopeLogs{{LogRecords: batch}},
	}}}
	var err error
	if l.web != nil {
		err = l.post(ctx, req)
	} else {
		_, err = l.client.Export(ctx, req)
	}
	if err != nil && ctx.Err() == nil {
		l.m.cfg.Logger.Warnf("als: OpenTelemetry %q to cluster %q: export of %d records failed: %v", l.s.logName, l.s.cluster, len(batch), err)
	}
}

func (l *OTelLogger) close() {
	if l.web != nil {
		l.web.Close()
		return
	}
	l.conn.Close()
}

// post sends req as OTLP/HTTP protobuf to http_service.
func (l *OTelLogger) post(ctx context.Context, req *collogsv1.ExportLogsServiceRequest) error {
	body, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	status, err := l.web.Post(ctx, "application/x-protobuf", body)
	if err == nil && status/100 != 2 {
		err = fmt.Errorf("OTLP/HTTP export answered %d", status)
	}
	return err
}
