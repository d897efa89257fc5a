package httpproxy

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/stats"
)

// hcmStats are the http.<stat_prefix>.* stats of the connection manager and the router
// filter, named as Envoy names them (reference §26.6).
type hcmStats struct {
	responseCodeStats
	DownstreamCxDestroy                  stats.Counter    `stat:"downstream_cx_destroy"`
	DownstreamCxDestroyActiveRq          stats.Counter    `stat:"downstream_cx_destroy_active_rq"`
	DownstreamCxDestroyLocal             stats.Counter    `stat:"downstream_cx_destroy_local"`
	DownstreamCxDestroyLocalActiveRq     stats.Counter    `stat:"downstream_cx_destroy_local_active_rq"`
	DownstreamCxDestroyRemote            stats.Counter    `stat:"downstream_cx_destroy_remote"`
	DownstreamCxDestroyRemoteActiveRq    stats.Counter    `stat:"downstream_cx_destroy_remote_active_rq"`
	DownstreamCxDrainClose               stats.Counter    `stat:"downstream_cx_drain_close"`
	DownstreamCxHTTP1Total               stats.Counter    `stat:"downstream_cx_http1_total"`
	DownstreamCxHTTP2Total               stats.Counter    `stat:"downstream_cx_http2_total"`
	DownstreamCxHTTP3Total               stats.Counter    `stat:"downstream_cx_http3_total"`
	DownstreamCxIdleTimeout              stats.Counter    `stat:"downstream_cx_idle_timeout"`
	DownstreamCxMaxDurationReached       stats.Counter    `stat:"downstream_cx_max_duration_reached"`
	DownstreamCxMaxRequestsReached       stats.Counter    `stat:"downstream_cx_max_requests_reached"`
	DownstreamCxOverloadDisableKeepalive stats.Counter    `stat:"downstream_cx_overload_disable_keepalive"`
	DownstreamCxProtocolError            stats.Counter    `stat:"downstream_cx_protocol_error"`
	DownstreamCxRxBytesTotal             stats.HotCounter `stat:"downstream_cx_rx_bytes_total"`
	DownstreamCxSslTotal                 stats.Counter    `stat:"downstream_cx_ssl_total"`
	DownstreamCxTotal                    stats.Counter    `stat:"downstream_cx_total"`
	DownstreamCxTxBytesTotal             stats.HotCounter `stat:"downstream_cx_tx_bytes_total"`
	DownstreamCxUpgradesTotal            stats.Counter    `stat:"downstream_cx_upgrades_total"`
	DownstreamRqHTTP1Total               stats.HotCounter `stat:"downstream_rq_http1_total"`
	DownstreamRqHTTP2Total               stats.HotCounter `stat:"downstream_rq_http2_total"`
	DownstreamRqHTTP3Total               stats.Counter    `stat:"downstream_rq_http3_total"`
	DownstreamRqIdleTimeout              stats.Counter    `stat:"downstream_rq_idle_timeout"`
	DownstreamRqNonRelativePath          stats.Counter    `stat:"downstream_rq_non_relative_path"`
	DownstreamRqOverloadClose            stats.Counter    `stat:"downstream_rq_overload_close"`
	DownstreamRqResponseBeforeRqComplete stats.Counter    `stat:"downstream_rq_response_before_rq_complete"`
	DownstreamRqRxReset                  stats.Counter    `stat:"downstream_rq_rx_reset"`
	DownstreamRqTooManyPrematureResets   stats.Counter    `stat:"downstream_rq_too_many_premature_resets"`
	DownstreamRqTimeout                  stats.Counter    `stat:"downstream_rq_timeout"`
	DownstreamRqHeaderTimeout            stats.Counter    `stat:"downstream_rq_header_timeout"`
	DownstreamRqTooLarge                 stats.Counter    `stat:"downstream_rq_too_large"`
	DownstreamRqTotal                    stats.HotCounter `stat:"downstream_rq_total"`
	DownstreamRqTxReset                  stats.Counter    `stat:"downstream_rq_tx_reset"`
	DownstreamRqMaxDurationReached       stats.Counter    `stat:"downstream_rq_max_duration_reached"`
	DownstreamRqWsOnNonWsRoute           stats.Counter    `stat:"downstream_rq_ws_on_non_ws_route"`
	RsTooLarge                           stats.Counter    `stat:"rs_too_large"`

	DownstreamCxActive         stats.Gauge    `stat:"downstream_cx_active,accumulate"`
	DownstreamCxHTTP1Active    stats.Gauge    `stat:"downstream_cx_http1_active,accumulate"`
	DownstreamCxHTTP2Active    stats.Gauge    `stat:"downstream_cx_http2_active,accumulate"`
	DownstreamCxHTTP3Active    stats.Gauge    `stat:"downstream_cx_http3_active,accumulate"`
	DownstreamCxSslActive      stats.Gauge    `stat:"downstream_cx_ssl_active,accumulate"`
	DownstreamCxUpgradesActive stats.Gauge    `stat:"downstream_cx_upgrades_active,accumulate"`
	DownstreamRqActive         stats.HotGauge `stat:"downstream_rq_active,accumulate"`

	DownstreamCxLengthMs stats.Histogram `stat:"downstream_cx_length_ms,unit=ms"`
	DownstreamRqTime     stats.Histogram `stat:"downstream_rq_time,unit=ms"`

	// The router filter's stats.
	NoCluster                     stats.Counter    `stat:"no_cluster"`
	NoRoute                       stats.Counter    `stat:"no_route"`
	RqDirectResponse              stats.Counter    `stat:"rq_direct_response"`
	RqRedirect                    stats.Counter    `stat:"rq_redirect"`
	RqResetAfterDownstreamStarted stats.Counter    `stat:"rq_reset_after_downstream_response_started"`
	RqTotal                       stats.HotCounter `stat:"rq_total"`

	rq *stats.HotBlock[hcmLine] // the request totals above, bound to one line per P (bind)
}

