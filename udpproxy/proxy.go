package udpproxy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/breaker"
	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/logging"
	"github.com/legateproxy/legate/stats"
)

// msgTrunc is the flag of a datagram the kernel truncated to the read buffer.
const msgTrunc = syscall.MSG_TRUNC

// Stats are udp.<stat_prefix>.* (Envoy's UdpProxyDownstreamStats).
type Stats struct {
	DownstreamSessNoRoute     stats.Counter `stat:"downstream_sess_no_route"`
	DownstreamSessRxBytes     stats.Counter `stat:"downstream_sess_rx_bytes"`
	DownstreamSessRxDatagrams stats.Counter `stat:"downstream_sess_rx_datagrams"`
	DownstreamSessRxErrors    stats.Counter `stat:"downstream_sess_rx_errors"`
	DownstreamSessTotal       stats.Counter `stat:"downstream_sess_total"`
	DownstreamSessTxBytes     stats.Counter `stat:"downstream_sess_tx_bytes"`
	DownstreamSessTxDatagrams stats.Counter `stat:"downstream_sess_tx_datagrams"`
	DownstreamSessTxErrors    stats.Counter `stat:"downstream_sess_tx_errors"`
	IdleTimeout               stats.Counter `stat:"idle_timeout"`
	DownstreamSessActive      stats.Gauge   `stat:"downstream_sess_active,accumulate"`
}

// ClusterStats are cluster.<name>.udp.* (Envoy's UdpProxyUpstreamStats).
type ClusterStats struct {
	SessRxDatagrams        stats.Counter `stat:"sess_rx_datagrams"`
	SessRxDatagramsDropped stats.Counter `stat:"sess_rx_datagrams_dropped"`
	SessRxErrors           stats.Counter `stat:"sess_rx_errors"`
	SessTxDatagrams        stats.Counter `stat:"sess_tx_datagrams"`
	SessTxErrors           stats.Counter `stat:"sess_tx_errors"`
}

// Clusters finds a cluster by name (cluster.Manager).
type Clusters interface {
	Get(name string) *cluster.Cluster
}

// Options are what a Proxy needs besides its Config.
type Options struct {
	// Clusters finds the upstream cluster. Required.
	Clusters Clusters
	// Clock times idle sessions and access log entries; nil means the system clock.
	Clock clock.Clock
	// Stats are udp.<stat_prefix>.*; ClusterStats are cluster.<Config.Cluster>.udp.*. Nil
	// means private stats.
	Stats        *Stats
	ClusterStats *ClusterStats
	// Local is the listener's address, for the access log.
	Local string
	// Logs are the compiled access_log entries.
	Logs []Logger
	// Logger logs failures at debug level; nil discards.
	Logger *logging.Logger
}

// Logger is one access_log entry: its filter and the line it writes.
type Logger struct {
	Filter *accesslog.Filter
	Format *accesslog.Formatter
	File   *accesslog.File
}

// Proxy is one UDP listener's envoy.filters.udp_listener.udp_proxy: datagrams from each
// downstream address make a session with an upstream socket of its own (one per host with
// per-packet load balancing) whose answers go back to that address, until the session is
// idle for idle_timeout or the proxy closes.
//
// Concurrency: Packet is called by the listener's read loop; each upstream socket has a
// reader goroutine, owned by the proxy's wg, that ends when its session closes. mu guards
// sessions and closed.
type Proxy struct {
	cfg  *Config
	opts Options
	st   *Stats
	cst  *ClusterStats
	clk  clock.Clock

	mu       sync.Mutex
	sessions map[netip.AddrPort]*session
	closed   bool
	wg       sync.WaitGroup
}

// New builds a Proxy.
func New(cfg *Config, opts Options) (*Proxy, error) {
	if cfg == nil || opts.Clusters == nil {
		return nil, errors.New("udpproxy: a Config and Options.Clusters are required")
	}
	p := &Proxy{cfg: cfg, opts: opts, st: opts.Stats, cst: opts.ClusterStats, clk: opts.Clock, sessions: map[netip.AddrPort]*session{}}
	if p.st == nil {
		p.st = &Stats{}
	}
	if p.cst == nil {
		p.cst = &ClusterStats{}
	}
	if p.clk == nil {
		p.clk = clock.Real()
	}
	return p, nil
}

// Stats returns udp.<stat_prefix>.*.
func (p *Proxy) Stats() *Stats { return p.st }

// Sessions returns the number of open sessions.
func (p *Proxy) Sessions() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sessions)
}

