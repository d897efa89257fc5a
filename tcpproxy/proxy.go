package tcpproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/breaker"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/filterstate"
	"github.com/legateproxy/legate/internal/proxyproto"
	"github.com/legateproxy/legate/internal/sockopt"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/logging"
	"github.com/legateproxy/legate/overload"
	"github.com/legateproxy/legate/pool"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/tlsutil"
)

// copyBufferSize is the size of each direction's copy buffer, bounded further by the
// listener's per_connection_buffer_limit_bytes.
const copyBufferSize = 32 << 10

// Stats are the tcp.<stat_prefix>.* stats (Envoy's TcpProxyStats). Safe for concurrent use.
//
// The flow-control and upstream-flush stats stay at zero: each direction is a blocking copy,
// so reading pauses whenever the other side is slow without a watermark to cross, and no
// upstream data is left to flush once the downstream has closed.
type Stats struct {
	DownstreamCxTotal                        stats.Counter `stat:"downstream_cx_total"`
	DownstreamCxNoRoute                      stats.Counter `stat:"downstream_cx_no_route"`
	DownstreamCxTxBytesTotal                 stats.Counter `stat:"downstream_cx_tx_bytes_total"`
	DownstreamCxRxBytesTotal                 stats.Counter `stat:"downstream_cx_rx_bytes_total"`
	DownstreamFlowControlPausedReadingTotal  stats.Counter `stat:"downstream_flow_control_paused_reading_total"`
	DownstreamFlowControlResumedReadingTotal stats.Counter `stat:"downstream_flow_control_resumed_reading_total"`
	EarlyDataReceivedCountTotal              stats.Counter `stat:"early_data_received_count_total"`
	IdleTimeout                              stats.Counter `stat:"idle_timeout"`
	MaxDownstreamConnectionDurationReached   stats.Counter `stat:"max_downstream_connection_duration"`
	OnDemandClusterAttempt                   stats.Counter `stat:"on_demand_cluster_attempt"`
	OnDemandClusterMissing                   stats.Counter `stat:"on_demand_cluster_missing"`
	OnDemandClusterSuccess                   stats.Counter `stat:"on_demand_cluster_success"`
	OnDemandClusterTimeout                   stats.Counter `stat:"on_demand_cluster_timeout"`
	UpstreamFlushTotal                       stats.Counter `stat:"upstream_flush_total"`
	DownstreamCxTxBytesBuffered              stats.Gauge   `stat:"downstream_cx_tx_bytes_buffered,accumulate"`
	DownstreamCxRxBytesBuffered              stats.Gauge   `stat:"downstream_cx_rx_bytes_buffered,accumulate"`
	UpstreamFlushActive                      stats.Gauge   `stat:"upstream_flush_active,accumulate"`
}

// Config configures a Proxy.
type Config struct {
	// Proxy is the filter's configuration. Required.
	Proxy *config.TCPProxy
	// Pools gives each cluster's connection pools. Required.
	Pools *pool.Registry
	// Stats are the tcp.<stat_prefix>.* stats; nil means private, unregistered stats.
	Stats *Stats
	// Rand picks among weighted clusters; nil means math/rand/v2.
	Rand func() uint64
	// Logger logs connection failures at debug level; nil discards.
	Logger *logging.Logger
	// AccessLogs builds the filter's access_log entries; the zero value refuses them.
	AccessLogs AccessLogDeps
	// TLS terminates TLS on every downstream connection before it is proxied (the filter
	// chain's DownstreamTlsContext); nil proxies the connection's bytes as they come.
	TLS *tlsutil.ServerContext
	// HandshakeTimeout bounds the TLS handshake; zero means no limit.
	HandshakeTimeout time.Duration
	// Overload is the overload manager's state (nil: none, or the listener bypasses it):
	// reduce_timeouts scales HandshakeTimeout (TRANSPORT_SOCKET_CONNECT).
	Overload *overload.State
}

// Proxy is the envoy.filters.network.tcp_proxy filter: each downstream connection is joined to
// one new upstream connection of the configured (or weighted-chosen) cluster, bytes are copied
// both ways with half-close, and the pair closes on idle_timeout,
// max_downstream_connection_duration, either side's error or the end of both directions. The
// cluster's max_connections circuit breaker bounds the upstream connections; a host failing
// health checks loses its connections when the cluster sets
// close_connections_on_host_health_failure (the pool closes them).
//
// Concurrency: safe for concurrent use; every connection is served on the caller's goroutine
// plus one goroutine for the upstream-to-downstream direction, both ended before Serve
// returns.
type Proxy struct {
	cfg     *config.TCPProxy
	pools   *pool.Registry
	st      *Stats
	rand    func() uint64
	log     *logging.Logger
	logs    []accessLogger
	buffers sync.Pool

	tls              *tlsutil.ServerContext // nil: no TLS termination
	handshakeTimeout time.Duration
	ov               *overload.State
}

