package als

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	grpcalsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	alsv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/internal/grpcclient"
	"github.com/legateproxy/legate/internal/headermatch"
	"github.com/legateproxy/legate/logging"
	"github.com/legateproxy/legate/stats"
)

// TypeURL is the typed_config type of an HTTP gRPC access log (envoy.access_loggers.http_grpc).
const TypeURL = "type.googleapis.com/envoy.extensions.access_loggers.grpc.v3.HttpGrpcAccessLogConfig"

// Name is the extension name of the HTTP gRPC access log.
const Name = "envoy.access_loggers.http_grpc"

// TCPTypeURL is the typed_config type of a TCP gRPC access log (envoy.access_loggers.tcp_grpc).
const TCPTypeURL = "type.googleapis.com/envoy.extensions.access_loggers.grpc.v3.TcpGrpcAccessLogConfig"

// TCPName is the extension name of the TCP gRPC access log.
const TCPName = "envoy.access_loggers.tcp_grpc"

// Defaults of CommonGrpcAccessLogConfig, as in Envoy.
const (
	DefaultBufferSizeBytes     = 16384
	DefaultBufferFlushInterval = time.Second
)

// Stats are Envoy's gRPC access log stats, under access_logs.grpc_access_log.
type Stats struct {
	LogsWritten stats.Counter `stat:"logs_written"`
	LogsDropped stats.Counter `stat:"logs_dropped"`
}

// Config holds a Manager's dependencies. Dial and Stats are required.
type Config struct {
	// Dial connects to a host of the named bootstrap cluster (with its TLS, if any).
	Dial func(ctx context.Context, cluster string) (net.Conn, error)
	// ClusterExists, when set, rejects configurations naming an unknown cluster.
	ClusterExists func(name string) bool
	// Node identifies this proxy in the first message of each stream.
	Node *corev3.Node
	// Stats is the store for access_logs.grpc_access_log.*.
	Stats *stats.Store
	// Logger logs stream failures; nil discards.
	Logger *logging.Logger
	// Clock makes the buffer_flush_interval tickers; nil means the system clock.
	Clock clock.Clock
}

// Manager creates and shares gRPC access loggers (HTTP and TCP) and runs their streams.
//
// Concurrency: safe for concurrent use. mu guards loggers, runCtx, stopped and wg.Add.
type Manager struct {
	cfg   Config
	stats Stats
	reg   *stats.Registration

	mu      sync.Mutex
	loggers map[string]streamer
	runCtx  context.Context
	stopped bool
	wg      sync.WaitGroup

	otelMu   sync.Mutex        // guards otel and otelRegs
	otel     map[string]*Stats // access_logs.open_telemetry_access_log[.<stat_prefix>]. counters
	otelRegs []*stats.Registration
}

// streamer is a logger's stream side, run by the Manager.
type streamer interface {
	run(ctx context.Context)
	close()
}

// NewManager returns a Manager; no stream opens before Run.
func NewManager(cfg Config) (*Manager, error) {
	if cfg.Dial == nil || cfg.Stats == nil {
		return nil, errors.New("als: Dial and Stats are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	m := &Manager{cfg: cfg, loggers: map[string]streamer{}}
	m.reg = cfg.Stats.Register("access_logs.grpc_access_log.", &m.stats)
	return m, nil
}

// Stats returns the access_logs.grpc_access_log.* counters.
func (m *Manager) Stats() *Stats { return &m.stats }

// Run starts the loggers' stream goroutines (and those of loggers made later) and returns
// after ctx ends and every one has returned. Call it once.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.runCtx != nil {
		m.mu.Unlock()
		return errors.New("als: Run called twice")
	}
	m.runCtx = ctx
	for _, l := range m.loggers {
		m.startLocked(l)
	}
	m.mu.Unlock()
	<-ctx.Done()
	m.mu.Lock()
	m.stopped = true
	m.mu.Unlock()
	m.wg.Wait()
	for _, l := range m.loggers {
		l.close()
	}
	m.reg.Unregister()
	m.otelMu.Lock()
	for _, r := range m.otelRegs {
		r.Unregister()
	}
	m.otelMu.Unlock()
	return nil
}