// Packet implements listener.PacketHandler: data, from from, goes upstream on from's session,
// made first if from has none.
func (p *Proxy) Packet(pc *net.UDPConn, from netip.AddrPort, data []byte) {
	p.st.DownstreamSessRxDatagrams.Inc()
	p.st.DownstreamSessRxBytes.Add(uint64(len(data)))
	s := p.session(pc, from)
	if s == nil {
		return
	}
	s.rx.Add(uint64(len(data)))
	h := s.host
	if p.cfg.PerPacket {
		var err error
		if h, err = s.c.Pick(&s.lctx); err != nil {
			s.c.Stats().UpstreamCxNoneHealthy.Inc()
			return
		}
	}
	u, err := s.upstream(h)
	if err != nil {
		p.cst.SessTxErrors.Inc()
		p.opts.Logger.Debugf("udp_proxy %q: %v", p.cfg.StatPrefix, err)
		return
	}
	s.touch()
	s.used.Store(h)
	if _, err := u.conn.Write(data); err != nil {
		p.cst.SessTxErrors.Inc()
		return
	}
	p.cst.SessTxDatagrams.Inc()
	s.c.Stats().UpstreamCxTxBytesTotal.Add(uint64(len(data)))
}

// session returns from's session, making it: the cluster, the max_connections circuit
// breaker (one unit per session, as Envoy counts them) and, without per-packet balancing,
// the host. nil when the datagram is dropped.
func (p *Proxy) session(pc *net.UDPConn, from netip.AddrPort) *session {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.sessions[from]; s != nil || p.closed {
		return s
	}
	c := p.opts.Clusters.Get(p.cfg.Cluster)
	if c == nil {
		p.st.DownstreamSessNoRoute.Inc()
		return nil
	}
	s := &session{p: p, c: c, pc: pc, from: from, start: p.clk.Now(), ups: map[*host.Host]*upstream{}}
	switch p.cfg.Hash {
	case HashSourceIP:
		s.lctx.HashKey, s.lctx.HasHashKey = xxhash.Sum64String(from.Addr().Unmap().String()), true
	case HashKey:
		s.lctx.HashKey, s.lctx.HasHashKey = xxhash.Sum64String(p.cfg.HashKey), true
	}
	if !p.cfg.PerPacket {
		h, err := c.Pick(&s.lctx)
		if err != nil {
			c.Stats().UpstreamCxNoneHealthy.Inc()
			return nil
		}
		s.host = h
	}
	if snap := c.Snapshot(); snap != nil && snap.Breaker != nil {
		cx := &snap.Breaker.Priority(config.PriorityDefault).Connections
		if cx.TryAcquire() != nil {
			c.Stats().UpstreamCxOverflow.Inc()
			return nil
		}
		s.cx = cx
	}
	p.st.DownstreamSessTotal.Inc()
	p.st.DownstreamSessActive.Inc()
	p.sessions[from] = s
	s.touch()
	if d := p.cfg.IdleTimeout; d > 0 {
		s.timer.Store(timerBox{p.clk.AfterFunc(d, s.checkIdle)})
	}
	return s
}

// remove forgets s if it is still from's session, and reports whether it was.
func (p *Proxy) remove(s *session) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sessions[s.from] != s {
		return false
	}
	delete(p.sessions, s.from)
	return true
}

// Close implements listener.PacketHandler: every session ends and Close waits for their
// readers.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	sessions := make([]*session, 0, len(p.sessions))
	for _, s := range p.sessions {
		sessions = append(sessions, s)
	}
	clear(p.sessions)
	p.mu.Unlock()
	for _, s := range sessions {
		s.close()
	}
	p.wg.Wait()
	return nil
}

// timerBox holds a clock.Timer in an atomic.Value (one concrete type).
type timerBox struct{ clock.Timer }

// session is one downstream address's traffic.
type session struct {
	p     *Proxy
	c     *cluster.Cluster
	pc    *net.UDPConn // the listener's socket: answers go back on it
	from  netip.AddrPort
	start time.Time
	lctx  lb.Context
	host  *host.Host                // nil with per-packet balancing
	used  atomic.Pointer[host.Host] // the host of the last datagram sent
	cx    *breaker.Resource         // the session's max_connections unit; nil without a breaker
	last  atomic.Int64              // clock time of the last datagram either way, UnixNano
	timer atomic.Value              // timerBox of the idle timer
	rx    atomic.Uint64             // bytes from downstream
	tx    atomic.Uint64             // bytes to downstream

	mu     sync.Mutex // guards ups and closed
	ups    map[*host.Host]*upstream
	closed bool
	once   sync.Once
}

