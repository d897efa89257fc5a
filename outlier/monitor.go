package outlier

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/runtime"
)

// EjectionType is why a host was ejected. The values are those of
// envoy.data.cluster.v3.OutlierEjectionType.
type EjectionType uint8

// Ejection types.
const (
	Consecutive5xx EjectionType = iota
	ConsecutiveGatewayFailure
	SuccessRate
	ConsecutiveLocalOriginFailure
	SuccessRateLocalOrigin
	FailurePercentage
	FailurePercentageLocalOrigin
)

var ejectionTypeNames = [...]string{
	"CONSECUTIVE_5XX", "CONSECUTIVE_GATEWAY_FAILURE", "SUCCESS_RATE", "CONSECUTIVE_LOCAL_ORIGIN_FAILURE",
	"SUCCESS_RATE_LOCAL_ORIGIN", "FAILURE_PERCENTAGE", "FAILURE_PERCENTAGE_LOCAL_ORIGIN",
}

// String returns the OutlierEjectionType enum name.
func (t EjectionType) String() string {
	if int(t) < len(ejectionTypeNames) {
		return ejectionTypeNames[t]
	}
	return "UNKNOWN"
}

// origin selects one of a host's two success-rate monitors.
type origin uint8

const (
	external origin = iota // every result when errors are not split; external ones when they are
	local                  // local-origin results, only when errors are split
)

// Pending consecutive-failure notifications, one bit per type, in the order they are handled.
const (
	pendingGateway uint32 = 1 << iota
	pending5xx
	pendingLocalOrigin
)

// bucket counts one interval's requests (Envoy's SuccessRateAccumulatorBucket).
type bucket struct {
	success atomic.Uint64
	total   atomic.Uint64
}

// accumulator is Envoy's double-buffered SuccessRateAccumulator: writers add to the current
// bucket; at each interval the control path zeroes the other bucket and swaps, so the bucket just
// retired holds the last full interval.
type accumulator struct {
	buckets [2]bucket
	current atomic.Pointer[bucket]
}

func (a *accumulator) init() { a.current.Store(&a.buckets[0]) }

// swap retires the current bucket. Control path only.
func (a *accumulator) swap() {
	next := &a.buckets[0]
	if a.current.Load() == next {
		next = &a.buckets[1]
	}
	next.success.Store(0)
	next.total.Store(0)
	a.current.Store(next)
}

// last returns the success rate (0..100) and volume of the retired bucket; ok is false when it
// saw no request. Control path only.
func (a *accumulator) last() (rate float64, volume uint64, ok bool) {
	b := &a.buckets[0]
	if a.current.Load() == b {
		b = &a.buckets[1]
	}
	total := b.total.Load()
	if total == 0 {
		return 0, 0, false
	}
	return min(float64(b.success.Load())*100/float64(total), 100), total, true
}

// monitor is the outlier state of one host (Envoy's DetectorHostMonitorImpl). The atomic fields
// are written by Report on any goroutine; the rest is guarded by Detector.mu.
type monitor struct {
	host *host.Host

	consecutive5xx         atomic.Uint32
	consecutiveGateway     atomic.Uint32
	consecutiveLocalOrigin atomic.Uint32
	pending                atomic.Uint32 // pending* bits not yet handled by the control path
	successRate            [2]atomic.Uint64
	acc                    [2]accumulator

	// Guarded by Detector.mu.
	removed        bool
	numEjections   uint32
	backoff        uint32 // Envoy's eject_time_backoff: ejection time is base × backoff
	jitter         time.Duration
	lastEjection   time.Time
	lastUnejection time.Time // zero until the first unejection
}

func newMonitor(h *host.Host) *monitor {
	m := &monitor{host: h}
	for o := range m.acc {
		m.acc[o].init()
		m.successRate[o].Store(math.Float64bits(-1))
	}
	return m
}

func (m *monitor) rate(o origin) float64 { return math.Float64frombits(m.successRate[o].Load()) }

func (m *monitor) setRate(o origin, v float64) { m.successRate[o].Store(math.Float64bits(v)) }

func (m *monitor) resetConsecutive() {
	m.consecutive5xx.Store(0)
	m.consecutiveGateway.Store(0)
	m.consecutiveLocalOrigin.Store(0)
}

// report applies one result. It is Envoy's putResult / putHttpResponseCode.
func (m *monitor) report(d *Detector, r Result) {
	k := r.kind()
	if k == kindHTTP {
		m.httpStatus(d, r.status())
		return
	}
	if !d.split {
		if s := r.status(); s != 0 {
			m.httpStatus(d, s)
			return
		}
		switch k {
		case kindRequestSuccess, kindConnectSuccessFinal:
			m.httpStatus(d, 200)
		case kindTimeout:
			m.httpStatus(d, 504)
		case kindConnectFailed:
			m.httpStatus(d, 503)
		case kindRequestFailed:
			m.httpStatus(d, 500)
		}
		return
	}
	switch k {
	case kindConnectSuccess, kindConnectSuccessFinal:
		m.localSuccess()
	case kindTimeout, kindConnectFailed:
		m.localFailure(d)
	case kindRequestFailed:
		m.httpStatus(d, 503)
	case kindRequestSuccess:
		m.httpStatus(d, 200)
		m.localSuccess()
	}
}

func (m *monitor) httpStatus(d *Detector, code uint32) {
	b := m.acc[external].current.Load()
	b.total.Add(1)
	if !is5xx(code) {
		b.success.Add(1)
		m.consecutive5xx.Store(0)
		m.consecutiveGateway.Store(0)
		return
	}
	snap := d.snapshot()
	if isGatewayError(code) {
		n := m.consecutiveGateway.Add(1)
		if uint64(n) == lookup(snap, runtime.KeyOutlierConsecutiveGatewayFailure, uint64(d.cfg.ConsecutiveGatewayFailure)) {
			d.notify(m, pendingGateway)
		}
	} else {
		m.consecutiveGateway.Store(0)
	}
	n := m.consecutive5xx.Add(1)
	if uint64(n) == lookup(snap, runtime.KeyOutlierConsecutive5xx, uint64(d.cfg.Consecutive5xx)) {
		d.notify(m, pending5xx)
	}
}

func (m *monitor) localFailure(d *Detector) {
	m.acc[local].current.Load().total.Add(1)
	n := m.consecutiveLocalOrigin.Add(1)
	if uint64(n) == lookup(d.snapshot(), runtime.KeyOutlierConsecutiveLocalOriginFailure, uint64(d.cfg.ConsecutiveLocalOriginFailure)) {
		d.notify(m, pendingLocalOrigin)
	}
}

func (m *monitor) localSuccess() {
	b := m.acc[local].current.Load()
	b.total.Add(1)
	b.success.Add(1)
	m.consecutiveLocalOrigin.Store(0)
}