// hcmLine is a P's share of the request totals every request adds to.
type hcmLine struct {
	http1, http2, total, routed atomic.Uint64 // downstream_rq_http1/http2_total, _total, rq_total
	rx, tx                      atomic.Uint64 // downstream_cx_rx/tx_bytes_total
}

// bind gives the hot counters their lines, before they are counted or registered.
func (s *hcmStats) bind() {
	s.responseCodeStats.bind()
	s.rq = stats.NewHotBlock[hcmLine]()
	stats.BindCounter(&s.DownstreamRqHTTP1Total, s.rq, func(l *hcmLine) *atomic.Uint64 { return &l.http1 })
	stats.BindCounter(&s.DownstreamRqHTTP2Total, s.rq, func(l *hcmLine) *atomic.Uint64 { return &l.http2 })
	stats.BindCounter(&s.DownstreamRqTotal, s.rq, func(l *hcmLine) *atomic.Uint64 { return &l.total })
	stats.BindCounter(&s.RqTotal, s.rq, func(l *hcmLine) *atomic.Uint64 { return &l.routed })
	stats.BindCounter(&s.DownstreamCxRxBytesTotal, s.rq, func(l *hcmLine) *atomic.Uint64 { return &l.rx })
	stats.BindCounter(&s.DownstreamCxTxBytesTotal, s.rq, func(l *hcmLine) *atomic.Uint64 { return &l.tx })
}

// listenerHTTPStats are listener.<address>.http.<stat_prefix>.* (Envoy's per-listener
// connection manager stats).
type listenerHTTPStats struct {
	responseCodeStats
}

// responseCodeStats are downstream_rq_<class>xx and downstream_rq_completed.
type responseCodeStats struct {
	DownstreamRq1xx       stats.HotCounter `stat:"downstream_rq_1xx"`
	DownstreamRq2xx       stats.HotCounter `stat:"downstream_rq_2xx"`
	DownstreamRq3xx       stats.HotCounter `stat:"downstream_rq_3xx"`
	DownstreamRq4xx       stats.HotCounter `stat:"downstream_rq_4xx"`
	DownstreamRq5xx       stats.HotCounter `stat:"downstream_rq_5xx"`
	DownstreamRqCompleted stats.HotCounter `stat:"downstream_rq_completed"`

	lines *stats.HotBlock[codeLine] // the counters above, bound to one line per P (bind)
}

// codeLine is a P's share of a responseCodeStats: a response adds to two of its fields.
type codeLine struct {
	completed atomic.Uint64
	class     [5]atomic.Uint64 // 1xx..5xx
}

// bind gives the counters their lines, before they are counted or registered.
func (s *responseCodeStats) bind() {
	s.lines = stats.NewHotBlock[codeLine]()
	stats.BindCounter(&s.DownstreamRqCompleted, s.lines, func(l *codeLine) *atomic.Uint64 { return &l.completed })
	for i, c := range []*stats.HotCounter{&s.DownstreamRq1xx, &s.DownstreamRq2xx, &s.DownstreamRq3xx, &s.DownstreamRq4xx, &s.DownstreamRq5xx} {
		stats.BindCounter(c, s.lines, func(l *codeLine) *atomic.Uint64 { return &l.class[i] })
	}
}

// codeClass returns the index 0..4 of a status's class (1xx..5xx), or -1.
func codeClass(status int) int {
	if status < 100 || status > 599 {
		return -1
	}
	return status/100 - 1
}

// responseCode counts one response with status, on line l (a stream's, or stats.ThisLine).
func (s *responseCodeStats) responseCode(status int, l stats.Line) {
	c := s.lines.On(l)
	c.completed.Add(1)
	if cls := codeClass(status); cls >= 0 {
		c.class[cls].Add(1)
	}
}

