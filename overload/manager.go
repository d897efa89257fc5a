package overload

import (
	"context"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/stats"
)

// heapMetric is the Go runtime's count of heap bytes in objects (live ones and those not yet
// swept), the closest to tcmalloc's in-use heap that Envoy's fixed_heap reads.
const heapMetric = "/memory/classes/heap/objects:bytes"

// monitorStats are overload.<monitor>.*.
type monitorStats struct {
	Pressure       stats.Gauge   `stat:"pressure,never_import"`
	FailedUpdates  stats.Counter `stat:"failed_updates"`
	SkippedUpdates stats.Counter `stat:"skipped_updates"`
}

// actionStats are overload.<action>.*.
type actionStats struct {
	Active       stats.Gauge `stat:"active,never_import"`
	ScalePercent stats.Gauge `stat:"scale_percent,never_import"`
}

// shrinkStats are shrink_heap's own: overload.envoy.overload_actions.shrink_heap.*.
type shrinkStats struct {
	ShrinkCount stats.Counter `stat:"shrink_count"`
}

// managerStats are overload.*.
type managerStats struct {
	RefreshIntervalDelay stats.Histogram `stat:"refresh_interval_delay,unit=ms"`
}

type monitor struct {
	cfg      Monitor
	stats    monitorStats
	pressure float64
	ok       bool // the last update succeeded
}

type action struct {
	cfg   Action
	stats actionStats
	state float64
	// shrink_heap only: its shrink_count, and when it last ran (zero: not while saturated).
	shrink     shrinkStats
	lastShrink time.Time
}

// Manager is the overload manager. Its Run goroutine owns the monitors and actions: it reads
// the resources every refresh interval, evaluates the triggers and publishes each action's
// state to State, which the listeners and connection managers read with single atomic loads.
type Manager struct {
	cfg      Config
	clock    clock.Clock
	state    *State
	monitors []*monitor
	actions  []*action
	stats    managerStats
	regs     []*stats.Registration
	// heap reads the heap size; a field so that tests can fail it.
	heap func() (uint64, bool)
	// freeOSMemory returns memory to the OS (shrink_heap); heapFree reads the free heap
	// bytes not yet returned. Fields so that tests can watch them.
	freeOSMemory func()
	heapFree     func() uint64
	lastRefresh  time.Time
}

// New builds the manager of cfg, registering its stats in store. cfg may be nil (no
// overload_manager): the manager then has a nil State and Run returns at once.
func New(cfg *Config, store *stats.Store, clk clock.Clock) *Manager {
	if clk == nil {
		clk = clock.Real()
	}
	m := &Manager{clock: clk, heap: readHeap, freeOSMemory: debug.FreeOSMemory, heapFree: readHeapFree}
	if cfg == nil {
		return m
	}
	m.cfg = *cfg
	m.state = &State{}
	m.regs = append(m.regs, store.Register("overload.", &m.stats))
	for _, mc := range cfg.Monitors {
		mon := &monitor{cfg: mc}
		m.regs = append(m.regs, store.Register("overload."+mc.Name+".", &mon.stats))
		if mc.MaxConnections > 0 {
			m.state.maxConns = mc.MaxConnections
		}
		m.monitors = append(m.monitors, mon)
	}
	for _, ac := range cfg.Actions {
		a := &action{cfg: ac}
		if ac.Name == ReduceTimeouts {
			m.state.timers, m.state.hasTimers = ac.Timers, true
			m.state.timersChanged = make(chan struct{})
		}
		m.regs = append(m.regs, store.Register("overload."+ac.Name+".", &a.stats))
		if ac.Name == ShrinkHeap {
			m.regs = append(m.regs, store.Register("overload."+ac.Name+".", &a.shrink))
		}
		m.actions = append(m.actions, a)
	}
	return m
}

// State is what the data path reads; nil without an overload manager.
func (m *Manager) State() *State { return m.state }

// Close unregisters the stats.
func (m *Manager) Close() {
	for _, r := range m.regs {
		r.Unregister()
	}
}

// Run refreshes every refresh interval until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	if m.state == nil {
		return
	}
	tick := make(chan struct{}, 1)
	for {
		m.Refresh()
		t := m.clock.AfterFunc(m.cfg.RefreshInterval, func() {
			select {
			case tick <- struct{}{}:
			default:
			}
		})
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-tick:
		}
	}
}

