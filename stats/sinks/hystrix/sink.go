package hystrix

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"

	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/stats/tags"
)

const (
	// DefaultNumBuckets is HystrixSink.num_buckets when it is 0 or unset.
	DefaultNumBuckets = 10
	// MaxNumBuckets bounds num_buckets. Envoy has no bound and allocates the
	// whole window per cluster up front; Legate refuses a window that would
	// cost more than a few megabytes per cluster.
	MaxNumBuckets = 1 << 16
	// ClientBuffer is how many flushes' frames wait for a slow client before
	// later ones are dropped for it.
	ClientBuffer = 8
	// defaultMaxPendingRequests is Envoy's default circuit_breakers
	// max_pending_requests (config.DefaultMaxPendingRequests; not imported
	// so that a stats sink does not depend on the cluster configuration).
	defaultMaxPendingRequests = 1024
)

var _ stats.Sink = (*Sink)(nil)

// ErrClosed is returned by Stream once the sink is closed.
var ErrClosed = errors.New("hystrix sink closed")

// Sink is the Hystrix stats sink. It implements stats.Sink. Safe for
// concurrent use: Flush, Stream, Clients, Dropped, SetMaxPendingRequests and
// Close may be called from any goroutine. The zero value is not usable; call
// New.
type Sink struct {
	windowSize int   // num_buckets + 1 samples: the window spans num_buckets flushes
	flushMs    int64 // stats_flush_interval in ms, reported as the rolling window

	maxPending atomic.Pointer[func(cluster string) uint64]
	dropped    atomic.Uint64

	// mu guards clients, closed, index and windows.
	mu      sync.Mutex
	clients map[*client]struct{}
	closed  bool
	index   int                       // ring slot the latest flush wrote
	windows map[string]*clusterWindow // by cluster name
	done    chan struct{}             // closed by Close
}

// New builds the sink for one stats_sinks entry. cfg may be nil (all
// defaults). flushInterval is the bootstrap's stats_flush_interval; 0 means
// Envoy's default of 5 s.
func New(cfg *metricsv3.HystrixSink, flushInterval time.Duration) (*Sink, error) {
	n := cfg.GetNumBuckets()
	switch {
	case n < 0:
		return nil, fmt.Errorf("hystrix sink: num_buckets = %d; must be >= 0", n)
	case n > MaxNumBuckets:
		return nil, fmt.Errorf("hystrix sink: num_buckets = %d; must be <= %d", n, MaxNumBuckets)
	case n == 0:
		n = DefaultNumBuckets
	}
	if flushInterval < 0 {
		return nil, fmt.Errorf("hystrix sink: stats_flush_interval = %v; must be positive", flushInterval)
	}
	if flushInterval == 0 {
		flushInterval = 5 * time.Second
	}
	return &Sink{
		windowSize: int(n) + 1,
		flushMs:    flushInterval.Milliseconds(),
		clients:    make(map[*client]struct{}),
		index:      int(n),
		windows:    make(map[string]*clusterWindow),
		done:       make(chan struct{}),
	}, nil
}

// SetMaxPendingRequests gives the sink each cluster's default-priority
// circuit_breakers max_pending_requests, which Envoy reports as
// executionIsolationSemaphoreMaxConcurrentRequests and
// queueSizeRejectionThreshold. Without it (or with nil) every cluster shows
// Envoy's default, 1024. fn is called on the flushing goroutine and must not
// block.
func (s *Sink) SetMaxPendingRequests(fn func(cluster string) uint64) {
	if fn == nil {
		s.maxPending.Store(nil)
		return
	}
	s.maxPending.Store(&fn)
}

// Dropped is the number of frame blocks not delivered because a client's
// buffer was full.
func (s *Sink) Dropped() uint64 { return s.dropped.Load() }

// sample is one flush's cumulative values of the five series Envoy keeps.
type sample struct {
	errors, success, total, timeouts, rejected uint64
}

// clusterWindow is one cluster's ring of windowSize samples. Slot Sink.index
// holds the latest; the slot after it the oldest.
type clusterWindow struct {
	ring []sample
}

