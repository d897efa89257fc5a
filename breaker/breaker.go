package breaker

import (
	"errors"
	"sync/atomic"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/procpin"
	"github.com/legateproxy/legate/runtime"
	"github.com/legateproxy/legate/stats"
)

// RuntimeSource gives the current runtime snapshot; *runtime.Runtime implements it. Its
// circuit_breakers.<cluster>.<default|high>.max_* keys override the configured thresholds,
// read at every acquisition so that /runtime_modify and RTDS changes apply at once (Envoy's
// ResourceManagerImpl).
type RuntimeSource interface {
	Snapshot() *runtime.Snapshot
}

// ErrOverflow is returned by TryAcquire when the resource is at its limit (the request or
// connection overflows the circuit breaker).
var ErrOverflow = errors.New("circuit breaker overflow")

// Resource is one bounded count (Envoy's ResourceImpl). Safe for concurrent use; the zero value
// is not usable, Resources live inside a Breaker.
//
// The count is split so that a request far from the limit writes only its own P's cache line:
// granted is the number of units handed out, either in use or leased in batches to a P's line,
// where they wait free for that P's next acquisitions (Count is granted minus the free units).
// granted never passes the limit (a compare-and-swap against it takes a batch or a unit), so
// units in use never do either: max_* stays a hard cap. Near the limit (less than two batches
// left) units are taken and returned one at a time on granted, and an acquisition that finds
// granted at the limit first takes back every P's free units, so that units parked on other Ps
// never turn a request away.
type Resource struct {
	_       [64]byte // granted's line is written once per batch: keep the fields read per request off it
	granted atomic.Uint64
	_       [56]byte
	lines   atomic.Pointer[procpin.Lines] // free leased units per P; made on the first batch
	max     uint64
	// rt and key, when rt is non-nil, let the runtime key override max.
	rt  RuntimeSource
	key string
	// budget, when non-nil, makes the limit dynamic (retry_budget on the retries resource).
	budget *retryBudget
	// exact turns leasing off: the remaining_* gauge, which moves with every unit, or a retry
	// budget's limit, which moves with other resources, needs the count on one line.
	exact bool
	// lease is the number of lines leases use, in the high half, and batch(max) for that many,
	// in the low half: set when the Breaker is built (asking the runtime for GOMAXPROCS takes
	// its scheduler lock) and raised when the lines grow with GOMAXPROCS, so that the units
	// waiting free stay within a quarter of the limit on the lines there are.
	lease atomic.Uint64

	open      *stats.Gauge
	remaining *stats.Gauge // nil without track_remaining
}

// maxLeaseLines bounds a Resource's lines (1 KiB); on more Ps, GOMAXPROCS/maxLeaseLines of them
// share a line (4 on 64 cores) instead of all sharing granted. The lines start at GOMAXPROCS
// and grow to it when it rises (procpin.Lines), up to this bound.
const maxLeaseLines = 16

// retryBudget computes the retry limit from the active and pending requests of the priority.
type retryBudget struct {
	percent           float64
	minConcurrency    uint64
	requests, pending *Resource
}

// Max returns the current limit (for a retry budget, the limit the budget allows right now).
func (r *Resource) Max() uint64 {
	if b := r.budget; b != nil {
		active := float64(b.requests.Count() + b.pending.Count())
		return max(b.minConcurrency, uint64(active*b.percent/100))
	}
	if r.rt != nil {
		if snap := r.rt.Snapshot(); snap != nil {
			return snap.Uint64(r.key, r.max)
		}
	}
	return r.max
}

// Count returns the number of units in use. Under concurrent acquisitions it is a snapshot
// that may lag by the units moving between granted and a P's line at that moment.
func (r *Resource) Count() uint64 {
	free := r.freeUnits()
	g := r.granted.Load()
	if free > g {
		return 0
	}
	return g - free
}

// freeUnits sums the leased free units of every P.
func (r *Resource) freeUnits() uint64 {
	if l := r.lines.Load(); l != nil {
		return l.Sum()
	}
	return 0
}

// batch is the number of units a P leases at once for limit: an eighth of the limit split over
// the lines, at most 32, so that at most a quarter of the limit waits free on the lines (a P
// returns a batch once it holds two). Below 2 leasing is off.
func (r *Resource) batch(limit uint64) uint64 {
	v := r.lease.Load()
	if limit == r.max {
		return v & (1<<32 - 1)
	}
	return r.batchFor(limit, v>>32)
}

func (r *Resource) batchFor(limit, nlines uint64) uint64 {
	if r.exact || nlines == 0 {
		return 0
	}
	b := min(limit/(8*nlines), 32)
	if b < 2 {
		return 0
	}
	return b
}