// upstream is one upstream socket of a session, connected to its host.
type upstream struct {
	conn *net.UDPConn
	host *host.Host
}

func (s *session) touch() { s.last.Store(s.p.clk.Now().UnixNano()) }

// upstream returns the session's socket to h, opening it and its reader first.
func (s *session) upstream(h *host.Host) (*upstream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, net.ErrClosed
	}
	if u := s.ups[h]; u != nil {
		return u, nil
	}
	addr, err := netip.ParseAddrPort(h.Address())
	if err != nil {
		return nil, fmt.Errorf("host %s: not an IP address and port", h.Address())
	}
	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", h.Address(), err)
	}
	u := &upstream{conn: conn, host: h}
	s.ups[h] = u
	s.p.wg.Add(1)
	go s.read(u)
	return u, nil
}

// read sends u's datagrams back to the session's downstream address until u closes.
func (s *session) read(u *upstream) {
	defer s.p.wg.Done()
	p := s.p
	buf := make([]byte, p.cfg.MaxRxDatagramSize+1)
	for {
		n, _, flags, _, err := u.conn.ReadMsgUDPAddrPort(buf, nil)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			p.cst.SessRxErrors.Inc() // an ICMP error of a datagram sent: the host refused it
			continue
		}
		if flags&msgTrunc != 0 || n > int(p.cfg.MaxRxDatagramSize) {
			p.cst.SessRxDatagramsDropped.Inc()
			continue
		}
		p.cst.SessRxDatagrams.Inc()
		s.c.Stats().UpstreamCxRxBytesTotal.Add(uint64(n))
		s.touch()
		if _, err := s.pc.WriteToUDPAddrPort(buf[:n], s.from); err != nil {
			p.st.DownstreamSessTxErrors.Inc()
			continue
		}
		s.tx.Add(uint64(n))
		p.st.DownstreamSessTxDatagrams.Inc()
		p.st.DownstreamSessTxBytes.Add(uint64(n))
	}
}

// checkIdle ends the session after idle_timeout without a datagram, or re-arms its timer.
func (s *session) checkIdle() {
	d := s.p.cfg.IdleTimeout
	since := time.Duration(s.p.clk.Now().UnixNano() - s.last.Load())
	if since < d {
		s.timer.Store(timerBox{s.p.clk.AfterFunc(d-since, s.checkIdle)})
		return
	}
	if s.p.remove(s) {
		s.p.st.IdleTimeout.Inc()
		s.close()
	}
}

// close ends the session once: its sockets close (their readers return), its breaker unit
// is released and its access log entries written.
func (s *session) close() {
	s.once.Do(func() {
		if t, ok := s.timer.Load().(timerBox); ok {
			t.Stop()
		}
		s.mu.Lock()
		s.closed = true
		for _, u := range s.ups {
			u.conn.Close()
		}
		s.mu.Unlock()
		if s.cx != nil {
			s.cx.Release()
		}
		s.p.st.DownstreamSessActive.Dec()
		s.log()
	})
}

// log writes the session's UdpSessionEnd entry to each access log whose filter passes it.
func (s *session) log() {
	if len(s.p.opts.Logs) == 0 {
		return
	}
	e := s.entry()
	var line []byte
	for _, l := range s.p.opts.Logs {
		if !l.Filter.Match(&e) {
			continue
		}
		line = l.Format.Format(line[:0], &e)
		if _, err := l.File.Write(line); err != nil {
			s.p.opts.Logger.Debugf("udp_proxy %q: access log: %v", s.p.cfg.StatPrefix, err)
		}
	}
}

// entry is what Envoy's stream info holds for a UDP session: the downstream addresses, the
// cluster and host (the last host used with per-packet balancing), the bytes each way and
// the duration.
func (s *session) entry() accesslog.Entry {
	e := accesslog.Entry{
		StartTime:                     s.start,
		BytesReceived:                 s.rx.Load(),
		BytesSent:                     s.tx.Load(),
		Duration:                      max(s.p.clk.Now().Sub(s.start), 1),
		DownstreamRemoteAddress:       s.from.String(),
		DownstreamDirectRemoteAddress: s.from.String(),
		DownstreamLocalAddress:        s.p.opts.Local,
		UpstreamCluster:               s.c.Config().Name,
		Type:                          accesslog.TypeUDPSessionEnd,
	}
	if h := s.used.Load(); h != nil {
		e.UpstreamHost = h.Address()
	}
	return e
}
