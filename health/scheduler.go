package health

import (
	"context"
	"runtime"
)

// DefaultMaxConcurrentProbes is the probe concurrency of a Scheduler built with 0: 128 per
// GOMAXPROCS. A bound sustains about bound/latency checks per second (256 slots and 50 ms checks:
// 5,000/s, 20,000 hosts every 4 s), while more slots than the CPUs can serve only add queueing
// inside the probes, where it counts against their timeouts: on two cores, 20,000 local HTTP checks
// started at once saw a few 1 s timeouts with 1,024 slots and none with 256 (TestScale20k).
func DefaultMaxConcurrentProbes() int { return 128 * runtime.GOMAXPROCS(0) }

// Scheduler bounds how many checks run at once across every Checker that shares it, so that a
// server with many clusters and tens of thousands of endpoints neither exhausts file descriptors
// nor lets one cluster starve the others.
//
// Envoy runs every check of every cluster on its main thread, and at about 20,000 endpoints with
// a 5 s interval that thread saturates and checks time out, marking healthy hosts unhealthy
// (envoy#28699). Legate arms each host's interval with the runtime's timers (per-P heaps, no
// single goroutine that every check passes through), runs each check on its own goroutine once a
// slot is free, and starts a check's timeout only when its slot is acquired: time spent waiting
// for a slot delays a check but never fails it.
//
// A Scheduler is safe for concurrent use. Its zero value is not usable; call NewScheduler. It owns
// no goroutines and needs no Close.
type Scheduler struct {
	slots chan struct{}
}

// NewScheduler returns a Scheduler running at most maxConcurrent checks at once; 0 means
// DefaultMaxConcurrentProbes.
func NewScheduler(maxConcurrent int) *Scheduler {
	if maxConcurrent <= 0 {
		maxConcurrent = DefaultMaxConcurrentProbes()
	}
	return &Scheduler{slots: make(chan struct{}, maxConcurrent)}
}

// acquire waits for a slot; it reports false when ctx ends first.
func (s *Scheduler) acquire(ctx context.Context) bool {
	select {
	case s.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *Scheduler) release() { <-s.slots }

// InFlight returns the number of checks running now.
func (s *Scheduler) InFlight() int { return len(s.slots) }

// Capacity returns the concurrency bound.
func (s *Scheduler) Capacity() int { return cap(s.slots) }