func (m *Manager) startLocked(l streamer) {
	if m.stopped {
		return
	}
	ctx := m.runCtx
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		l.run(ctx)
	}()
}

// HTTPLogger returns the logger for an HttpGrpcAccessLogConfig, shared with every access_log
// entry of the same configuration. path names the config in errors.
func (m *Manager) HTTPLogger(path string, pb *grpcalsv3.HttpGrpcAccessLogConfig) (*HTTPLogger, error) {
	s, err := m.settings(path, pb)
	if err != nil {
		return nil, err
	}
	l, err := share(m, path, "http", pb, func() (*HTTPLogger, error) {
		return m.newHTTPLogger(s, httpSettings{
			reqHeaders: pb.GetAdditionalRequestHeadersToLog(), respHeaders: pb.GetAdditionalResponseHeadersToLog(),
			respTrailers: pb.GetAdditionalResponseTrailersToLog(),
		})
	})
	return l, err
}

// TCPLogger returns the logger for a TcpGrpcAccessLogConfig (envoy.access_loggers.tcp_grpc),
// shared with every access_log entry of the same configuration. path names the config in
// errors.
func (m *Manager) TCPLogger(path string, pb *grpcalsv3.TcpGrpcAccessLogConfig) (*TCPLogger, error) {
	s, err := m.settings(path, pb)
	if err != nil {
		return nil, err
	}
	return share(m, path, "tcp", pb, func() (*TCPLogger, error) { return m.newTCPLogger(s) })
}

// settings validates a logger configuration (its PGV rules, then common_config).
func (m *Manager) settings(path string, pb interface {
	ValidateAll() error
	GetCommonConfig() *grpcalsv3.CommonGrpcAccessLogConfig
}) (settings, error) {
	if err := pb.ValidateAll(); err != nil {
		return settings{}, fmt.Errorf("%s: %v", path, err)
	}
	return settingsFromProto(path, pb.GetCommonConfig(), m.cfg.ClusterExists)
}

// share returns the logger of kind for the configuration pb, making it with build on first
// use and starting its stream when Run is running. As in Envoy's logger cache, an HTTP and a
// TCP logger of the same common_config are distinct.
func share[L streamer](m *Manager, path, kind string, pb proto.Message, build func() (L, error)) (L, error) {
	var zero L
	key, err := proto.MarshalOptions{Deterministic: true}.Marshal(pb)
	if err != nil {
		return zero, fmt.Errorf("%s: %v", path, err)
	}
	k := kind + "/" + string(key)
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.loggers[k].(L); ok {
		return l, nil
	}
	l, err := build()
	if err != nil {
		return zero, fmt.Errorf("%s: %w", path, err)
	}
	m.loggers[k] = l
	if m.runCtx != nil {
		m.startLocked(l)
	}
	return l, nil
}

// settings is a validated CommonGrpcAccessLogConfig.
type settings struct {
	logName, cluster, authority string
	interval                    time.Duration
	maxBytes                    int
	tags                        []customTag
	// stateKeys are filter_state_objects_to_log: the filter state objects each entry
	// carries, packed as their typed form.
	stateKeys []string
}

// customTag is one common_config.custom_tags entry: a fixed value (literal, or environment
// read when the logger is built) or a request header with a default.
type customTag struct {
	name   string
	fixed  string
	header string // headermatch.Key form; "" for fixed values
	def    string
}

// settingsFromProto validates common_config; path names the logger's typed_config.
func settingsFromProto(path string, cc *grpcalsv3.CommonGrpcAccessLogConfig, exists func(string) bool) (settings, error) {
	s := settings{logName: cc.GetLogName(), interval: DefaultBufferFlushInterval, maxBytes: DefaultBufferSizeBytes}
	if cc == nil {
		return s, fmt.Errorf("%s.common_config: is required", path)
	}
	if err := s.grpcTarget(path, cc, exists); err != nil {
		return s, err
	}
	return s, s.buffering(path, cc)
}

