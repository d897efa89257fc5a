package outlier

import (
	"math"
	"time"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/runtime"
)

// handlePending ejects m for the consecutive-failure thresholds Report saw it reach (Envoy's
// onConsecutiveErrorWorker), in the order Envoy posts them: gateway, 5xx, local origin.
func (d *Detector) handlePending(m *monitor) {
	d.mu.Lock()
	bits := m.pending.Swap(0)
	now := d.clock.Now()
	for _, p := range [...]struct {
		bit uint32
		t   EjectionType
	}{
		{pendingGateway, ConsecutiveGatewayFailure},
		{pending5xx, Consecutive5xx},
		{pendingLocalOrigin, ConsecutiveLocalOriginFailure},
	} {
		if bits&p.bit != 0 {
			d.consecutiveLocked(m, p.t, now)
		}
	}
	d.unlockAndNotify()
}

// drainPending handles every queued monitor and, after a queue overflow, every monitor with
// pending bits. It never blocks.
func (d *Detector) drainPending() {
	for drained := false; !drained; {
		select {
		case m := <-d.queue:
			d.handlePending(m)
		default:
			drained = true
		}
	}
	if !d.rescan.Swap(false) {
		return
	}
	d.mu.Lock()
	var todo []*monitor
	for _, m := range d.order {
		if m.pending.Load() != 0 {
			todo = append(todo, m)
		}
	}
	d.mu.Unlock()
	for _, m := range todo {
		d.handlePending(m)
	}
}

func (d *Detector) consecutiveLocked(m *monitor, t EjectionType, now time.Time) {
	// The host may have been removed, or ejected by another rule, since Report saw the threshold;
	// Envoy drops the notification then and leaves the counter as it is.
	if m.removed || m.host.HasHealthFlag(host.FailedOutlierCheck) {
		return
	}
	d.stats.detected(t).Inc()
	d.ejectLocked(m, t, now)
	switch t {
	case Consecutive5xx:
		d.stats.EjectionsConsecutive5xx.Inc()
		m.consecutive5xx.Store(0)
	case ConsecutiveGatewayFailure:
		m.consecutiveGateway.Store(0)
	case ConsecutiveLocalOriginFailure:
		m.consecutiveLocalOrigin.Store(0)
	}
}

// enforcingKey returns the runtime key and configured default of t's enforcing_* percentage.
func (d *Detector) enforcingKey(t EjectionType) (string, uint32) {
	c := &d.cfg
	switch t {
	case Consecutive5xx:
		return runtime.KeyOutlierEnforcingConsecutive5xx, c.EnforcingConsecutive5xx
	case ConsecutiveGatewayFailure:
		return runtime.KeyOutlierEnforcingConsecutiveGatewayFailure, c.EnforcingConsecutiveGatewayFailure
	case SuccessRate:
		return runtime.KeyOutlierEnforcingSuccessRate, c.EnforcingSuccessRate
	case ConsecutiveLocalOriginFailure:
		return runtime.KeyOutlierEnforcingConsecutiveLocalOriginFailure, c.EnforcingConsecutiveLocalOriginFailure
	case SuccessRateLocalOrigin:
		return runtime.KeyOutlierEnforcingLocalOriginSuccessRate, c.EnforcingLocalOriginSuccessRate
	case FailurePercentage:
		return runtime.KeyOutlierEnforcingFailurePercentage, c.EnforcingFailurePercentage
	default:
		return runtime.KeyOutlierEnforcingFailurePercentageLocalOrigin, c.EnforcingFailurePercentageLocalOrigin
	}
}

// enforce draws whether a detected outlier of type t is really ejected: true with probability
// min(enforcing percentage, 100)/100, as Envoy's featureEnabled. 0 and 100 draw nothing.
func (d *Detector) enforce(s *runtime.Snapshot, t EjectionType) bool {
	key, def := d.enforcingKey(t)
	p := min(lookup(s, key, uint64(def)), 100)
	switch p {
	case 0:
		return false
	case 100:
		return true
	}
	return d.random()%100 < p
}

