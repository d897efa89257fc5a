package outlier

import (
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/runtime"
)

// Runtime supplies the outlier_detection.* runtime overrides. *runtime.Runtime implements it.
// Snapshot may return nil, meaning no overrides.
type Runtime interface {
	Snapshot() *runtime.Snapshot
}

// Options are a Detector's dependencies. Every field is optional.
type Options struct {
	// ClusterName is the cluster's name, written in event log lines.
	ClusterName string
	// Hosts are the cluster's hosts at creation, of every priority. Later changes go through
	// UpdateHosts.
	Hosts []*host.Host
	// Stats receives the outlier_detection.* statistics. Nil means a private, unregistered set.
	Stats *Stats
	// Runtime supplies runtime overrides. Nil means none.
	Runtime Runtime
	// Clock tells the time and runs the interval timer. Nil means clock.Real().
	Clock clock.Clock
	// Random draws the enforcing_* percentages and the ejection jitter. It is called only on the
	// control path, under the detector's lock. Nil means math/rand/v2's Uint64.
	Random func() uint64
	// OnChange is called after a host is ejected or returned to service, once per change, after
	// its FailedOutlierCheck flag changed (Envoy's addChangedStateCb). It runs on the control
	// path with no detector lock held, so it may call any Detector method. Nil means no callback.
	OnChange func(h *host.Host)
	// EventLog receives one OutlierDetectionEvent JSON line per ejection decision and unejection
	// (cluster_manager.outlier_detection.event_log_path). Nil means no event log.
	EventLog *EventLog
}

// notifyQueue is how many monitors with a pending consecutive-failure ejection may wait for the
// control path before Report falls back to asking for a rescan.
const notifyQueue = 256

// Detector is the outlier detector of one cluster (Envoy's Outlier::DetectorImpl).
//
// Report is safe for concurrent use, takes no lock and allocates nothing. The control methods
// (UpdateHosts, ActiveHealthCheckPassed, Run's interval sweep) serialise on an internal mutex that
// Report never takes. The getters read atomics. A Detector is built by New and is not usable as a
// zero value.
type Detector struct {
	cfg      config.OutlierDetection
	split    bool
	cluster  string
	stats    *Stats
	rt       Runtime
	clock    clock.Clock
	random   func() uint64
	onChange func(*host.Host)
	events   *EventLog

	// index maps each host to its monitor for Report. It is replaced, never mutated.
	index atomic.Pointer[map[*host.Host]*monitor]

	queue  chan *monitor // monitors with pending bits, for the control path
	kick   chan struct{} // capacity 1: queue overflowed, rescan every monitor
	rescan atomic.Bool
	tick   chan struct{} // capacity 1: the interval timer fired

	afterArm func() // test hook: called by Run after each arming of the interval timer

	// rates holds the cluster's success-rate average and ejection threshold per origin, as
	// float64 bits; -1 when not computed in the last interval.
	rates [2]struct{ average, threshold atomic.Uint64 }

	// mu guards monitors, order, active, changed, the scratch slices and the control fields of
	// every monitor.
	mu       sync.Mutex
	monitors map[*host.Host]*monitor
	order    []*monitor // insertion order: the order of every sweep
	active   uint64     // hosts ejected; mirrors Stats.EjectionsActive
	changed  []*host.Host
	srHosts  []hostRate
	fpHosts  []hostRate
}

type hostRate struct {
	m    *monitor
	rate float64
}

// New builds the detector for one cluster from its outlier_detection spec. cfg must not be nil.
// The detector does nothing on its own until Run is started.
func New(cfg *config.OutlierDetection, opts Options) (*Detector, error) {
	if cfg == nil {
		return nil, errors.New("outlier: config is nil")
	}
	d := &Detector{
		cfg:      *cfg,
		split:    cfg.SplitExternalLocalOriginErrors,
		cluster:  opts.ClusterName,
		stats:    opts.Stats,
		rt:       opts.Runtime,
		clock:    opts.Clock,
		random:   opts.Random,
		onChange: opts.OnChange,
		events:   opts.EventLog,
		queue:    make(chan *monitor, notifyQueue),
		kick:     make(chan struct{}, 1),
		tick:     make(chan struct{}, 1),
		monitors: map[*host.Host]*monitor{},
	}
	if d.stats == nil {
		d.stats = &Stats{}
	}
	if d.clock == nil {
		d.clock = clock.Real()
	}
	if d.random == nil {
		d.random = rand.Uint64
	}
	for o := range d.rates {
		d.setClusterRates(origin(o), -1, -1)
	}
	d.mu.Lock()
	d.addLocked(opts.Hosts)
	d.mu.Unlock()
	return d, nil
}

// Report records one result for h. Results for hosts the detector does not know (never added, or
// removed) are ignored. Safe for concurrent use; takes no lock and does not allocate.
func (d *Detector) Report(h *host.Host, r Result) {
	if m := (*d.index.Load())[h]; m != nil {
		m.report(d, r)
	}
}

// UpdateHosts adds and removes hosts (Envoy's member update callback). A removed host that was
// ejected no longer counts in ejections_active; its flag is left as it is. Adding a known host
// or removing an unknown one does nothing.
func (d *Detector) UpdateHosts(added, removed []*host.Host) {
	d.mu.Lock()
	d.addLocked(added)
	n := 0
	for _, h := range removed {
		m := d.monitors[h]
		if m == nil {
			continue
		}
		if h.HasHealthFlag(host.FailedOutlierCheck) {
			d.active--
			d.stats.EjectionsActive.Dec()
		}
		m.removed = true
		delete(d.monitors, h)
		n++
	}
	if n > 0 {
		kept := d.order[:0]
		for _, m := range d.order {
			if !m.removed {
				kept = append(kept, m)
			}
		}
		clear(d.order[len(kept):])
		d.order = kept
		d.publishLocked()
	}
	d.mu.Unlock()
}

