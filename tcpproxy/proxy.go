package tcpproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legateproxy/legate/breaker"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/logging"
	"github.com/legateproxy/legate/pool"
	"github.com/legateproxy/legate/stats"
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
	buffers sync.Pool
}

// New builds a Proxy.
func New(cfg Config) (*Proxy, error) {
	if cfg.Proxy == nil || cfg.Pools == nil {
		return nil, errors.New("tcpproxy: Config.Proxy and Config.Pools are required")
	}
	p := &Proxy{cfg: cfg.Proxy, pools: cfg.Pools, st: cfg.Stats, rand: cfg.Rand, log: cfg.Logger}
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

// Serve proxies down until both directions end; it closes down.
func (p *Proxy) Serve(down net.Conn) {
	st := p.st
	st.DownstreamCxTotal.Inc()
	up, err := p.connect()
	if err != nil {
		p.log.Debugf("tcp_proxy %q: %v", p.cfg.StatPrefix, err)
		down.Close()
		return
	}
	s := &session{p: p, down: down, up: up}
	s.run()
}

var errNoRoute = errors.New("no route")

// connect picks a host and connects, up to max_connect_attempts times.
func (p *Proxy) connect() (*pool.TCPConn, error) {
	name := p.cluster()
	m := p.pools.Get(name)
	if m == nil {
		p.st.DownstreamCxNoRoute.Inc()
		return nil, fmt.Errorf("cluster %q: %w", name, errNoRoute)
	}
	c := m.Cluster()
	var lctx lb.Context
	for attempt := uint32(1); ; attempt++ {
		h, err := c.Pick(&lctx)
		if err != nil {
			c.Stats().UpstreamCxNoneHealthy.Inc()
			return nil, fmt.Errorf("cluster %q: %w", name, err)
		}
		up, err := m.ConnectTCP(context.Background(), h, config.PriorityDefault)
		if err == nil {
			return up, nil
		}
		if errors.Is(err, breaker.ErrOverflow) || attempt >= p.cfg.MaxConnectAttempts {
			if !errors.Is(err, breaker.ErrOverflow) {
				c.Stats().UpstreamCxConnectAttemptsExceeded.Inc()
			}
			return nil, err
		}
		lctx.AddAttempted(h)
	}
}

// session is one proxied connection pair.
type session struct {
	p        *Proxy
	down     net.Conn
	up       *pool.TCPConn
	last     atomic.Int64 // time of the last byte in either direction, UnixNano
	closing  sync.Once
	idle     *time.Timer
	duration *time.Timer
}

func (s *session) run() {
	cfg := s.p.cfg
	s.touch()
	if d := cfg.IdleTimeout; d > 0 {
		s.idle = time.AfterFunc(d, s.checkIdle)
	}
	if d := cfg.MaxDownstreamConnectionDuration; d > 0 {
		s.duration = time.AfterFunc(d, func() {
			s.p.st.MaxDownstreamConnectionDurationReached.Inc()
			s.abort()
		})
	}
	limit := copyBufferSize
	if lc, ok := s.down.(*listener.Conn); ok && lc.BufferLimit() > 0 {
		limit = min(limit, int(lc.BufferLimit()))
	}
	st := s.p.st
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.pipe(s.down, s.up, limit, nil, &st.DownstreamCxTxBytesTotal, &st.DownstreamCxTxBytesBuffered)
	}()
	s.pipe(s.up, s.down, limit, &st.DownstreamCxRxBytesTotal, nil, &st.DownstreamCxRxBytesBuffered)
	<-done
	s.abort()
}

func (s *session) touch() { s.last.Store(time.Now().UnixNano()) }

// checkIdle closes the pair after idle_timeout without traffic, or re-arms the timer.
func (s *session) checkIdle() {
	d := s.p.cfg.IdleTimeout
	since := time.Duration(time.Now().UnixNano() - s.last.Load())
	if since < d {
		s.idle.Reset(d - since)
		return
	}
	s.p.st.IdleTimeout.Inc()
	s.abort()
}

// abort closes both connections once; blocked copies return.
func (s *session) abort() {
	s.closing.Do(func() {
		if s.idle != nil {
			s.idle.Stop()
		}
		if s.duration != nil {
			s.duration.Stop()
		}
		s.down.Close()
		s.up.Close()
	})
}

// pipe copies src to dst. At src's end of stream it half-closes dst; on any error it closes
// both sides. read and written count the bytes read from src and written to dst (either may
// be nil), buffered the bytes held between read and write.
func (s *session) pipe(dst, src net.Conn, limit int, read, written *stats.Counter, buffered *stats.Gauge) {
	bp := s.p.buffers.Get().(*[]byte)
	defer s.p.buffers.Put(bp)
	buf := (*bp)[:limit]
	for {
		n, err := src.Read(buf)
		if n > 0 {
			s.touch()
			if read != nil {
				read.Add(uint64(n))
			}
			buffered.Add(uint64(n))
			w, werr := dst.Write(buf[:n])
			buffered.Sub(uint64(n))
			if written != nil {
				written.Add(uint64(w))
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
// CloseWrite).
func closeWrite(c net.Conn) error {
	if lc, ok := c.(*listener.Conn); ok {
		c = lc.Conn
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}