// ejectionLimitAllows reports whether one more ejection keeps the ejected share of all hosts at
// or below max_ejection_percent. The comparison is exact integer arithmetic:
// 100 × (ejected + 1) <= percent × hosts. With always_eject_one_host, the first ejection is
// always allowed.
func (d *Detector) ejectionLimitAllows(s *runtime.Snapshot) bool {
	if d.cfg.AlwaysEjectOneHost && d.active == 0 {
		return true
	}
	p := min(lookup(s, runtime.KeyOutlierMaxEjectionPercent, uint64(d.cfg.MaxEjectionPercent)), 100)
	return 100*(d.active+1) <= p*uint64(len(d.order))
}

// ejectLocked is Envoy's ejectHost: bounded by max_ejection_percent, gated by the enforcing
// percentage of t, and logged either way.
func (d *Detector) ejectLocked(m *monitor, t EjectionType, now time.Time) {
	s := d.snapshot()
	if !d.ejectionLimitAllows(s) {
		d.stats.EjectionsOverflow.Inc()
		return
	}
	if t == Consecutive5xx || t == SuccessRate {
		d.stats.EjectionsTotal.Inc()
	}
	if !d.enforce(s, t) {
		d.logEject(m, t, false, now)
		return
	}
	d.active++
	d.stats.EjectionsActive.Inc()
	d.stats.EjectionsEnforcedTotal.Inc()
	d.stats.enforced(t).Inc()
	m.host.SetHealthFlag(host.FailedOutlierCheck)
	m.numEjections++
	m.lastEjection = now

	base := lookupMillis(s, runtime.KeyOutlierBaseEjectionTimeMs, d.cfg.BaseEjectionTime)
	maxTime := lookupMillis(s, runtime.KeyOutlierMaxEjectionTimeMs, d.cfg.MaxEjectionTime)
	jitter := lookupMillis(s, runtime.KeyOutlierMaxEjectionTimeJitterMs, d.cfg.MaxEjectionTimeJitter)
	m.jitter = 0
	if jitter >= time.Millisecond {
		m.jitter = time.Duration(d.random()%uint64(jitter/time.Millisecond+1)) * time.Millisecond
	}
	// The multiplier grows while base × n is below max + base, so it can sit one step above the
	// cap; a healthy host then needs one extra interval before its next ejection gets shorter.
	if mulDuration(m.backoff, base) < addDuration(maxTime, base) {
		m.backoff++
	}
	d.changed = append(d.changed, m.host)
	d.logEject(m, t, true, now)
}

// unejectLocked returns m's host to service (Envoy's unejectHost).
func (d *Detector) unejectLocked(m *monitor, now time.Time) {
	d.active--
	d.stats.EjectionsActive.Dec()
	m.host.ClearHealthFlag(host.FailedOutlierCheck)
	m.resetConsecutive()
	m.lastUnejection = now
	d.changed = append(d.changed, m.host)
	d.logUneject(m, now)
}

// ejectionOver reports whether m's ejection has lasted min(base × n, max) + jitter.
func (d *Detector) ejectionOver(s *runtime.Snapshot, m *monitor, now time.Time) bool {
	base := lookupMillis(s, runtime.KeyOutlierBaseEjectionTimeMs, d.cfg.BaseEjectionTime)
	maxTime := lookupMillis(s, runtime.KeyOutlierMaxEjectionTimeMs, d.cfg.MaxEjectionTime)
	return addDuration(min(mulDuration(m.backoff, base), maxTime), m.jitter) <= now.Sub(m.lastEjection)
}

// interval returns the sweep interval (outlier_detection.interval_ms, else interval).
func (d *Detector) interval(s *runtime.Snapshot) time.Duration {
	return lookupMillis(s, runtime.KeyOutlierIntervalMs, d.cfg.Interval)
}

// sweep is one interval of Envoy's onIntervalTimer: unejects hosts whose time is up, retires the
// success-rate buckets, runs success-rate and failure-percentage detection for both origins and
// shortens the ejection multiplier of hosts that stayed in service for a whole interval.
func (d *Detector) sweep() {
	d.mu.Lock()
	now := d.clock.Now()
	s := d.snapshot()
	for _, m := range d.order {
		if m.host.HasHealthFlag(host.FailedOutlierCheck) && d.ejectionOver(s, m, now) {
			d.unejectLocked(m, now)
		}
		m.acc[external].swap()
		m.acc[local].swap()
		m.setRate(external, -1)
		m.setRate(local, -1)
	}
	d.rateEjectionsLocked(s, external, now)
	d.rateEjectionsLocked(s, local, now)
	iv := d.interval(s)
	for _, m := range d.order {
		if m.host.HasHealthFlag(host.FailedOutlierCheck) || m.lastUnejection.IsZero() {
			continue
		}
		if now.Sub(m.lastUnejection) >= iv && m.backoff > 0 {
			m.backoff--
		}
	}
	d.unlockAndNotify()
}

