package pool

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legateproxy/legate/breaker"
	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/internal/h2client"
	"github.com/legateproxy/legate/internal/proxyproto"
	"github.com/legateproxy/legate/internal/sockopt"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/tlsutil"
)

// Protocol is the protocol of an upstream HTTP exchange.
type Protocol uint8

// Upstream protocols.
const (
	HTTP1 Protocol = iota
	HTTP2
)

// String returns "HTTP/1.1" or "HTTP/2".
func (p Protocol) String() string {
	if p == HTTP2 {
		return "HTTP/2"
	}
	return "HTTP/1.1"
}

// rqStats are the per-cluster stats the pool records that cluster.Stats lacks.
type rqStats struct {
	UpstreamRqTime stats.Histogram `stat:"upstream_rq_time,unit=ms"`
}

// ManagerConfig configures the pools of one cluster.
type ManagerConfig struct {
	// Cluster is the cluster whose hosts the pools connect to. Required.
	Cluster *cluster.Cluster
	// Stats is where cluster.<stat name>.upstream_rq_time is registered; nil records it
	// without registering.
	Stats *stats.Store
	// TLS returns the client TLS configuration for a host (tlsutil builds it from the
	// cluster's UpstreamTlsContext: SNI, verification, client certificates, ALPN). Nil, or a
	// nil result, means plain TCP. For HTTP/2 the pool sets NextProtos to ["h2"].
	TLS func(h *host.Host) *tls.Config
	// AuthorityTLS returns the client TLS configuration for a connection to h carrying the
	// requests whose authority's host is name, for a cluster with auto_sni or
	// auto_san_validation (tlsutil.ClientContext.ConfigForAuthority). Nil, or a nil result,
	// means plain TCP.
	AuthorityTLS func(h *host.Host, name string) *tls.Config
	// SocketTLS returns the client TLS configuration of transport socket socket (an index
	// as host.Host.SocketMatch's) for a connection to h whose socket the downstream's filter
	// state chose (host.Host.SocketFor). Nil, or a nil result, means plain TCP.
	SocketTLS func(h *host.Host, socket int) *tls.Config
	// TLSStats returns the cluster's ssl.* stats (tlsutil.ClientContext.Stats), asked for
	// each TLS connection: its handshake is counted there as Envoy's upstream TLS socket
	// counts it. Nil, or a nil result, counts nothing.
	TLSStats func() *tlsutil.Stats
	// Now is the clock for the connect and request histograms; nil means the system clock.
	Now func() time.Time
	// DialInternal connects to a host whose address is an envoy_internal_address
	// ("envoy://<listener>/<endpoint id>"): the listener manager's in-memory internal
	// listeners. Nil fails such hosts.
	DialInternal func(ctx context.Context, address string) (net.Conn, error)
}