// grpcTarget reads common_config's gRPC service: its cluster and authority.
func (s *settings) grpcTarget(path string, cc *grpcalsv3.CommonGrpcAccessLogConfig, exists func(string) bool) error {
	if v := cc.GetTransportApiVersion(); v != corev3.ApiVersion_V3 {
		return fmt.Errorf("%s.common_config.transport_api_version = %s; only V3 is supported", path, v)
	}
	eg := cc.GetGrpcService().GetEnvoyGrpc()
	if eg == nil {
		return fmt.Errorf("%s.common_config.grpc_service: only envoy_grpc is supported", path)
	}
	s.cluster, s.authority = eg.GetClusterName(), eg.GetAuthority()
	if s.authority == "" {
		s.authority = s.cluster
	}
	if exists != nil && !exists(s.cluster) {
		return fmt.Errorf("%s.common_config.grpc_service.envoy_grpc.cluster_name = %q; unknown cluster", path, s.cluster)
	}
	return nil
}

// buffering reads common_config's buffer and custom tags.
func (s *settings) buffering(path string, cc *grpcalsv3.CommonGrpcAccessLogConfig) error {
	if d := cc.GetBufferFlushInterval(); d != nil {
		if s.interval = d.AsDuration(); s.interval <= 0 {
			return fmt.Errorf("%s.common_config.buffer_flush_interval = %v; must be > 0", path, s.interval)
		}
	}
	if b := cc.GetBufferSizeBytes(); b != nil {
		s.maxBytes = int(b.GetValue())
	}
	for i, ct := range cc.GetCustomTags() {
		tag := customTag{name: ct.GetTag()}
		switch {
		case ct.GetLiteral() != nil:
			tag.fixed = ct.GetLiteral().GetValue()
		case ct.GetEnvironment() != nil:
			tag.fixed = ct.GetEnvironment().GetDefaultValue()
			if v, ok := os.LookupEnv(ct.GetEnvironment().GetName()); ok {
				tag.fixed = v
			}
		case ct.GetRequestHeader() != nil:
			tag.header = headermatch.Key(ct.GetRequestHeader().GetName())
			tag.def = ct.GetRequestHeader().GetDefaultValue()
		default:
			return fmt.Errorf("%s.common_config.custom_tags[%d] (%q): only literal, environment and request_header tags are supported", path, i, ct.GetTag())
		}
		s.tags = append(s.tags, tag)
	}
	s.stateKeys = cc.GetFilterStateObjectsToLog()
	return nil
}

// client is the buffer and the stream of one gRPC access log, for entries of type E
// (HTTPAccessLogEntry or TCPAccessLogEntry); HTTPLogger and TCPLogger wrap one. Its methods
// are safe for concurrent use, except run, which the Manager calls once.
type client[E proto.Message] struct {
	m    *Manager
	s    settings
	conn *grpc.ClientConn
	// wrap makes the stream message carrying a batch of entries.
	wrap func([]E) *alsv3.StreamAccessLogsMessage

	mu      sync.Mutex // guards pending and size
	pending []E
	size    int

	// out is the stream goroutine's queue: one message, so a backed-up stream keeps the
	// buffer here (and, once it is full, drops) instead of blocking requests.
	out chan *alsv3.StreamAccessLogsMessage
	// kick asks the stream goroutine to open a stream.
	kick chan struct{}
	// up is set while a stream is open.
	up atomic.Bool
}

func newClient[E proto.Message](m *Manager, s settings, wrap func([]E) *alsv3.StreamAccessLogsMessage) (*client[E], error) {
	conn, err := grpcclient.New(s.cluster, s.authority, m.cfg.Dial)
	if err != nil {
		return nil, err
	}
	return &client[E]{m: m, s: s, conn: conn, wrap: wrap, out: make(chan *alsv3.StreamAccessLogsMessage, 1), kick: make(chan struct{}, 1)}, nil
}

func (l *client[E]) close() { l.conn.Close() }

// dropFull drops an entry, counting logs_dropped, when the buffer is full and no stream is
// up to flush it to (asking for one); the caller then skips converting the entry.
func (l *client[E]) dropFull() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.up.Load() || l.size < max(l.s.maxBytes, 1) {
		return false
	}
	l.flushLocked() // asks for a stream
	l.m.stats.LogsDropped.Inc()
	return true
}

