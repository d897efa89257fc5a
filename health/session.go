package health

import (
	"context"
	"sync"

	datav3 "github.com/envoyproxy/go-control-plane/envoy/data/core/v3"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/clock"
)

// transition is Envoy's HealthTransition: whether a check changed the host's state.
type transition uint8

const (
	unchanged transition = iota
	changed
	// changePending: the result pointed the other way but the threshold is not reached yet.
	changePending
)

// session is one host's check state (Envoy's ActiveHealthCheckSession).
type session struct {
	c     *Checker
	h     *host.Host
	probe ProbeSession

	// mu guards every field below. The host's active-HC flags are written only under it.
	mu           sync.Mutex
	firstCheck   bool
	numHealthy   uint32
	numUnhealthy uint32
	gen          uint64 // counts checks started; a timeout of an older check is stale
	running      bool   // a Check call is in flight
	rerun        bool   // the interval fired while a timed-out Check was still unwinding
	timedOut     bool   // the running check's timeout fired; its result is ignored
	stopped      bool
	cancel       context.CancelFunc
	interval     clock.Timer
	timeout      clock.Timer
}

func (c *Checker) newSession(h *host.Host) *session {
	if !h.HasHealthFlag(host.FailedActiveHC) {
		c.opts.Stats.Healthy.Inc()
	}
	if h.HasHealthFlag(host.DegradedActiveHC) {
		c.opts.Stats.Degraded.Inc()
	}
	return &session{c: c, h: h, probe: c.prober.Session(h), firstCheck: true}
}

// start schedules the first check: at once, or after a random part of initial_jitter.
func (s *session) start() {
	if s.c.spec.InitialJitter <= 0 {
		s.fire()
		return
	}
	d := s.c.withJitter(0, s.c.spec.InitialJitter)
	s.mu.Lock()
	if !s.stopped {
		s.interval = s.c.clock.AfterFunc(d, s.fire)
	}
	s.mu.Unlock()
}

// fire is the interval timer: start a check unless one is still unwinding.
func (s *session) fire() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	if s.running {
		s.rerun = true
		s.mu.Unlock()
		return
	}
	s.running = true
	s.gen++
	gen := s.gen
	s.mu.Unlock()
	if !s.c.spawn(func() { s.run(gen) }) {
		s.finish(gen, Result{}, false)
	}
}

// run waits for a scheduler slot, then runs one check with its timeout armed.
func (s *session) run(gen uint64) {
	c := s.c
	if !c.sched.acquire(c.ctx) {
		s.finish(gen, Result{}, false)
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		cancel()
		c.sched.release()
		s.finish(gen, Result{}, false)
		return
	}
	s.cancel = cancel
	s.timedOut = false
	s.timeout = c.clock.AfterFunc(c.spec.Timeout, func() { s.onTimeout(gen) })
	s.mu.Unlock()

	c.opts.Stats.Attempt.Inc()
	res := s.probe.Check(ctx)
	cancel()
	c.sched.release()
	s.finish(gen, res, true)
}

// finish takes the result of a check that ran (ran false: it never started).
func (s *session) finish(gen uint64, res Result, ran bool) {
	s.mu.Lock()
	s.running = false
	s.cancel = nil
	if s.stopped {
		s.mu.Unlock()
		s.probe.Close()
		return
	}
	if !ran || s.timedOut || gen != s.gen {
		rerun := s.rerun
		s.rerun = false
		s.mu.Unlock()
		if rerun {
			s.fire()
		}
		return
	}
	if s.timeout != nil {
		s.timeout.Stop()
	}
	var t transition
	healthy := res.Outcome != Failed
	if res.VerifiedCluster {
		s.c.opts.Stats.VerifyCluster.Inc()
	}
	if healthy {
		t = s.handleSuccess(res.Outcome == SucceededDegraded)
	} else {
		if res.ImmediateFail {
			s.h.SetHealthFlag(host.ExcludedViaImmediateHCFail)
		}
		t = s.setUnhealthy(res.Failure, res.Retriable, res.HTTPStatus)
	}
	s.interval = s.c.clock.AfterFunc(s.c.interval(healthy, t), s.fire)
	s.mu.Unlock()
	s.report(healthy)
	s.notify(t)
}