// New builds a Proxy.
func New(cfg Config) (*Proxy, error) {
	if cfg.Proxy == nil || cfg.Pools == nil {
		return nil, errors.New("tcpproxy: Config.Proxy and Config.Pools are required")
	}
	logs, err := buildAccessLogs(cfg.Proxy, cfg.AccessLogs)
	if err != nil {
		return nil, err
	}
	p := &Proxy{cfg: cfg.Proxy, pools: cfg.Pools, st: cfg.Stats, rand: cfg.Rand, log: cfg.Logger, logs: logs, tls: cfg.TLS, handshakeTimeout: cfg.HandshakeTimeout, ov: cfg.Overload}
	if p.st == nil {
		p.st = &Stats{}
	}
	if p.rand == nil {
		p.rand = rand.Uint64
	}
	p.buffers.New = func() any {
		b := make([]byte, copyBufferSize)
		return &b
	}
	return p, nil
}

// Stats returns the proxy's stats.
func (p *Proxy) Stats() *Stats { return p.st }

// ServeConn implements listener.FilterChainHandler.
func (p *Proxy) ServeConn(c *listener.Conn) { p.Serve(c) }

// cluster returns the cluster name for a new connection.
func (p *Proxy) cluster() string {
	if p.cfg.WeightedClusters == nil {
		return p.cfg.Cluster
	}
	r := p.rand() % p.cfg.TotalWeight
	for _, w := range p.cfg.WeightedClusters {
		if r < uint64(w.Weight) {
			return w.Name
		}
		r -= uint64(w.Weight)
	}
	return p.cfg.WeightedClusters[len(p.cfg.WeightedClusters)-1].Name
}

// Serve proxies down until both directions end; it closes down. With a TLS context, it
// terminates TLS first and proxies the plain text; a connection whose handshake fails is
// closed without an upstream connection. Each access log gets one TcpConnectionEnd entry when
// the connection closes, and the intermediate entries its access_log_options ask for.
func (p *Proxy) Serve(down net.Conn) {
	st := p.st
	st.DownstreamCxTotal.Inc()
	ci := newConnInfo(down)
	if lc, ok := down.(*listener.Conn); ok {
		ci.filterCluster = lc.UpstreamCluster()
	}
	limit := copyBufferSize
	if lc, ok := down.(*listener.Conn); ok && lc.BufferLimit() > 0 {
		limit = min(limit, int(lc.BufferLimit()))
	}
	if p.cfg.FlushAccessLogOnStart {
		p.accessLog(ci, accesslog.TypeTCPConnectionStart)
	}
	if p.tls != nil {
		tc, info, err := p.handshake(down)
		if err != nil {
			p.log.Debugf("tcp_proxy %q: TLS handshake with %s: %v", p.cfg.StatPrefix, ci.remote, err)
			down.Close()
			p.accessLog(ci, accesslog.TypeTCPConnectionEnd)
			return
		}
		ci.setTLS(info)
		down = tc
	}
	up, err := p.connect(ci)
	if err != nil {
		p.log.Debugf("tcp_proxy %q: %v", p.cfg.StatPrefix, err)
		down.Close()
		p.accessLog(ci, accesslog.TypeTCPConnectionEnd)
		return
	}
	ci.upstreamLocal = addrString(up.LocalAddr())
	if p.cfg.FlushAccessLogOnConnected {
		p.accessLog(ci, accesslog.TypeTCPUpstreamConnected)
	}
	s := &session{p: p, down: down, up: up, info: ci, limit: limit}
	s.run()
	if t, ok := up.(*tunnelConn); ok {
		t.end() // both copies are over: the pooled stream's exchange may end
	}
	p.accessLog(ci, accesslog.TypeTCPConnectionEnd)
}

var errNoRoute = errors.New("no route")