// Manager holds the connection pools of one cluster, one per host, created on first use. It
// implements Envoy's per-host HTTP/1.1, HTTP/2 and TCP connection pools with the cluster's
// connect_timeout, max_requests_per_connection, idle timeout, upstream_bind_config,
// tcp_keepalive and circuit breakers (max_connections, max_pending_requests, max_requests).
//
// Concurrency: safe for concurrent use. The request path finds a host's pool attached to the
// host (host.Slot; the sync.Map when another Manager holds the host's slot) and takes an idle HTTP/1.1 connection from, and returns it to, the idle list of its P (see
// idleShard) under that list's own lock; the pool's mutex is for dials, waiters, HTTP/2 and
// the control path (Sync, Close).
type Manager struct {
	cluster *cluster.Cluster
	cfg     *config.Cluster
	st      *cluster.Stats
	rq      *rqStats
	// rqCreated is set once upstream_rq_time exists (RegisterDeferred's flag, not listed):
	// Envoy's router creates the histogram with the cluster's first response, with or
	// without deferred_stat_options, so an idle cluster lists none.
	rqCreated    stats.Gauge
	reg          *stats.Registration
	tls          func(*host.Host) *tls.Config
	authorityTLS func(*host.Host, string) *tls.Config
	socketTLS    func(*host.Host, int) *tls.Config
	// byAuthority: upstream_http_protocol_options asks for each request's authority as the
	// TLS name, so a host's connections are pooled per name (hostPool.keyed).
	byAuthority bool
	// mayKey: byAuthority, or a transport socket sends a PROXY protocol header; without
	// either, only the downstream's original_src source keys a pool (keyOf).
	mayKey         bool
	sniHeader      string // override_auto_sni_header, lower case; "" for none
	keyedLimit     int    // maxKeyedPools (tests lower it)
	tlsStats       func() *tlsutil.Stats
	idleTimeout    time.Duration // 0: none
	maxDuration    time.Duration // max_connection_duration; 0: none
	streamDuration time.Duration // max_stream_duration; 0: none
	head           headLimits    // of response heads
	connectTimeout time.Duration
	maxRequests    uint32
	// bufferLimit is per_connection_buffer_limit_bytes: how much of a request body is kept to
	// replay it on a retry, and the HTTP/2 receive window of each stream, so that a response
	// the downstream does not read holds at most that much here.
	bufferLimit  int
	h2Streams    int32 // http2_protocol_options.max_concurrent_streams
	bind         net.Addr
	dialer       net.Dialer
	dialInternal func(ctx context.Context, address string) (net.Conn, error)
	// wrappers are the proxy_protocol and internal_upstream settings of the cluster's
	// transport sockets, indexed as host.SocketMatch.
	wrappers []tlsutil.Wrappers
	h2       h2client.Config
	now      func() time.Time
	// stamps reads now for durations (upstream_rq_time); when now is the system clock
	// (stamps.System), its stamps are clock.Mono's, the idle timers' own, and may stamp an idle
	// connection (releaseH1At).
	stamps clock.Stamps

	errRqOverflow, errPendingOverflow, errCxOverflow error

	// pools lists the hosts' pools; each is also attached to its host (hostPool.slot), where
	// the request path finds it.
	pools sync.Map // *host.Host -> *hostPool

	mu       sync.Mutex // guards the fields below and pool creation
	closed   bool
	lastSnap *cluster.Snapshot
	// gone is closed for readers without the lock (Registry.GetAgain).
	gone atomic.Bool
}

