package breaker

import (
	"errors"
	"sync/atomic"

	"github.com/legateproxy/legate/config"
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
type Resource struct {
	max   uint64
	count atomic.Uint64
	// rt and key, when rt is non-nil, let the runtime key override max.
	rt  RuntimeSource
	key string
	// budget, when non-nil, makes the limit dynamic (retry_budget on the retries resource).
	budget *retryBudget

	open      *stats.Gauge
	remaining *stats.Gauge // nil without track_remaining
}

// retryBudget computes the retry limit from the active and pending requests of the priority.
type retryBudget struct {
	percent           float64
	minConcurrency    uint64
	requests, pending *Resource
}

// Max returns the current limit (for a retry budget, the limit the budget allows right now).
func (r *Resource) Max() uint64 {
	if b := r.budget; b != nil {
		active := float64(b.requests.count.Load() + b.pending.count.Load())
		return max(b.minConcurrency, uint64(active*b.percent/100))
	}
	if r.rt != nil {
		if snap := r.rt.Snapshot(); snap != nil {
			return snap.Uint64(r.key, r.max)
		}
	}
	return r.max
}

// Count returns the number of units in use.
func (r *Resource) Count() uint64 { return r.count.Load() }

// TryAcquire takes one unit, or returns ErrOverflow when Count has reached Max.
func (r *Resource) TryAcquire() error {
	limit := r.Max()
	for {
		c := r.count.Load()
		if c >= limit {
			r.publish(c, limit)
			return ErrOverflow
		}
		if r.count.CompareAndSwap(c, c+1) {
			r.publish(c+1, limit)
			return nil
		}
	}
}

// Release returns one unit taken by TryAcquire. Releasing more than was acquired is a caller
// bug; the count stays at zero.
func (r *Resource) Release() {
	for {
		c := r.count.Load()
		if c == 0 {
			return
		}
		if r.count.CompareAndSwap(c, c-1) {
			r.publish(c-1, r.Max())
			return
		}
	}
}

// publish updates the gauges after a change: open is 1 when no further unit can be taken.
func (r *Resource) publish(count, limit uint64) {
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
				r.remaining.Set(r.Max())
			}
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