// connect picks a host and connects, up to max_connect_attempts times. It records in ci what
// Envoy's stream info holds for the access log: the cluster, the host attempted, the attempt
// count and the response flags (NC without the cluster, UH without a healthy host, UO on the
// max_connections breaker, UF per failed attempt and URX once they are exhausted).
func (p *Proxy) connect(ci *connInfo) (net.Conn, error) {
	name := ci.filterCluster
	if name == "" {
		name = p.cluster()
	}
	m := p.pools.Get(name)
	if m == nil {
		p.st.DownstreamCxNoRoute.Inc()
		ci.setFlag(accesslog.NoClusterFound)
		return nil, fmt.Errorf("cluster %q: %w", name, errNoRoute)
	}
	ci.cluster = name
	c := m.Cluster()
	lctx := lb.Context{OverrideHost: c.OriginalDst(nil, ci.local, ci.restored)}
	for attempt := uint32(1); ; attempt++ {
		h, err := c.Pick(&lctx)
		if err != nil {
			c.Stats().UpstreamCxNoneHealthy.Inc()
			ci.setFlag(accesslog.NoHealthyUpstream)
			return nil, fmt.Errorf("cluster %q: %w", name, err)
		}
		up, err := p.connectHost(m, h, ci)
		if err == nil {
			ci.host, ci.attempts = h.Address(), attempt
			return up, nil
		}
		if errors.Is(err, breaker.ErrOverflow) {
			// Envoy checks the breaker before it picks a host: no host, no attempt.
			ci.setFlag(accesslog.UpstreamOverflow)
			return nil, err
		}
		ci.host, ci.attempts = h.Address(), attempt
		ci.setFlag(accesslog.UpstreamConnectionFailure)
		if attempt >= p.cfg.MaxConnectAttempts {
			c.Stats().UpstreamCxConnectAttemptsExceeded.Inc()
			ci.setFlag(accesslog.UpstreamRetryLimitExceeded)
			return nil, err
		}
		lctx.AddAttempted(h)
	}
}

// connectHost connects to h, and opens the tunnel on the connection when the proxy has
// tunneling_config. A tunnel that does not open counts as a failed connection attempt.
func (p *Proxy) connectHost(m *pool.Manager, h *host.Host, ci *connInfo) (net.Conn, error) {
	tun := p.cfg.Tunnel
	// An upstream PROXY protocol socket describes the downstream connection, as Envoy's TCP
	// proxy sets its filter state for it.
	ctx := proxyproto.WithDownstream(context.Background(), &ci.downstream)
	// original_src: a connection made for this downstream alone binds to its source.
	own := sockopt.WithSource(ctx, ci.source)
	// The objects the connection shares with its upstream connection (an internal listener's
	// connection inherits them) go with the connections made for it alone.
	own = filterstate.WithUpstream(own, ci.state.Shared())
	if tun == nil {
		return m.ConnectTCP(own, h, config.PriorityDefault)
	}
	if m.AutoHTTP() || m.Protocol(&pool.Request{}) == pool.HTTP2 {
		// A stream of the cluster's HTTP/2 pool: tunnels share its connections, those of
		// downstreams with the same original source (and PROXY protocol state) alike. An
		// auto_config host that speaks HTTP/1.1 gets a connection of its own below.
		t, err := newTunnelRequest(tun, ci).openPooled(m, h, p.cfg.IdleTimeout, ci)
		switch {
		case err == nil:
			return t, nil
		case !errors.Is(err, pool.ErrNegotiatedHTTP1):
			return nil, fmt.Errorf("tunnel to %s: %w", h.Address(), err)
		}
	}
	up, err := m.ConnectALPN(own, h, config.PriorityDefault, tunnelALPN(m))
	if err != nil {
		return nil, err
	}
	ci.host = h.Address()
	st := m.Cluster().Stats()
	st.UpstreamRqTotal.Inc()
	st.UpstreamRqActive.Inc()
	t, err := newTunnelRequest(tun, ci).open(up, tunnelOverH2(m, up), &m.Cluster().Config().HTTP1, p.cfg.IdleTimeout)
	if err != nil {
		st.UpstreamRqActive.Dec()
		up.Close()
		return nil, fmt.Errorf("tunnel to %s: %w", h.Address(), err)
	}
	t.release = st.UpstreamRqActive.Dec
	return t, nil
}

// session is one proxied connection pair.
type session struct {
	p       *Proxy
	down    net.Conn
	up      net.Conn // a pool.TCPConn, or a tunnel over one
	info    *connInfo
	limit   int          // the copy buffer size, per_connection_buffer_limit_bytes at most
	last    atomic.Int64 // time of the last byte in either direction, UnixNano
	closing sync.Once
	closed  atomic.Bool // set by abort
	// The timers of idle_timeout, max_downstream_connection_duration and
	// access_log_flush_interval; atomic because their own callbacks read them.
	idle, duration, flush atomic.Pointer[time.Timer]
}