// Refresh reads every monitor, evaluates the actions and publishes their states. Run calls it
// every refresh interval; it must not be called concurrently with itself.
func (m *Manager) Refresh() {
	if m.state == nil {
		return
	}
	now := m.clock.Now()
	if !m.lastRefresh.IsZero() {
		delay := now.Sub(m.lastRefresh) - m.cfg.RefreshInterval
		m.stats.RefreshIntervalDelay.Record(uint64(max(delay, 0).Milliseconds()))
	}
	m.lastRefresh = now
	for _, mon := range m.monitors {
		m.update(mon)
	}
	for _, a := range m.actions {
		m.evaluate(a, now)
	}
}

// update reads one monitor's pressure; a failed read keeps the previous pressure, as Envoy's
// triggers keep their state on an error.
func (m *Manager) update(mon *monitor) {
	var p float64
	switch {
	case mon.cfg.MaxHeapBytes > 0:
		used, ok := m.heap()
		if !ok {
			mon.stats.FailedUpdates.Inc()
			return
		}
		p = float64(used) / float64(mon.cfg.MaxHeapBytes)
	case mon.cfg.MaxConnections > 0:
		p = float64(m.state.conns.Load()) / float64(mon.cfg.MaxConnections)
	}
	mon.pressure, mon.ok = p, true
	mon.stats.Pressure.Set(uint64(math.Round(min(p, 1) * 100)))
}

// evaluate sets the action's state to the highest of its triggers' and publishes it.
func (m *Manager) evaluate(a *action, now time.Time) {
	var s float64
	for _, t := range a.cfg.Triggers {
		if mon := m.monitor(t.Monitor); mon != nil && mon.ok {
			s = max(s, t.state(mon.pressure))
		}
	}
	a.state = s
	fixed := uint32(math.Round(s * scaleOne))
	saturated := fixed >= scaleOne
	var active uint64
	if saturated {
		active = 1
	}
	a.stats.Active.Set(active)
	a.stats.ScalePercent.Set(uint64(math.Floor(s * 100)))
	switch a.cfg.Name {
	case StopAcceptingRequests:
		m.state.stopRequests.Store(fixed)
	case DisableHTTPKeepalive:
		m.state.disableKeepalive.Store(fixed)
	case RejectIncomingConnections:
		m.state.rejectConns.Store(fixed)
	case StopAcceptingConnections:
		m.state.setPaused(saturated)
	case ReduceTimeouts:
		m.state.setReduceTimeouts(fixed)
	case ShrinkHeap:
		m.shrink(a, saturated, now)
	}
}

// shrink runs shrink_heap as Envoy's heap shrinker does: every interval while the action is
// saturated it counts shrink_count and, when the free heap not yet returned holds at least
// max_unfreed_memory_bytes, returns it to the OS. The first run is at the refresh that
// finds the action saturated.
func (m *Manager) shrink(a *action, saturated bool, now time.Time) {
	if !saturated {
		a.lastShrink = time.Time{}
		return
	}
	if !a.lastShrink.IsZero() && now.Sub(a.lastShrink) < a.cfg.ShrinkInterval {
		return
	}
	a.lastShrink = now
	if m.heapFree() >= a.cfg.MaxUnfreedBytes {
		m.freeOSMemory()
	}
	a.shrink.ShrinkCount.Inc()
}

func (m *Manager) monitor(name string) *monitor {
	for _, mon := range m.monitors {
		if mon.cfg.Name == name {
			return mon
		}
	}
	return nil
}

// readHeap returns the bytes of heap objects.
func readHeap() (uint64, bool) {
	s := []metrics.Sample{{Name: heapMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0, false
	}
	return s[0].Value.Uint64(), true
}

// heapFreeMetric is the Go runtime's count of free heap bytes not yet returned to the OS,
// what tcmalloc's release to the system would free.
const heapFreeMetric = "/memory/classes/heap/free:bytes"

// readHeapFree returns the free heap bytes not yet returned to the OS; 0 if unknown.
func readHeapFree() uint64 {
	s := []metrics.Sample{{Name: heapFreeMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