// TryAcquire takes one unit, or returns ErrOverflow when Count has reached Max.
func (r *Resource) TryAcquire() error {
	limit := r.Max()
	if l := r.lines.Load(); l != nil && r.granted.Load() <= limit {
		// Take a free unit from the calling P's line. (In line, not a function of its own:
		// every request acquires, and the call was a fifth of the acquisition.)
		free := l.Of(procpin.Pin())
		for {
			f := free.Load()
			if f == 0 {
				break
			}
			if free.CompareAndSwap(f, f-1) {
				procpin.Unpin()
				return nil
			}
		}
		procpin.Unpin()
	}
	return r.acquireSlow(limit)
}

// acquireSlow leases a batch to the calling P and takes one unit of it, or, near the limit,
// takes one unit from granted.
func (r *Resource) acquireSlow(limit uint64) error {
	b := r.batch(limit)
	for {
		c := r.granted.Load()
		if b != 0 && c+2*b <= limit {
			if r.granted.CompareAndSwap(c, c+b) {
				r.leased(b - 1)
				r.publish(c+b, limit)
				return nil
			}
			continue
		}
		if c >= limit {
			if r.reclaim() != 0 {
				continue
			}
			r.publish(c, limit)
			return ErrOverflow
		}
		if r.granted.CompareAndSwap(c, c+1) {
			r.publish(c+1, limit)
			return nil
		}
	}
}

// leased puts n free units on the calling P's line, making the lines on the first batch (and
// growing them when a P beyond them asked for one).
func (r *Resource) leased(n uint64) {
	l := procpin.LoadLines(&r.lines, maxLeaseLines)
	l.Of(procpin.Pin()).Add(n)
	procpin.Unpin()
	if nlines := uint64(l.Len()); nlines > r.lease.Load()>>32 {
		r.setLines(nlines)
	}
}

// setLines makes batches follow nlines lines, unless a concurrent caller set as many or more.
func (r *Resource) setLines(nlines uint64) {
	for {
		v := r.lease.Load()
		if v>>32 >= nlines || r.lease.CompareAndSwap(v, nlines<<32|r.batchFor(r.max, nlines)) {
			return
		}
	}
}

// reclaim takes every P's free units back into granted and returns how many there were.
func (r *Resource) reclaim() uint64 {
	l := r.lines.Load()
	if l == nil {
		return 0
	}
	var n uint64
	for i := range l.Len() {
		if free := l.Line(i); free.Load() != 0 {
			n += free.Swap(0)
		}
	}
	if n != 0 {
		r.granted.Add(-n)
	}
	return n
}

// Release returns one unit taken by TryAcquire. Releasing more than was acquired is a caller
// bug: with nothing granted the count stays at zero; with units leased to Ps it frees one that
// was not taken. (Telling the two apart would need granted and every P's line read at one
// instant, which a lock-free count cannot give.)
func (r *Resource) Release() {
	limit := r.Max()
	if l := r.lines.Load(); l != nil && r.open.Value() == 0 {
		if b := r.batch(limit); b != 0 && r.granted.Load()+2*b <= limit {
			// Free the unit on the calling P's line, and return a batch to granted when the
			// line holds two. (In line, as TryAcquire's take.)
			free := l.Of(procpin.Pin())
			if f := free.Add(1); f > 2*b && free.CompareAndSwap(f, f-b) {
				r.granted.Add(-b)
			}
			procpin.Unpin()
			return
		}
	}
	for {
		c := r.granted.Load()
		if c == 0 {
			return
		}
		if r.granted.CompareAndSwap(c, c-1) {
			r.publish(c-1, limit)
			return
		}
	}
}

// publish updates the gauges after a change that left granted units handed out: open is 1 when
// no further unit can be taken.
func (r *Resource) publish(granted, limit uint64) {
	count := granted
	if count >= limit {
		count = r.Count() // free units on the lines are not in use
	}
	var open uint64
	if count >= limit {
		open = 1
	}
	// Set only what changes: every request acquires and releases, and an unconditional Set
	// made every core write the gauge's line twice per request.
	if r.open.Value() != open || !r.open.Used() {
		r.open.Set(open)
	}
	if r.remaining != nil {
		r.remaining.Set(limit - min(count, limit))
	}
}

// OpenStats are the cluster.<name>.circuit_breakers.<priority>.*_open gauges.
type OpenStats struct {
	CxOpen        stats.Gauge `stat:"cx_open"`
	CxPoolOpen    stats.Gauge `stat:"cx_pool_open"`
	RqOpen        stats.Gauge `stat:"rq_open"`
	RqPendingOpen stats.Gauge `stat:"rq_pending_open"`
	RqRetryOpen   stats.Gauge `stat:"rq_retry_open"`
}