// upstreamCodeStats are the cluster.<name>.upstream_rq_<class>xx counters the router charges
// (the pool counts the rest of the cluster's upstream_rq_* set).
type upstreamCodeStats struct {
	UpstreamRq1xx stats.HotCounter `stat:"upstream_rq_1xx"`
	UpstreamRq2xx stats.HotCounter `stat:"upstream_rq_2xx"`
	UpstreamRq3xx stats.HotCounter `stat:"upstream_rq_3xx"`
	UpstreamRq4xx stats.HotCounter `stat:"upstream_rq_4xx"`
	UpstreamRq5xx stats.HotCounter `stat:"upstream_rq_5xx"`

	reg   *stats.Registration
	codes [600]atomic.Pointer[stats.HotCounter] // upstream_rq_<code>, created on first use; per-P lines
	name  string                                // the cluster's name, the registry's own copy
	class *stats.HotBlock[[5]atomic.Uint64]     // the class counters above, bound to one line per P
}

// bind gives the class counters their lines, before they are counted or registered.
func (u *upstreamCodeStats) bind() {
	u.class = stats.NewHotBlock[[5]atomic.Uint64]()
	for i, c := range []*stats.HotCounter{&u.UpstreamRq1xx, &u.UpstreamRq2xx, &u.UpstreamRq3xx, &u.UpstreamRq4xx, &u.UpstreamRq5xx} {
		stats.BindCounter(c, u.class, func(l *[5]atomic.Uint64) *atomic.Uint64 { return &l[i] })
	}
}

// charge counts one upstream response (or local reply standing for one) with status, on line
// l (a stream's, or stats.ThisLine).
func (u *upstreamCodeStats) charge(status int, st *cluster.Stats, l stats.Line) {
	cls := codeClass(status)
	if cls < 0 {
		return
	}
	st.Lines().On(l).RqCompleted.Add(1)
	u.class.On(l)[cls].Add(1)
	c := u.codes[status].Load()
	if c == nil {
		if u.reg != nil {
			c = u.reg.HotCounter("upstream_rq_" + strconv.Itoa(status))
		} else {
			c = new(stats.HotCounter)
		}
		u.codes[status].Store(c)
	}
	c.IncOn(l)
}

// statsRegistry shares stats between connection managers: http.<prefix>.* by prefix, as in
// Envoy where two listeners with one stat_prefix count into the same stats, and the
// per-cluster code counters by cluster name. Safe for concurrent use.
type statsRegistry struct {
	store *stats.Store

	mu       sync.Mutex // guards hcm and listener
	hcm      map[string]*sharedHCMStats
	listener map[string]*sharedListenerStats

	clusters sync.Map // cluster name -> *upstreamCodeStats
}

type sharedHCMStats struct {
	s    hcmStats
	reg  *stats.Registration
	refs int
}

type sharedListenerStats struct {
	s    listenerHTTPStats
	reg  *stats.Registration
	refs int
}

func newStatsRegistry(store *stats.Store) *statsRegistry {
	return &statsRegistry{store: store, hcm: map[string]*sharedHCMStats{}, listener: map[string]*sharedListenerStats{}}
}

// acquire returns the shared stats for an HCM prefix and a listener prefix; release undoes it.
func (r *statsRegistry) acquire(hcmPrefix, listenerPrefix string) (*hcmStats, *listenerHTTPStats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.hcm[hcmPrefix]
	if h == nil {
		h = &sharedHCMStats{}
		h.s.bind()
		if r.store != nil {
			h.reg = r.store.Register(hcmPrefix, &h.s)
		}
		r.hcm[hcmPrefix] = h
	}
	h.refs++
	l := r.listener[listenerPrefix]
	if l == nil {
		l = &sharedListenerStats{}
		l.s.bind()
		if r.store != nil {
			l.reg = r.store.Register(listenerPrefix, &l.s)
		}
		r.listener[listenerPrefix] = l
	}
	l.refs++
	return &h.s, &l.s
}

func (r *statsRegistry) release(hcmPrefix, listenerPrefix string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h := r.hcm[hcmPrefix]; h != nil {
		if h.refs--; h.refs == 0 {
			if h.reg != nil {
				h.reg.Unregister()
			}
			delete(r.hcm, hcmPrefix)
		}
	}
	if l := r.listener[listenerPrefix]; l != nil {
		if l.refs--; l.refs == 0 {
			if l.reg != nil {
				l.reg.Unregister()
			}
			delete(r.listener, listenerPrefix)
		}
	}
}

// upstream returns the code counters of a cluster, registering them on first use. They stay
// registered for the life of the registry (a removed cluster keeps its stats, as Envoy keeps
// them until they are unused).
func (r *statsRegistry) upstream(name string) *upstreamCodeStats {
	if v, ok := r.clusters.Load(name); ok {
		return v.(*upstreamCodeStats)
	}
	// name may view the request (a cluster_header route's cluster is a header value in the
	// stream's arena, which the next request overwrites): the registry keeps its own copy.
	name = strings.Clone(name)
	u := &upstreamCodeStats{name: name}
	u.bind()
	if r.store != nil {
		u.reg = r.store.Register("cluster."+name+".", u)
	}
	v, loaded := r.clusters.LoadOrStore(name, u)
	if loaded && u.reg != nil {
		u.reg.Unregister()
	}
	return v.(*upstreamCodeStats)
}