// clusterStats is what one flush reads for one cluster.
type clusterStats struct {
	name          string
	counters      [numCounters]uint64
	reportingHost uint64
	latency       []float64 // per latencyQuantiles entry; NaN when absent
}

// The counters the sink reads, as suffixes of cluster.<name>.
const (
	rq2xx = iota
	rq4xx
	rq5xx
	retry4xx
	retry5xx
	rqTimeout
	rqPerTryTimeout
	rqPendingOverflow
	numCounters
)

// counterSuffixes are matched longest first so that retry.upstream_rq_5xx is
// not taken for upstream_rq_5xx of a cluster whose name ends in ".retry".
var counterSuffixes = [numCounters]string{
	retry4xx:          ".retry.upstream_rq_4xx",
	retry5xx:          ".retry.upstream_rq_5xx",
	rqPendingOverflow: ".upstream_rq_pending_overflow",
	rqPerTryTimeout:   ".upstream_rq_per_try_timeout",
	rqTimeout:         ".upstream_rq_timeout",
	rq2xx:             ".upstream_rq_2xx",
	rq4xx:             ".upstream_rq_4xx",
	rq5xx:             ".upstream_rq_5xx",
}

var counterOrder = [numCounters]int{retry4xx, retry5xx, rqPendingOverflow, rqPerTryTimeout, rqTimeout, rq2xx, rq4xx, rq5xx}

const (
	clusterPrefix     = "cluster."
	membershipSuffix  = ".membership_total"
	latencyHistSuffix = ".upstream_rq_time"
)

// Flush implements stats.Sink. With no client connected it does nothing (as
// in Envoy, the windows only fill while someone watches). Otherwise it adds
// one sample per cluster to the rolling windows and sends every client the
// HystrixCommand and HystrixThreadPool events of each cluster, in name
// order (Envoy's is hash-map order), followed by a keep-alive ping. How
// clusters are found: see collect.
func (s *Sink) Flush(snap *stats.Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.clients) == 0 || s.closed {
		return
	}
	clusters := collect(snap)
	s.index = (s.index + 1) % s.windowSize
	maxPending := func(string) uint64 { return defaultMaxPendingRequests }
	if fn := s.maxPending.Load(); fn != nil {
		maxPending = *fn
	}
	var now int64
	if snap != nil {
		now = snap.Time.Unix()
	}
	// Two events take about 2.5 KB per cluster; one allocation covers them.
	b := make([]byte, 0, len(clusters)*eventBytesPerCluster+len(ping))
	for _, c := range clusters {
		r := s.rolling(c)
		pending := maxPending(c.name)
		b = appendCommand(b, commandFields{
			name:          c.name,
			now:           now,
			roll:          r,
			latency:       c.latency,
			maxPending:    pending,
			reportingHost: c.reportingHost,
			windowMs:      s.flushMs,
		})
		b = appendThreadPool(b, c.name, pending, c.reportingHost, s.flushMs)
	}
	b = append(b, ping...)
	for name := range s.windows {
		if !hasCluster(clusters, name) {
			delete(s.windows, name)
		}
	}
	for c := range s.clients {
		select {
		case c.frames <- b:
		default:
			s.dropped.Add(1)
		}
	}
}

// ping is the keep-alive comment event written after every flush.
const ping = ":\n\n"

// eventBytesPerCluster sizes a flush's block: the HystrixCommand and
// HystrixThreadPool events of one cluster with a full latencyExecute.
const eventBytesPerCluster = 2816

func hasCluster(cs []*clusterStats, name string) bool {
	i := sort.Search(len(cs), func(i int) bool { return cs[i].name >= name })
	return i < len(cs) && cs[i].name == name
}