// add buffers a converted entry; it flushes when the buffer reaches buffer_size_bytes, and
// drops the entry (counting logs_dropped) when the buffer is full and cannot be flushed.
func (l *client[E]) add(entry E) {
	st := &l.m.stats
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.canLogMoreLocked() {
		st.LogsDropped.Inc()
		return
	}
	st.LogsWritten.Inc()
	l.pending = append(l.pending, entry)
	l.size += proto.Size(entry)
	if l.size >= l.s.maxBytes {
		l.flushLocked()
	}
}

// canLogMoreLocked reports whether the buffer has room, flushing once when it has not.
func (l *client[E]) canLogMoreLocked() bool {
	limit := max(l.s.maxBytes, 1)
	if l.size < limit {
		return true
	}
	l.flushLocked()
	return l.size < limit
}

// flushLocked hands the buffer to the stream goroutine when a stream is open and its queue has
// room; otherwise the buffer stays, and without a stream one is asked for.
func (l *client[E]) flushLocked() {
	if len(l.pending) == 0 {
		return
	}
	if !l.up.Load() {
		select {
		case l.kick <- struct{}{}:
		default:
		}
		return
	}
	select {
	case l.out <- l.wrap(l.pending):
		l.pending, l.size = nil, 0
	default: // the stream is backed up
	}
}

// Flush sends the buffered entries now if a stream is open (Envoy flushes on its timer).
func (l *client[E]) Flush() {
	l.mu.Lock()
	l.flushLocked()
	l.mu.Unlock()
}

// run owns the logger's stream: it flushes every buffer_flush_interval, opens a stream when a
// flush asks for one, sends queued messages (the first of each stream with the identifier),
// and notices when the service closes the stream.
func (l *client[E]) run(ctx context.Context) {
	tick := l.m.cfg.Clock.NewTicker(l.s.interval)
	defer tick.Stop()
	client := alsv3.NewAccessLogServiceClient(l.conn)
	var (
		st       grpc.ClientStreamingClient[alsv3.StreamAccessLogsMessage, alsv3.StreamAccessLogsResponse]
		cancel   context.CancelFunc
		closed   chan struct{}
		identify bool
	)
	down := func(err error) {
		if st == nil {
			return
		}
		l.up.Store(false)
		cancel()
		<-closed
		st, cancel, closed = nil, nil, nil
		if err != nil && ctx.Err() == nil {
			l.m.cfg.Logger.Warnf("als: %q to cluster %q: stream closed: %v", l.s.logName, l.s.cluster, err)
		}
	}
	defer down(nil)
	for {
		var out chan *alsv3.StreamAccessLogsMessage
		if st != nil {
			out = l.out
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
			l.Flush()
		case <-l.kick:
			if st != nil {
				continue
			}
			sctx, c := context.WithCancel(ctx)
			s, err := client.StreamAccessLogs(sctx)
			if err != nil {
				c()
				l.m.cfg.Logger.Warnf("als: %q to cluster %q: cannot open a stream: %v", l.s.logName, l.s.cluster, err)
				continue
			}
			st, cancel, closed, identify = s, c, make(chan struct{}), true
			go watchStream(s, closed)
			l.up.Store(true)
			l.Flush()
		case <-closed:
			down(errors.New("closed by the service"))
		case msg := <-out:
			if identify {
				msg.Identifier = &alsv3.StreamAccessLogsMessage_Identifier{Node: l.m.cfg.Node, LogName: l.s.logName}
				identify = false
			}
			if err := st.Send(msg); err != nil {
				down(err)
			}
		}
	}
}

// watchStream waits for the service to end the stream (or the stream's context to end).
func watchStream(s grpc.ClientStreamingClient[alsv3.StreamAccessLogsMessage, alsv3.StreamAccessLogsResponse], closed chan struct{}) {
	defer close(closed)
	_ = s.RecvMsg(new(alsv3.StreamAccessLogsResponse))
}