// NewManager builds the (empty) pools of cfg.Cluster.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	if cfg.Cluster == nil {
		return nil, errors.New("pool: ManagerConfig.Cluster is required")
	}
	cc := cfg.Cluster.Config()
	m := &Manager{
		cluster:        cfg.Cluster,
		cfg:            cc,
		st:             cfg.Cluster.Stats(),
		rq:             &rqStats{},
		tls:            cfg.TLS,
		authorityTLS:   cfg.AuthorityTLS,
		socketTLS:      cfg.SocketTLS,
		byAuthority:    cc.UpstreamHTTP.ByAuthority(),
		sniHeader:      cc.UpstreamHTTP.OverrideAutoSNIHeader,
		keyedLimit:     maxKeyedPools,
		tlsStats:       cfg.TLSStats,
		idleTimeout:    cc.HTTP.IdleTimeout,
		maxDuration:    cc.HTTP.MaxConnectionDuration,
		streamDuration: cc.HTTP.MaxStreamDuration,
		head:           headLimits{fields: int(cc.HTTP.MaxHeadersCount), bytes: int(cc.HTTP.MaxResponseHeadersBytes), chunkedLength: cc.HTTP1.AllowChunkedLength},
		connectTimeout: cc.ConnectTimeout,
		maxRequests:    cc.MaxRequestsPerConnection,
		bufferLimit:    int(cc.PerConnectionBufferLimitBytes),
		now:            cfg.Now,
		dialInternal:   cfg.DialInternal,
	}
	if m.bufferLimit == 0 {
		m.bufferLimit = config.DefaultClusterBufferLimit
	}
	m.wrappers = make([]tlsutil.Wrappers, 1+len(cc.TransportSocketMatches))
	for i := range m.wrappers {
		w, err := tlsutil.WrappersOf(cc.TransportSocketPath(i), cc.TransportSocketFor(i))
		if err != nil {
			return nil, fmt.Errorf("cluster %q: %w", cc.Name, err)
		}
		m.wrappers[i] = w
		m.mayKey = m.mayKey || w.ProxyProtocol != nil
	}
	m.mayKey = m.mayKey || m.byAuthority
	if m.head.fields == 0 {
		m.head.fields = config.DefaultMaxResponseHeadersCount
	}
	if m.head.bytes == 0 {
		m.head.bytes = config.DefaultMaxResponseHeadersKB << 10
	}
	m.h2Streams = math.MaxInt32 // Envoy's default max_concurrent_streams
	if n := cc.HTTP2Options.MaxConcurrentStreams; n > 0 && n < math.MaxInt32 {
		m.h2Streams = int32(n)
	}
	m.h2 = newH2Config(m.bufferLimit, m.head, cc.HTTP2Options)
	if m.connectTimeout <= 0 {
		m.connectTimeout = config.DefaultConnectTimeout
	}
	if m.now == nil {
		m.now = clock.Real().Now
	}
	m.stamps = clock.NewStamps(m.now)
	if a := cc.UpstreamBindAddress; a != nil {
		ip, err := netip.ParseAddr(a.Host)
		if err != nil {
			return nil, fmt.Errorf("cluster %q: upstream_bind_config.source_address.address = %q; must be an IP address", cc.Name, a.Host)
		}
		m.bind = &net.TCPAddr{IP: ip.AsSlice(), Port: int(a.Port)}
		m.dialer.LocalAddr = m.bind
	}
	m.dialer.KeepAlive = -1 // Envoy sets SO_KEEPALIVE only with tcp_keepalive
	m.dialer.Control = sockopt.Control(cc.UpstreamSocketOptions)
	if ka := cc.TCPKeepalive; ka != nil {
		m.dialer.KeepAliveConfig = net.KeepAliveConfig{
			Enable:   true,
			Idle:     orOSDefault(ka.Time),
			Interval: orOSDefault(ka.Interval),
			Count:    orOSDefaultCount(ka.Probes),
		}
	}
	if cfg.Stats != nil {
		m.reg = cfg.Stats.RegisterDeferred("cluster."+cc.StatName+".", m.rq, &m.rqCreated)
	}
	name := cc.Name
	m.errRqOverflow = fmt.Errorf("cluster %q: circuit_breakers max_requests reached: %w", name, breaker.ErrOverflow)
	m.errPendingOverflow = fmt.Errorf("cluster %q: circuit_breakers max_pending_requests reached: %w", name, breaker.ErrOverflow)
	m.errCxOverflow = fmt.Errorf("cluster %q: circuit_breakers max_connections reached: %w", name, breaker.ErrOverflow)
	return m, nil
}