// rateEjectionsLocked is Envoy's processSuccessRateEjections for one origin.
func (d *Detector) rateEjectionsLocked(s *runtime.Snapshot, o origin, now time.Time) {
	srMinHosts := lookup(s, runtime.KeyOutlierSuccessRateMinimumHosts, uint64(d.cfg.SuccessRateMinimumHosts))
	srVolume := lookup(s, runtime.KeyOutlierSuccessRateRequestVolume, uint64(d.cfg.SuccessRateRequestVolume))
	fpMinHosts := lookup(s, runtime.KeyOutlierFailurePercentageMinimumHosts, uint64(d.cfg.FailurePercentageMinimumHosts))
	fpVolume := lookup(s, runtime.KeyOutlierFailurePercentageRequestVolume, uint64(d.cfg.FailurePercentageRequestVolume))

	d.setClusterRates(o, -1, -1)
	n := uint64(len(d.order))
	if n < srMinHosts && n < fpMinHosts {
		return
	}
	d.srHosts, d.fpHosts = d.srHosts[:0], d.fpHosts[:0]
	sum := 0.0
	for _, m := range d.order {
		if m.host.HasHealthFlag(host.FailedOutlierCheck) {
			continue
		}
		rate, volume, ok := m.acc[o].last()
		if !ok {
			continue
		}
		if volume >= min(srVolume, fpVolume) {
			m.setRate(o, rate)
		}
		if volume >= srVolume {
			d.srHosts = append(d.srHosts, hostRate{m, rate})
			sum += rate
		}
		if volume >= fpVolume {
			d.fpHosts = append(d.fpHosts, hostRate{m, rate})
		}
	}

	if len(d.srHosts) > 0 && uint64(len(d.srHosts)) >= srMinHosts {
		factor := float64(lookup(s, runtime.KeyOutlierSuccessRateStdevFactor, uint64(d.cfg.SuccessRateStdevFactor))) / 1000
		mean, threshold := successRateThreshold(sum, d.srHosts, factor)
		d.setClusterRates(o, mean, threshold)
		t := SuccessRate
		if o == local {
			t = SuccessRateLocalOrigin
		}
		for _, hr := range d.srHosts {
			if hr.rate < threshold {
				d.stats.EjectionsSuccessRate.Inc()
				d.stats.detected(t).Inc()
				d.ejectLocked(hr.m, t, now)
			}
		}
	}

	if len(d.fpHosts) > 0 && uint64(len(d.fpHosts)) >= fpMinHosts {
		threshold := float64(lookup(s, runtime.KeyOutlierFailurePercentageThreshold, uint64(d.cfg.FailurePercentageThreshold)))
		t := FailurePercentage
		if o == local {
			t = FailurePercentageLocalOrigin
		}
		for _, hr := range d.fpHosts {
			// Envoy would eject a host the success-rate pass just ejected a second time; a host
			// is ejected at most once here.
			if hr.m.host.HasHealthFlag(host.FailedOutlierCheck) {
				continue
			}
			if 100-hr.rate >= threshold {
				d.stats.detected(t).Inc()
				d.ejectLocked(hr.m, t, now)
			}
		}
	}
}

// successRateThreshold returns the mean success rate and mean − factor × stdev (population
// standard deviation), summing in host order as Envoy does.
func successRateThreshold(sum float64, hosts []hostRate, factor float64) (mean, threshold float64) {
	n := float64(len(hosts))
	mean = sum / n
	variance := 0.0
	for _, hr := range hosts {
		d := hr.rate - mean
		variance += d * d
	}
	variance /= n
	return mean, mean - factor*math.Sqrt(variance)
}

// mulDuration is n × d, saturating at the largest Duration (runtime values are unbounded).
func mulDuration(n uint32, d time.Duration) time.Duration {
	if n != 0 && d > math.MaxInt64/time.Duration(n) {
		return math.MaxInt64
	}
	return time.Duration(n) * d
}

// addDuration is a + b for non-negative durations, saturating at the largest Duration.
func addDuration(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
