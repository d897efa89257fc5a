package outlier

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/procpin"
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

// bucket counts one interval's requests (Envoy's SuccessRateAccumulatorBucket) on a line per P,
// since every request to the host reports to it: a report adds one request in the high half of
// its P's line and, for a success, one in the low half, in a single atomic add. A line cannot
// see 2^32 requests in one interval, so the halves never carry into each other.
type bucket struct {
	lines atomic.Pointer[procpin.Lines] // made on the bucket's first request
}

// maxBucketLines bounds a bucket's lines (1 KiB) as a host's other per-P counters are bounded.
const maxBucketLines = 16

func (b *bucket) add(success bool) {
	v := uint64(1) << 32
	if success {
		v++
	}
	procpin.LoadLines(&b.lines, maxBucketLines).Of(procpin.Pin()).Add(v)
	procpin.Unpin()
}

// counts sums the lines. Control path only.
func (b *bucket) counts() (success, total uint64) {
	l := b.lines.Load()
	if l == nil {
		return 0, 0
	}
	for i := range l.Len() {
		v := l.Line(i).Load()
		success += v & 0xffffffff
		total += v >> 32
	}
	return success, total
}

// reset zeroes the lines. Control path only.
func (b *bucket) reset() {
	if l := b.lines.Load(); l != nil {
		for i := range l.Len() {
			l.Line(i).Store(0)
		}
	}
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
	next.reset()
	a.current.Store(next)
}

// last returns the success rate (0..100) and volume of the retired bucket; ok is false when it
// saw no request. Control path only.
func (a *accumulator) last() (rate float64, volume uint64, ok bool) {
	b := &a.buckets[0]
	if a.current.Load() == b {
		b = &a.buckets[1]
	}
	success, total := b.counts()
	if total == 0 {
		return 0, 0, false
	}
	return min(float64(success)*100/float64(total), 100), total, true
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

// clearCount zeroes a consecutive-failure count, writing it only when it is not zero already:
// every successful request clears them, and a store of the same 0 would still take the host's
// line from every other core.
func clearCount(c *atomic.Uint32) {
	if c.Load() != 0 {
		c.Store(0)
	}
}

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
	ok := !is5xx(code)
	m.acc[external].current.Load().add(ok)
	if ok {
		clearCount(&m.consecutive5xx)
		clearCount(&m.consecutiveGateway)
		return
	}
	snap := d.snapshot()
	if isGatewayError(code) {
		n := m.consecutiveGateway.Add(1)
		if uint64(n) == lookup(snap, runtime.KeyOutlierConsecutiveGatewayFailure, uint64(d.cfg.ConsecutiveGatewayFailure)) {
			d.notify(m, pendingGateway)
		}
	} else {
		clearCount(&m.consecutiveGateway)
	}
	n := m.consecutive5xx.Add(1)
	if uint64(n) == lookup(snap, runtime.KeyOutlierConsecutive5xx, uint64(d.cfg.Consecutive5xx)) {
		d.notify(m, pending5xx)
	}
}

func (m *monitor) localFailure(d *Detector) {
	m.acc[local].current.Load().add(false)
	n := m.consecutiveLocalOrigin.Add(1)
	if uint64(n) == lookup(d.snapshot(), runtime.KeyOutlierConsecutiveLocalOriginFailure, uint64(d.cfg.ConsecutiveLocalOriginFailure)) {
		d.notify(m, pendingLocalOrigin)
	}
}

func (m *monitor) localSuccess() {
	m.acc[local].current.Load().add(true)
	clearCount(&m.consecutiveLocalOrigin)
}