// arm starts a timer that calls f after d, stored in t before it can fire.
func arm(t *atomic.Pointer[time.Timer], d time.Duration, f func()) {
	// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
	tm := time.AfterFunc(time.Duration(math.MaxInt64), f)
	t.Store(tm)
	tm.Reset(d)
}

func (s *session) run() {
	cfg := s.p.cfg
	s.touch()
	if d := cfg.IdleTimeout; d > 0 {
		arm(&s.idle, d, s.checkIdle)
	}
	if d := cfg.MaxDownstreamConnectionDuration; d > 0 {
		arm(&s.duration, d, func() {
			s.p.st.MaxDownstreamConnectionDurationReached.Inc()
			s.info.setFlag(accesslog.DurationTimeout)
			s.abort()
		})
	}
	if d := cfg.AccessLogFlushInterval; d > 0 && len(s.p.logs) > 0 {
		arm(&s.flush, d, s.periodic)
	}
	limit := s.limit
	st := s.p.st
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.pipe(s.down, s.up, limit, meters{written: &st.DownstreamCxTxBytesTotal, wrote: &s.info.tx, buffered: &st.DownstreamCxTxBytesBuffered})
	}()
	s.pipe(s.up, s.down, limit, meters{read: &st.DownstreamCxRxBytesTotal, got: &s.info.rx, buffered: &st.DownstreamCxRxBytesBuffered})
	<-done
	s.abort()
}

// periodic logs a TcpPeriodic entry and re-arms the access_log_flush_interval timer.
func (s *session) periodic() {
	if s.closed.Load() {
		return
	}
	s.p.accessLog(s.info, accesslog.TypeTCPPeriodic)
	if !s.closed.Load() {
		s.flush.Load().Reset(s.p.cfg.AccessLogFlushInterval)
	}
}

// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
func (s *session) touch() { s.last.Store(time.Now().UnixNano()) }

// checkIdle closes the pair after idle_timeout without traffic, or re-arms the timer.
func (s *session) checkIdle() {
	d := s.p.cfg.IdleTimeout
	// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
	since := time.Duration(time.Now().UnixNano() - s.last.Load())
	if since < d {
		s.idle.Load().Reset(d - since)
		return
	}
	s.p.st.IdleTimeout.Inc()
	s.abort()
}

// abort closes both connections once; blocked copies return.
func (s *session) abort() {
	s.closing.Do(func() {
		s.closed.Store(true)
		for _, t := range []*atomic.Pointer[time.Timer]{&s.idle, &s.duration, &s.flush} {
			if tm := t.Load(); tm != nil {
				tm.Stop()
			}
		}
		s.down.Close()
		s.up.Close()
	})
}

// meters are where pipe counts bytes; any may be nil. read and got count the bytes read
// from src, written and wrote those written to dst, buffered those held in between.
type meters struct {
	read, written *stats.Counter
	got, wrote    *atomic.Uint64
	buffered      *stats.Gauge
}

// pipe copies src to dst. At src's end of stream it half-closes dst; on any error it closes
// both sides.
func (s *session) pipe(dst, src net.Conn, limit int, m meters) {
	bp := s.p.buffers.Get().(*[]byte)
	defer s.p.buffers.Put(bp)
	buf := (*bp)[:limit]
	for {
		n, err := src.Read(buf)
		if n > 0 {
			s.touch()
			if m.read != nil {
				m.read.Add(uint64(n))
			}
			if m.got != nil {
				m.got.Add(uint64(n))
			}
			m.buffered.Add(uint64(n))
			w, werr := dst.Write(buf[:n])
			m.buffered.Sub(uint64(n))
			if m.written != nil {
				m.written.Add(uint64(w))
			}
			if m.wrote != nil {
				m.wrote.Add(uint64(w))
			}
			if werr != nil {
				s.abort()
				return
			}
		}
		if err == io.EOF {
			if closeWrite(dst) != nil {
				s.abort()
			}
			return
		}
		if err != nil {
			s.abort()
			return
		}
	}
}

// closeWrite half-closes c (a listener.Conn's socket, a pool.TCPConn, or any conn with
// CloseWrite; a TLS connection sends its close_notify).
func closeWrite(c net.Conn) error {
	if lc, ok := c.(*listener.Conn); ok {
		c = lc.Conn
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}