// orOSDefault maps Envoy's "0 = system default" to net.KeepAliveConfig's -1.
func orOSDefault(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

func orOSDefaultCount(n uint32) int {
	if n == 0 {
		return -1
	}
	return int(n)
}

// Cluster returns the cluster the pools belong to.
func (m *Manager) Cluster() *cluster.Cluster { return m.cluster }

// ErrNotWarm is returned for a cluster that has no snapshot yet (still warming).
var ErrNotWarm = errors.New("cluster is not warm")

// priority returns the circuit-breaker resources of p (the breaker is shared by all of the
// cluster's snapshots).
func (m *Manager) priority(p config.Priority) (*breaker.Priority, error) {
	s := m.cluster.Snapshot()
	if s == nil {
		return nil, fmt.Errorf("cluster %q: %w", m.cfg.Name, ErrNotWarm)
	}
	return s.Breaker.Priority(p), nil
}

// Protocol returns the protocol an exchange of req uses: HTTP/2 when the cluster configures
// it (http2_protocol_options, or the typed HttpProtocolOptions), or, with
// USE_DOWNSTREAM_PROTOCOL, when the downstream request is HTTP/2.
func (m *Manager) Protocol(req *Request) Protocol {
	if m.cfg.ProtocolSelection == config.UseDownstreamProtocol {
		if req.HTTP2 {
			return HTTP2
		}
		return HTTP1
	}
	if m.cfg.HTTP2 {
		return HTTP2
	}
	return HTTP1
}

// AutoHTTP reports whether the cluster sets auto_config: each connection speaks the protocol
// TLS ALPN negotiates. Protocol then says HTTP/1.1 (what an upgrade must use), while
// RoundTrip may use HTTP/2.
func (m *Manager) AutoHTTP() bool { return m.cfg.AutoHTTP }

// MayUseHTTP2 reports whether an exchange of req may go over HTTP/2 (whose transport reads
// the request body on a goroutine of its own).
func (m *Manager) MayUseHTTP2(req *Request) bool {
	return m.cfg.AutoHTTP || m.Protocol(req) == HTTP2
}

// pool returns h's pool, creating it on first use.
func (m *Manager) pool(h *host.Host) (*hostPool, error) {
	if s := h.Attached(); s != nil && s.Owner == any(m) {
		return s.Value.(*hostPool), nil
	}
	if v, ok := m.pools.Load(h); ok {
		return v.(*hostPool), nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if v, ok := m.pools.Load(h); ok {
		return v.(*hostPool), nil
	}
	hs := (*cluster.HostStats)(nil)
	if s := m.cluster.Snapshot(); s != nil {
		hs = s.HostStats(h)
	}
	if hs == nil {
		hs = &cluster.HostStats{} // a host picked from an older snapshot: counted privately
	}
	hp := &hostPool{m: m, host: h, hs: hs, h1: map[*h1conn]struct{}{}, tcp: map[*TCPConn]struct{}{}}
	hp.slot = host.Slot{Owner: m, Value: hp}
	m.pools.Store(h, hp)
	h.Attach(&hp.slot)
	return hp, nil
}

// RoundTrip sends req to h and reads the response head into resp, using the protocol
// Protocol(req) chooses. On success the caller reads resp.Body and calls resp.Close. Errors
// wrap breaker.ErrOverflow (answer 503 with x-envoy-overloaded: true), ErrConnectFailure,
// ErrConnectTimeout, ErrReset, ErrProtocol, ErrClosed or the context's error.
//
// The pool counts the cluster's upstream_rq_total, upstream_rq_active, upstream_rq_pending_*,
// upstream_rq_timeout, upstream_rq_time and overflow counters and the host's rq_total,
// rq_active, rq_success (non-5xx response read to its end), rq_error (5xx, reset or failure)
// and rq_timeout (ctx deadline): the router must not count these again.
func (m *Manager) RoundTrip(ctx context.Context, h *host.Host, req *Request, resp *Response) error {
	resp.Close()
	hp, err := m.pool(h)
	if err != nil {
		return err
	}
	// Only a request from an original_src connection can have a key when the cluster's
	// settings give none (mayKey): keyOf and the test of its key were about 70 instructions.
	if o := req.Origin; !m.mayKey && (o == nil || o.UpstreamSource() == nil) {
		return m.roundTrip(ctx, hp, req, resp)
	}
	if k := m.keyOf(h, req); k != (poolKey{}) {
		hp = hp.keyed(k, req.Origin)
		err = m.roundTrip(ctx, hp, req, resp)
		hp.leave()
		return err
	}
	return m.roundTrip(ctx, hp, req, resp)
}

// roundTrip is RoundTrip on the pool hp.
func (m *Manager) roundTrip(ctx context.Context, hp *hostPool, req *Request, resp *Response) error {
	p := hp.protocol(req)
	if req.HTTP2Only && p != HTTP2 {
		return ErrNegotiatedHTTP1
	}
	prio, err := m.priority(req.Priority)
	if err != nil {
		return err
	}
	if prio.Requests.TryAcquire() != nil {
		m.st.UpstreamRqPendingOverflow.Inc()
		return m.errRqOverflow
	}
	// The exchange is built in the response, which RoundTrip's Close left zero, rather than
	// on the stack and copied there at the end (about 50 instructions a request).
	ex := &resp.ex
	ex.hp, ex.prio, ex.start, ex.line = hp, prio, req.Start, req.Line
	if ex.start == 0 {
		ex.start = m.stamps.Now()
	}
	if ex.line == stats.NoLine {
		ex.line = stats.ThisLine()
	}
	ex.started()
	if p == HTTP2 {
		err = ex.roundTripH2(ctx, req, resp)
		switch {
		case !errors.Is(err, errSpeaksHTTP1): // auto_config: ALPN chose HTTP/1.1 when it is
		case req.HTTP2Only:
			err = ErrNegotiatedHTTP1
		default:
			err = ex.roundTripH1(ctx, req, resp)
		}
	} else {
		err = ex.roundTripH1(ctx, req, resp)
	}
	if err != nil {
		ex.ended(outcomeOf(err), 0)
		*ex = exchange{} // Close has nothing to end
		return err
	}
	ex.status = resp.StatusCode
	return nil
}

// outcome is how an exchange ended, for the host's rq_* stats.
type outcome uint8

const (
	outcomeComplete outcome = iota
	outcomeError
	outcomeTimeout
	outcomeDownstream // the client's request body failed: nothing is charged to the host
)

func outcomeOf(err error) outcome {
	switch {
	case errors.Is(err, ErrRequestBody), errors.Is(err, ErrNegotiatedHTTP1):
		return outcomeDownstream
	case errors.Is(err, context.DeadlineExceeded):
		return outcomeTimeout
	}
	return outcomeError
}

// exchange is one request's state from RoundTrip to Response.Close.
type exchange struct {
	hp     *hostPool
	prio   *breaker.Priority
	start  int64 // a stamp of the Manager's clock (stamps)
	status int
	h1     *h1conn
	h2     *h2body
	clock  *streamClock      // max_stream_duration; nil when unset
	active uint8             // the host's ActiveRequestStarted token (a least-request cluster), or 0
	line   stats.Line        // the line the exchange's hot stats are counted on (Request.Line)
	host   *cluster.HostLine // the host's line the request was counted on (its end is too)
}

func (ex *exchange) started() {
	hp, st := ex.hp, ex.hp.m.st
	st.Lines().On(ex.line).RqTotal.Add(1)
	st.UpstreamRqActive.IncOn(ex.line)
	ex.host = hp.hs.RqStarted(ex.line)
	ex.active = hp.host.ActiveRequestStarted()
}

// ended records the end of the exchange; status is the response status when known.
func (ex *exchange) ended(o outcome, status int) { ex.endedAt(o, status, 0) }

// endedAt is ended at end, a stamp of the pool's clock the caller took (zero: none).
func (ex *exchange) endedAt(o outcome, status int, end int64) {
	hp, st := ex.hp, ex.hp.m.st
	ex.prio.Requests.Release()
	st.UpstreamRqActive.DecOn(ex.line)
	hp.host.ActiveRequestEnded(ex.active)
	switch {
	case o == outcomeDownstream:
		ex.host.RqEnded(cluster.RqCancelled)
	case o == outcomeTimeout:
		st.UpstreamRqTimeout.Inc()
		ex.host.RqEnded(cluster.RqTimedOut)
	case o == outcomeError || status >= 500:
		ex.host.RqEnded(cluster.RqFailed)
	default:
		ex.host.RqEnded(cluster.RqSucceeded)
	}
	if o == outcomeComplete {
		if end == 0 {
			end = hp.m.stamps.Now()
		}
		hp.m.rq.UpstreamRqTime.RecordOn(uint64(time.Duration(end-ex.start).Milliseconds()), ex.line)
	}
}

// finish ends the exchange when the caller closes the Response, at end (zero: now; system:
// end is a reading of the system clock).
func (ex *exchange) finish(end int64, system bool) error {
	if ex.h1 != nil {
		return ex.finishH1(end, system)
	}
	return ex.finishH2(end)
}

// Sync reconciles the pools with the cluster's current snapshot: the pools of hosts that left
// the cluster are drained (idle connections closed now, busy ones after their request) and
// forgotten; with close_connections_on_host_health_failure, every connection of a host whose
// health flags make it unhealthy is closed, including busy ones and TCP proxy connections.
// The Registry calls it periodically; callers that learn of a change may call it at once.
func (m *Manager) Sync() {
	snap := m.cluster.Snapshot()
	m.mu.Lock()
	changed := snap != m.lastSnap
	m.lastSnap = snap
	m.mu.Unlock()
	var present map[*host.Host]bool
	if changed && snap != nil {
		present = map[*host.Host]bool{}
		for _, s := range snap.PrioritySet.Sets() {
			for _, h := range s.Hosts() {
				present[h] = true
			}
		}
	}
	closeUnhealthy := m.cfg.CloseConnectionsOnHostHealthFailure
	m.pools.Range(func(k, v any) bool {
		h, hp := k.(*host.Host), v.(*hostPool)
		switch {
		case present != nil && !present[h]:
			m.pools.Delete(h)
			h.Detach(&hp.slot)
			hp.drain()
		case closeUnhealthy && h.Health() == host.Unhealthy:
			hp.closeAll()
		}
		return true
	})
}

// HostFailed reacts to h failing active health checking or being ejected (the cluster
// manager's OnHostHealthFailure): h's HTTP connections are drained (idle ones closed, busy
// ones closed after their request, new requests get new connections) and, with
// closeConnections (close_connections_on_host_health_failure), every connection of h,
// TCP ones included, is closed at once. Safe for concurrent use; it does not block.
func (m *Manager) HostFailed(h *host.Host, closeConnections bool) {
	v, ok := m.pools.Load(h)
	if !ok {
		return
	}
	hp := v.(*hostPool)
	if closeConnections {
		hp.closeAll()
		return
	}
	hp.retire()
}

// Close drains every pool: idle connections close now, busy HTTP connections after their
// request, and new requests fail with ErrClosed. TCP connections are left to their owners.
// It does not block.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.gone.Store(true)
	m.mu.Unlock()
	m.pools.Range(func(k, v any) bool {
		m.pools.Delete(k)
		k.(*host.Host).Detach(&v.(*hostPool).slot)
		v.(*hostPool).drain()
		return true
	})
	if m.reg != nil {
		m.reg.Unregister()
	}
}

// hostPool holds one host's connections.
type hostPool struct {
	m    *Manager
	host *host.Host
	hs   *cluster.HostStats
	// slot is what the pool attaches to its host (Manager.pool) while the Manager lists it.
	slot host.Slot

	// idle are the idle HTTP/1.1 connections, one list per P (h1idle.go).
	idle idleLists
	// nWaiting is len(waiters), read without mu by releases.
	nWaiting atomic.Int32
	// draining is written under mu and read without it by releases.
	draining atomic.Bool

	mu      sync.Mutex // guards the fields below
	waiters []*waiter  // requests waiting for an HTTP/1.1 connection, oldest first
	h1      map[*h1conn]struct{}
	h2      []*h2conn
	h2dial  chan struct{} // closed when the HTTP/2 connection being established is ready
	// h2wait wakes requests that found every HTTP/2 stream slot taken and max_connections
	// reached. It has its own lock so that a connection's close can signal it from anywhere.
	h2wait streamWait
	tcp    map[*TCPConn]struct{}
	// key is what the pool's connections are opened for (an authority's TLS name, a
	// downstream's source address, a downstream a PROXY protocol header describes); zero in
	// the host's own pool. down is that downstream when the key has one.
	key  poolKey
	down *proxyproto.Downstream
	// byKey holds, in the host's own pool, its keyed pools: at most maxKeyedPools (nKeyed,
	// guarded by mu), read without a lock.
	byKey  sync.Map // poolKey -> *hostPool
	nKeyed int
	// users counts the requests between finding a keyed pool and the end of their
	// RoundTrip (by then a connection they hold is in h1 or h2); evicted is set when the pool
	// left its parent's keyed pools (enter and evict read each other's flag, so a request
	// never uses a pool that evict dropped).
	users   atomic.Int32
	evicted atomic.Bool
	// alpn is what auto_config learned of the host: alpnUnknown until a connection
	// negotiated, then what the last dial offering h2 got. Once it is HTTP/1.1, new
	// connections offer http/1.1 only, so it stays so.
	alpn atomic.Uint32
}

// What auto_config learned of a host (hostPool.alpn).
const (
	alpnUnknown uint32 = iota
	alpnHTTP1
	alpnHTTP2
)

// ErrNegotiatedHTTP1 is the error of a Request with HTTP2Only on an auto_config cluster
// whose host speaks HTTP/1.1 (TLS ALPN chose it): nothing was sent, and nothing is charged to
// the host.
var ErrNegotiatedHTTP1 = errors.New("upstream speaks HTTP/1.1, and the request wants HTTP/2")

// errSpeaksHTTP1 is how the HTTP/2 path of an auto_config cluster hands an exchange to the
// HTTP/1.1 path: the connection it dialled negotiated HTTP/1.1 and waits in the idle list.
var errSpeaksHTTP1 = errors.New("upstream negotiated HTTP/1.1")

// protocol returns the protocol an exchange of req starts with on this host: with
// auto_config, HTTP/1.1 once the host negotiated it, else HTTP/2 (whose dial offers both and
// hands an HTTP/1.1 connection over).
func (hp *hostPool) protocol(req *Request) Protocol {
	if !hp.m.cfg.AutoHTTP {
		return hp.m.Protocol(req)
	}
	if hp.alpn.Load() == alpnHTTP1 {
		return HTTP1
	}
	return HTTP2
}

// alpnFor returns the ALPN list a new connection offers: auto_config offers h2 and
// http/1.1 for HTTP/2 dials and http/1.1 alone for HTTP/1.1 ones; other clusters offer h2
// for HTTP/2 and leave HTTP/1.1 to the TLS configuration.
func (hp *hostPool) alpnFor(p Protocol) []string {
	switch {
	case hp.m.cfg.AutoHTTP && p == HTTP2:
		return []string{"h2", "http/1.1"}
	case hp.m.cfg.AutoHTTP:
		return []string{"http/1.1"}
	case p == HTTP2:
		return []string{"h2"}
	}
	return nil
}

// drain stops new requests, closes idle connections and lets busy ones finish.
func (hp *hostPool) drain() {
	hp.mu.Lock()
	hp.draining.Store(true)
	idle := hp.takeAllIdleLocked()
	waiters := hp.waiters
	hp.waiters = nil
	hp.nWaiting.Store(0)
	h2 := hp.h2
	hp.mu.Unlock()
	for _, c := range idle {
		c.destroy(true)
	}
	for _, w := range waiters {
		w.ch <- nil
	}
	for _, c := range h2 {
		c.retire()
	}
	hp.eachKeyed((*hostPool).drain)
}

// retire closes idle HTTP connections and marks busy ones and HTTP/2 connections not to be
// reused; the pool stays open for new connections.
func (hp *hostPool) retire() {
	hp.mu.Lock()
	for c := range hp.h1 {
		c.retired.Store(true)
	}
	idle := hp.takeAllIdleLocked()
	h2 := hp.h2
	hp.h2 = nil
	hp.mu.Unlock()
	for _, c := range idle {
		c.destroy(true)
	}
	for _, c := range h2 {
		c.retire()
	}
	hp.eachKeyed((*hostPool).retire)
}

// closeAll closes every connection of the host at once (health failure).
func (hp *hostPool) closeAll() {
	hp.mu.Lock()
	idle := hp.takeAllIdleLocked()
	busy := make([]*h1conn, 0, len(hp.h1))
	for c := range hp.h1 {
		busy = append(busy, c)
	}
	h2 := hp.h2
	hp.h2 = nil
	tcp := make([]*TCPConn, 0, len(hp.tcp))
	for c := range hp.tcp {
		tcp = append(tcp, c)
	}
	hp.mu.Unlock()
	for _, c := range idle {
		c.destroy(true)
	}
	for _, c := range busy {
		c.uc.shut(true) // the request owning it sees the error and releases it
	}
	for _, c := range h2 {
		c.close(true)
	}
	for _, c := range tcp {
		c.shut(true)
	}
	hp.eachKeyed((*hostPool).closeAll)
}