// onTimeout is the timeout timer: the check counts as a network timeout and is cancelled.
func (s *session) onTimeout(gen uint64) {
	s.mu.Lock()
	if s.stopped || !s.running || s.timedOut || gen != s.gen {
		s.mu.Unlock()
		return
	}
	s.timedOut = true
	if s.cancel != nil {
		s.cancel()
	}
	t := s.setUnhealthy(NetworkTimeout, false, 0)
	s.interval = s.c.clock.AfterFunc(s.c.interval(false, t), s.fire)
	s.mu.Unlock()
	s.report(false)
	s.notify(t)
}

func (s *session) passiveFailure() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	t := s.setUnhealthy(Passive, false, 0)
	s.mu.Unlock()
	s.report(false)
	s.notify(t)
}

func (s *session) report(passed bool) {
	if fn := s.c.opts.OnResult; fn != nil {
		fn(s.h, passed)
	}
}

func (s *session) notify(t transition) {
	if fn := s.c.opts.OnChange; fn != nil {
		fn(s.h, t == changed)
	}
}

// handleSuccess applies a passing check (Envoy's handleSuccess). Caller holds s.mu.
func (s *session) handleSuccess(degraded bool) transition {
	c, h, st := s.c, s.h, s.c.opts.Stats
	s.numUnhealthy = 0
	t := unchanged
	if h.HasHealthFlag(host.FailedActiveHC) {
		// The very first result moves a host to healthy at once: faster start-up for a small
		// loss of certainty, as in Envoy.
		if s.firstCheck || s.bumpHealthy() == c.spec.HealthyThreshold {
			h.ClearHealthFlag(host.ActiveHCTimeout | host.ExcludedViaImmediateHCFail | host.FailedActiveHC)
			st.Healthy.Inc()
			t = changed
			c.events.log(h, func(ev *datav3.HealthCheckEvent) {
				ev.Event = &datav3.HealthCheckEvent_AddHealthyEvent{AddHealthyEvent: &datav3.HealthCheckAddHealthy{FirstCheck: s.firstCheck}}
			})
		} else {
			t = changePending
		}
	}
	if t != changed && c.spec.AlwaysLogHealthCheckSuccess {
		c.events.log(h, func(ev *datav3.HealthCheckEvent) {
			ev.Event = &datav3.HealthCheckEvent_SuccessfulHealthCheckEvent{SuccessfulHealthCheckEvent: &datav3.HealthCheckSuccessful{}}
		})
	}
	t = s.clearPending(t)
	if degraded != h.HasHealthFlag(host.DegradedActiveHC) {
		if degraded {
			h.SetHealthFlag(host.DegradedActiveHC)
			st.Degraded.Inc()
			c.events.log(h, func(ev *datav3.HealthCheckEvent) {
				ev.Event = &datav3.HealthCheckEvent_DegradedHealthyHost{DegradedHealthyHost: &datav3.DegradedHealthyHost{}}
			})
		} else {
			h.ClearHealthFlag(host.DegradedActiveHC)
			st.Degraded.Dec()
			c.events.log(h, func(ev *datav3.HealthCheckEvent) {
				ev.Event = &datav3.HealthCheckEvent_NoLongerDegradedHost{NoLongerDegradedHost: &datav3.NoLongerDegradedHost{}}
			})
		}
		if t == unchanged {
			t = changed
		}
	}
	st.Success.Inc()
	s.firstCheck = false
	return t
}