func (d *Detector) addLocked(hosts []*host.Host) {
	n := 0
	for _, h := range hosts {
		if h == nil || d.monitors[h] != nil {
			continue
		}
		m := newMonitor(h)
		d.monitors[h] = m
		d.order = append(d.order, m)
		n++
	}
	if n > 0 || d.index.Load() == nil {
		d.publishLocked()
	}
}

func (d *Detector) publishLocked() {
	idx := make(map[*host.Host]*monitor, len(d.monitors))
	for h, m := range d.monitors {
		idx[h] = m
	}
	d.index.Store(&idx)
}

// ActiveHealthCheckPassed is called by the active health checker after a check of h succeeds.
// When successful_active_health_check_uneject_host is on (the default), a host that is ejected
// and not failing active health checks is returned to service at once.
func (d *Detector) ActiveHealthCheckPassed(h *host.Host) {
	if !d.cfg.SuccessfulActiveHealthCheckUnejectHost {
		return
	}
	d.mu.Lock()
	m := d.monitors[h]
	if m != nil && !h.HasHealthFlag(host.FailedActiveHC) && h.HasHealthFlag(host.FailedOutlierCheck) {
		d.unejectLocked(m, d.clock.Now())
	}
	d.unlockAndNotify()
}

// SuccessRate returns h's external-origin success rate (0..100) over the last interval, or -1
// when the detector does not know h or the host had too little traffic (below the smaller of
// success_rate_request_volume and failure_percentage_request_volume). /clusters prints it.
func (d *Detector) SuccessRate(h *host.Host) float64 { return d.hostRate(h, external) }

// LocalOriginSuccessRate is SuccessRate for local-origin results; it stays -1 unless
// split_external_local_origin_errors is set.
func (d *Detector) LocalOriginSuccessRate(h *host.Host) float64 { return d.hostRate(h, local) }

func (d *Detector) hostRate(h *host.Host, o origin) float64 {
	if m := (*d.index.Load())[h]; m != nil {
		return m.rate(o)
	}
	return -1
}

// SuccessRateAverage is the mean external-origin success rate of the hosts that had enough
// traffic in the last interval, or -1 when success-rate detection did not run
// (outlier::success_rate_average in /clusters).
func (d *Detector) SuccessRateAverage() float64 { return d.clusterRate(external, false) }

// SuccessRateEjectionThreshold is the external-origin ejection threshold of the last interval
// (mean − stdev × success_rate_stdev_factor/1000), or -1.
func (d *Detector) SuccessRateEjectionThreshold() float64 { return d.clusterRate(external, true) }

// LocalOriginSuccessRateAverage is SuccessRateAverage for local-origin results.
func (d *Detector) LocalOriginSuccessRateAverage() float64 { return d.clusterRate(local, false) }

// LocalOriginSuccessRateEjectionThreshold is SuccessRateEjectionThreshold for local-origin
// results.
func (d *Detector) LocalOriginSuccessRateEjectionThreshold() float64 {
	return d.clusterRate(local, true)
}

func (d *Detector) clusterRate(o origin, threshold bool) float64 {
	v := &d.rates[o].average
	if threshold {
		v = &d.rates[o].threshold
	}
	return math.Float64frombits(v.Load())
}

func (d *Detector) setClusterRates(o origin, average, threshold float64) {
	d.rates[o].average.Store(math.Float64bits(average))
	d.rates[o].threshold.Store(math.Float64bits(threshold))
}

// NumEjections returns how many times h has been ejected (num_ejections in the event log), 0 for
// an unknown host.
func (d *Detector) NumEjections(h *host.Host) uint32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if m := d.monitors[h]; m != nil {
		return m.numEjections
	}
	return 0
}

// Stats returns the statistics the detector updates.
func (d *Detector) Stats() *Stats { return d.stats }

func (d *Detector) snapshot() *runtime.Snapshot {
	if d.rt == nil {
		return nil
	}
	return d.rt.Snapshot()
}

// lookup is the runtime value of key, or def without a snapshot (Envoy's getInteger).
func lookup(s *runtime.Snapshot, key string, def uint64) uint64 {
	if s == nil {
		return def
	}
	return s.Uint64(key, def)
}

// lookupMillis is a runtime value in milliseconds (Envoy's *_ms keys) as a Duration, saturating
// at the largest Duration.
func lookupMillis(s *runtime.Snapshot, key string, def time.Duration) time.Duration {
	const maxMillis = uint64(math.MaxInt64 / int64(time.Millisecond))
	return time.Duration(min(lookup(s, key, uint64(def.Milliseconds())), maxMillis)) * time.Millisecond
}

// notify hands m to the control path with bit set. It never blocks: when the queue is full the
// control path is asked to rescan every monitor for pending bits.
func (d *Detector) notify(m *monitor, bit uint32) {
	if m.pending.Or(bit) != 0 {
		return // already queued; the control path will see the new bit
	}
	select {
	case d.queue <- m:
	default:
		d.rescan.Store(true)
		select {
		case d.kick <- struct{}{}:
		default:
		}
	}
}

// unlockAndNotify releases mu and then runs OnChange for every host changed while it was held.
func (d *Detector) unlockAndNotify() {
	changed := d.changed
	d.changed = nil
	d.mu.Unlock()
	if d.onChange == nil {
		return
	}
	for _, h := range changed {
		d.onChange(h)
	}
}