// rolling records c's sample in its window and returns the change over the
// window. Called with s.mu held, after s.index moved to this flush's slot.
func (s *Sink) rolling(c *clusterStats) sample {
	v := &c.counters
	timeouts := v[rqTimeout] + v[rqPerTryTimeout]
	// Timeouts are answered 504 and so are in upstream_rq_5xx too; Envoy
	// takes them out of errors with unsigned arithmetic, and so do we.
	errs := v[rq5xx] + v[retry5xx] + v[rq4xx] + v[retry4xx] - v[rqTimeout]
	cur := sample{
		errors:   errs,
		success:  v[rq2xx],
		timeouts: timeouts,
		rejected: v[rqPendingOverflow],
		total:    errs + timeouts + v[rq2xx] + v[rqPendingOverflow],
	}
	w := s.windows[c.name]
	if w == nil {
		// A new window starts full of the current values: every rolling
		// count is 0 until the next flush.
		w = &clusterWindow{ring: make([]sample, s.windowSize)}
		for i := range w.ring {
			w.ring[i] = cur
		}
		s.windows[c.name] = w
	}
	w.ring[s.index] = cur
	old := w.ring[(s.index+1)%s.windowSize]
	return sample{
		errors:   since(cur.errors, old.errors),
		success:  since(cur.success, old.success),
		total:    since(cur.total, old.total),
		timeouts: since(cur.timeouts, old.timeouts),
		rejected: since(cur.rejected, old.rejected),
	}
}

// since is newest minus oldest, or 0 when the value went backwards
// (/reset_counters); the window recovers once the reset leaves it.
func since(cur, old uint64) uint64 {
	if cur < old {
		return 0
	}
	return cur - old
}

// collect finds the clusters of snap and their values, sorted by name.
//
// A cluster is a name X with a cluster.X.membership_total gauge, or the
// envoy.cluster_name tag X of a counter or histogram named exactly
// cluster.X.<one of the stats read here> (which finds clusters whose gauge a
// stats_matcher rejected). Values are then matched by full name under
// cluster.X., which is exact for cluster names holding dots (the default
// tag extractor cuts those at the first dot) and does not depend on the
// tag-extraction settings.
func collect(snap *stats.Snapshot) []*clusterStats {
	if snap == nil {
		return nil
	}
	byName := make(map[string]*clusterStats)
	get := func(name string) *clusterStats {
		cs := byName[name]
		if cs == nil {
			cs = &clusterStats{name: name}
			byName[name] = cs
		}
		return cs
	}
	for i := range snap.Gauges {
		g := &snap.Gauges[i]
		if name, ok := clusterOf(g.Name, membershipSuffix); ok {
			get(name).reportingHost = g.Value
		}
	}
	for i := range snap.Counters {
		c := &snap.Counters[i]
		if !strings.HasPrefix(c.Name, clusterPrefix) {
			continue
		}
		tagged := taggedCluster(&c.Metric)
		for _, k := range counterOrder {
			name, ok := clusterOf(c.Name, counterSuffixes[k])
			if !ok {
				continue
			}
			if name == tagged {
				get(name).counters[k] = c.Value
				break
			}
			if cs := byName[name]; cs != nil {
				cs.counters[k] = c.Value
				break
			}
		}
	}
	for i := range snap.Histograms {
		h := &snap.Histograms[i]
		name, ok := clusterOf(h.Name, latencyHistSuffix)
		if !ok {
			continue
		}
		cs := byName[name]
		if cs == nil && name == taggedCluster(&h.Metric) {
			cs = get(name)
		}
		if cs != nil {
			cs.latency = h.Interval.Quantiles(latencyQuantiles[:])
		}
	}
	out := make([]*clusterStats, 0, len(byName))
	for _, cs := range byName {
		out = append(out, cs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// taggedCluster is m's envoy.cluster_name tag, or "".
func taggedCluster(m *stats.Metric) string {
	for _, t := range m.Tags {
		if t.Name == tags.ClusterName {
			return t.Value
		}
	}
	return ""
}

// clusterOf returns X when full is cluster.X<suffix> with X not empty.
func clusterOf(full, suffix string) (string, bool) {
	rest, ok := strings.CutPrefix(full, clusterPrefix)
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, suffix)
	if !ok || name == "" {
		return "", false
	}
	return name, true
}