// setUnhealthy applies a failure (Envoy's setUnhealthy): an active, non-retriable failure fails
// the host at once; network failures, timeouts and retriable statuses count toward
// unhealthy_threshold. Caller holds s.mu.
func (s *session) setUnhealthy(ft FailureType, retriable bool, httpStatus int) transition {
	c, h, st := s.c, s.h, s.c.opts.Stats
	s.numHealthy = 0
	t := unchanged
	if !h.HasHealthFlag(host.FailedActiveHC) {
		if (!ft.network() && !retriable) || s.bumpUnhealthy() == c.spec.UnhealthyThreshold {
			h.SetHealthFlag(host.FailedActiveHC)
			st.Healthy.Dec()
			t = changed
			c.events.log(h, func(ev *datav3.HealthCheckEvent) {
				ev.Event = &datav3.HealthCheckEvent_EjectUnhealthyEvent{EjectUnhealthyEvent: &datav3.HealthCheckEjectUnhealthy{
					FailureType: datav3.HealthCheckFailureType(ft), HttpStatusCode: uint32(httpStatus)}}
			})
		} else {
			t = changePending
		}
	}
	// A failed host toggles /active_hc_timeout with the reason of its latest failure.
	if ft == NetworkTimeout && h.HasHealthFlag(host.FailedActiveHC) {
		h.SetHealthFlag(host.ActiveHCTimeout)
	} else {
		h.ClearHealthFlag(host.ActiveHCTimeout)
	}
	t = s.clearPending(t)
	if s.firstCheck || c.spec.AlwaysLogHealthCheckFailures {
		first := s.firstCheck
		c.events.log(h, func(ev *datav3.HealthCheckEvent) {
			ev.Event = &datav3.HealthCheckEvent_HealthCheckFailureEvent{HealthCheckFailureEvent: &datav3.HealthCheckFailure{
				FailureType: datav3.HealthCheckFailureType(ft), FirstCheck: first, HttpStatusCode: uint32(httpStatus)}}
		})
	}
	st.Failure.Inc()
	switch {
	case ft.network():
		st.NetworkFailure.Inc()
	case ft == Passive:
		st.PassiveFailure.Inc()
	}
	s.firstCheck = false
	return t
}

// bumpHealthy and bumpUnhealthy count a result toward a threshold. They are called only where
// Envoy's short-circuit evaluation counts (not for a first check, not for a failure that fails
// the host at once). Caller holds s.mu.
func (s *session) bumpHealthy() uint32 {
	s.numHealthy++
	return s.numHealthy
}

func (s *session) bumpUnhealthy() uint32 {
	s.numUnhealthy++
	return s.numUnhealthy
}

// clearPending drops /pending_active_hc after any result; that always changes the host's
// exclusion, so the transition becomes changed. Caller holds s.mu.
func (s *session) clearPending(t transition) transition {
	if s.h.HasHealthFlag(host.PendingActiveHC) {
		s.h.ClearHealthFlag(host.PendingActiveHC)
		return changed
	}
	return t
}

// remove drops the session because its host left the cluster. A host removed before its first
// result is reported to OnChange (unchanged), as Envoy does, so that a cluster waiting for first
// checks is not left waiting.
func (s *session) remove() {
	first := s.stop()
	st := s.c.opts.Stats
	if !s.h.HasHealthFlag(host.FailedActiveHC) {
		st.Healthy.Dec()
	}
	if s.h.HasHealthFlag(host.DegradedActiveHC) {
		st.Degraded.Dec()
	}
	if first {
		s.notify(unchanged)
	}
}

// stop cancels timers and any running check; it reports whether no result was ever recorded.
func (s *session) stop() (firstCheck bool) {
	s.mu.Lock()
	s.stopped = true
	if s.interval != nil {
		s.interval.Stop()
	}
	if s.timeout != nil {
		s.timeout.Stop()
	}
	if s.cancel != nil {
		s.cancel()
	}
	running := s.running
	first := s.firstCheck
	s.mu.Unlock()
	if !running {
		s.probe.Close()
	}
	return first
}
