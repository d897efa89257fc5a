package listener

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legateproxy/legate/internal/clock"
)

// DrainStrategy is --drain-strategy (Envoy's Server::DrainStrategy).
type DrainStrategy uint8

const (
	// DrainGradual makes DrainClose true for a share of calls that grows linearly from 0 at the
	// start of the drain to 1 at the end of the drain time ("gradual", the default).
	DrainGradual DrainStrategy = iota
	// DrainImmediate makes DrainClose true for every call as soon as draining starts.
	DrainImmediate
)

// DrainDirection says which listeners a server drain covers (Envoy's Network::DrainDirection).
type DrainDirection uint8

const (
	// DrainAll covers every listener.
	DrainAll DrainDirection = iota
	// DrainInboundOnly covers listeners whose traffic_direction is INBOUND.
	DrainInboundOnly
)

// covers reports whether a drain in direction d includes a listener with the given
// traffic_direction.
func (d DrainDirection) covers(inbound bool) bool { return d == DrainAll || inbound }

// DrainConfig configures a DrainManager.
type DrainConfig struct {
	// Time is --drain-time-s: how long a drain lasts (Envoy's default is 600 s; the zero value
	// here means drains end at once).
	Time time.Duration
	// Strategy is --drain-strategy.
	Strategy DrainStrategy
	// Clock times drains; nil means the system clock.
	Clock clock.Clock
	// Rand returns uniformly distributed values for the gradual strategy; nil means
	// math/rand/v2.
	Rand func() uint64
}

// DrainManager is the server's drain manager (Envoy's Server::DrainManagerImpl): it runs drain
// sequences, says which traffic direction is draining and decides, connection by connection,
// whether a connection should be closed now. The listener manager owns one and applies it to
// every listener; connection handlers reach it through Conn.DrainClose.
//
// Safe for concurrent use. Draining and the decision are lock-free; starting a drain takes mu.
type DrainManager struct {
	cfg DrainConfig

	state atomic.Pointer[serverDrain] // nil until the first drain starts

	mu     sync.Mutex // guards timers, hooks, closed
	timers map[*drainTimer]struct{}
	hooks  []func(DrainDirection, time.Time)
	closed bool
}

// serverDrain is an immutable record of the server drain in progress.
type serverDrain struct {
	dir   DrainDirection
	start time.Time
}

type drainTimer struct{ t clock.Timer }

// NewDrainManager returns a drain manager that is not draining.
func NewDrainManager(cfg DrainConfig) *DrainManager {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Uint64
	}
	if cfg.Time < 0 {
		cfg.Time = 0
	}
	return &DrainManager{cfg: cfg, timers: map[*drainTimer]struct{}{}}
}

// DrainTime returns --drain-time-s.
func (d *DrainManager) DrainTime() time.Duration { return d.cfg.Time }

// Draining reports whether a drain covering dir is running: any drain covers
// DrainInboundOnly; only a DrainAll drain covers DrainAll.
func (d *DrainManager) Draining(dir DrainDirection) bool {
	s := d.state.Load()
	return s != nil && (dir == DrainInboundOnly || s.dir == DrainAll)
}

// StartDrainSequence starts draining the listeners dir covers and calls done (on a timer
// goroutine) when the drain time has passed. Starting a drain while one runs widens the
// direction when dir is wider and keeps the original start time; done still runs one drain
// time after this call. A nil done is allowed. After Close, StartDrainSequence does nothing.
func (d *DrainManager) StartDrainSequence(dir DrainDirection, done func()) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	now := d.cfg.Clock.Now()
	cur := d.state.Load()
	next := cur
	switch {
	case cur == nil:
		next = &serverDrain{dir: dir, start: now}
	case cur.dir == DrainInboundOnly && dir == DrainAll:
		next = &serverDrain{dir: DrainAll, start: now}
	}
	d.state.Store(next)
	hooks := d.hooks
	if done != nil {
		dt := &drainTimer{}
		d.timers[dt] = struct{}{}
		dt.t = d.cfg.Clock.AfterFunc(d.cfg.Time, func() {
			d.mu.Lock()
			_, pending := d.timers[dt]
			delete(d.timers, dt)
			d.mu.Unlock()
			if pending {
				done()
			}
		})
	}
	d.mu.Unlock()
	if next != cur {
		for _, h := range hooks {
			h(next.dir, next.start)
		}
	}
}

// onDrain registers h to be called with the direction and start time of each drain that
// starts or widens. The listener manager uses it to mark its filter chains.
func (d *DrainManager) onDrain(h func(DrainDirection, time.Time)) {
	d.mu.Lock()
	d.hooks = append(d.hooks, h)
	d.mu.Unlock()
}

// current returns the running drain, or nil.
func (d *DrainManager) current() *serverDrain { return d.state.Load() }

// closeNow decides for one connection of something that began draining at start: immediate
// drains always close; gradual ones close with probability elapsed/drain time.
func (d *DrainManager) closeNow(start time.Time) bool {
	if d.cfg.Strategy == DrainImmediate || d.cfg.Time <= 0 {
		return true
	}
	elapsed := d.cfg.Clock.Now().Sub(start)
	if elapsed >= d.cfg.Time {
		return true
	}
	if elapsed <= 0 {
		return false
	}
	return d.cfg.Rand()%uint64(d.cfg.Time) < uint64(elapsed)
}

// Close cancels pending drain completions and refuses new drains. It does not wait for
// completion callbacks already running.
func (d *DrainManager) Close() {
	d.mu.Lock()
	d.closed = true
	for dt := range d.timers {
		dt.t.Stop()
		delete(d.timers, dt)
	}
	d.mu.Unlock()
}

// drainSignal marks one filter chain as draining: the earliest start time of the drains that
// cover it and a channel closed when the first one starts.
type drainSignal struct {
	start atomic.Pointer[time.Time]
	ch    chan struct{}
}

func newDrainSignal() *drainSignal { return &drainSignal{ch: make(chan struct{})} }

// begin marks the drain as started at t; later calls keep the first start.
func (s *drainSignal) begin(t time.Time) {
	if s.start.CompareAndSwap(nil, &t) {
		close(s.ch)
	}
}