// RemainingStats are the remaining_* gauges published with track_remaining.
type RemainingStats struct {
	RemainingCx      stats.Gauge `stat:"remaining_cx"`
	RemainingCxPools stats.Gauge `stat:"remaining_cx_pools"`
	RemainingPending stats.Gauge `stat:"remaining_pending"`
	RemainingRetries stats.Gauge `stat:"remaining_retries"`
	RemainingRq      stats.Gauge `stat:"remaining_rq"`
}

// Priority holds the resources of one routing priority.
type Priority struct {
	Connections     Resource
	PendingRequests Resource
	Requests        Resource
	Retries         Resource
	ConnectionPools Resource

	thresholds config.Thresholds
	open       OpenStats
	remaining  *RemainingStats
}

// Thresholds returns the configured thresholds of the priority.
func (p *Priority) Thresholds() config.Thresholds { return p.thresholds }

// Breaker is the circuit-breaker state of one cluster: both routing priorities. Safe for
// concurrent use.
type Breaker struct {
	priorities [config.NumPriorities]Priority
	regs       []*stats.Registration
}

// priorityNames are the stat name segments of the routing priorities.
var priorityNames = [config.NumPriorities]string{"default", "high"}

// New builds the resources of cb and registers their gauges under
// prefix+"circuit_breakers.<default|high>." (prefix is "cluster.<stat name>."). A nil store
// leaves the gauges unregistered (they still count). With rt non-nil, the runtime keys
// circuit_breakers.<cluster>.<default|high>.max_connections, max_pending_requests,
// max_requests, max_retries and max_connection_pools override the thresholds (cluster is the
// cluster's name, as Envoy spells the keys).
func New(cb config.CircuitBreakers, store *stats.Store, prefix string, rt RuntimeSource, cluster string) *Breaker {
	b := &Breaker{}
	nlines := uint64(min(procpin.Slots(), maxLeaseLines))
	for i := range b.priorities {
		p := &b.priorities[i]
		t := cb.Thresholds[i]
		p.thresholds = t
		pools := uint64(t.MaxConnectionPools)
		if pools == 0 {
			pools = ^uint64(0)
		}
		keys := "circuit_breakers." + cluster + "." + priorityNames[i] + "."
		set := func(r *Resource, limit uint64, open *stats.Gauge, key string) {
			r.max, r.open = limit, open
			if rt != nil {
				r.rt, r.key = rt, keys+key
			}
		}
		set(&p.Connections, uint64(t.MaxConnections), &p.open.CxOpen, "max_connections")
		set(&p.PendingRequests, uint64(t.MaxPendingRequests), &p.open.RqPendingOpen, "max_pending_requests")
		set(&p.Requests, uint64(t.MaxRequests), &p.open.RqOpen, "max_requests")
		set(&p.Retries, uint64(t.MaxRetries), &p.open.RqRetryOpen, "max_retries")
		set(&p.ConnectionPools, pools, &p.open.CxPoolOpen, "max_connection_pools")
		if rb := t.RetryBudget; rb != nil {
			p.Retries.exact = true
			p.Retries.budget = &retryBudget{
				percent:        rb.BudgetPercent,
				minConcurrency: uint64(rb.MinRetryConcurrency),
				requests:       &p.Requests,
				pending:        &p.PendingRequests,
			}
		}
		if t.TrackRemaining {
			p.remaining = &RemainingStats{}
			p.Connections.remaining = &p.remaining.RemainingCx
			p.ConnectionPools.remaining = &p.remaining.RemainingCxPools
			p.PendingRequests.remaining = &p.remaining.RemainingPending
			p.Retries.remaining = &p.remaining.RemainingRetries
			p.Requests.remaining = &p.remaining.RemainingRq
			for _, r := range []*Resource{&p.Connections, &p.ConnectionPools, &p.PendingRequests, &p.Retries, &p.Requests} {
				r.exact = true
				r.remaining.Set(r.Max())
			}
		}
		for _, r := range []*Resource{&p.Connections, &p.ConnectionPools, &p.PendingRequests, &p.Retries, &p.Requests} {
			r.setLines(nlines)
		}
		if store != nil {
			at := prefix + "circuit_breakers." + priorityNames[i] + "."
			b.regs = append(b.regs, store.Register(at, &p.open))
			if p.remaining != nil {
				b.regs = append(b.regs, store.Register(at, p.remaining))
			}
		}
	}
	return b
}

// Priority returns the resources of routing priority p (config.PriorityDefault or
// config.PriorityHigh; anything else is treated as default).
func (b *Breaker) Priority(p config.Priority) *Priority {
	if p >= config.NumPriorities {
		p = config.PriorityDefault
	}
	return &b.priorities[p]
}

// Close unregisters the gauges. The resources keep working for requests still holding them.
func (b *Breaker) Close() {
	for _, r := range b.regs {
		r.Unregister()
	}
}
