package cluster

import (
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"github.com/legateproxy/legate/stats"
)

// TestHostStatsPerP checks that a host's request counters, kept on a line per P, sum exactly
// what many goroutines counted, each on the line it took once (as a stream does), some on
// lines beyond the table's (shared with another P's).
func TestHostStatsPerP(t *testing.T) {
	var hs HostStats
	if got := hs.Rq(); got != (HostRq{}) {
		t.Fatalf("fresh host: Rq() = %+v; want zero", got)
	}
	const goroutines, requests = 8, 4000
	ends := []RqEnd{RqSucceeded, RqFailed, RqTimedOut, RqCancelled}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			l := testLine(g)
			for i := range requests {
				ln := hs.RqStarted(l)
				if g == 0 && i == requests-1 {
					continue // one request stays in flight
				}
				ln.RqEnded(ends[i%len(ends)])
			}
		})
	}
	wg.Wait()
	quarter := uint64(goroutines * requests / 4)
	want := HostRq{Total: goroutines * requests, Success: quarter, Timeout: quarter, Error: 2 * quarter, Active: 1}
	// Goroutine 0 left out its last RqEnded, which would have been RqCancelled (3999 % 4 == 3),
	// so only rq_active tells it.
	if got := hs.Rq(); got != want {
		t.Errorf("Rq() = %+v; want %+v", got, want)
	}
	hs.AddRq(HostRq{Total: 2, Active: -1})
	if got := hs.Rq(); got.Total != want.Total+2 || got.Active != 0 {
		t.Errorf("after AddRq: total, active = %d, %d; want %d, 0", got.Total, got.Active, want.Total+2)
	}
}

// TestHostLinesFollowGOMAXPROCS raises GOMAXPROCS after a host's lines were made for one P:
// the first request of a P beyond them grows the table to a line per P, no two on one cache
// line, and requests started before the growth end on the lines they started on, so Rq stays
// exact; past maxHostLines Ps share the lines instead of growing them further.
func TestHostLinesFollowGOMAXPROCS(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var hs HostStats
	before := hs.RqStarted(stats.ThisLine())
	if n := len(hs.rq.Load().line); n != 1 {
		t.Fatalf("lines made at GOMAXPROCS 1: %d; want 1", n)
	}
	const procs = 4
	runtime.GOMAXPROCS(procs)
	lines := map[uintptr]int{}
	var started []*HostLine
	for p := range procs {
		ln := hs.RqStarted(stats.Line(p))
		started = append(started, ln)
		a := uintptr(unsafe.Pointer(ln)) / 64
		if other, ok := lines[a]; ok {
			t.Errorf("at GOMAXPROCS %d, Ps %d and %d count on one cache line", procs, other, p)
		}
		lines[a] = p
	}
	if n := len(hs.rq.Load().line); n != procs {
		t.Errorf("after requests on %d Ps the host has %d lines; want %d", procs, n, procs)
	}
	if got := hs.Rq(); got.Total != procs+1 || got.Active != procs+1 {
		t.Errorf("Rq() with %d requests in flight = %+v", procs+1, got)
	}
	before.RqEnded(RqSucceeded)
	for _, ln := range started {
		ln.RqEnded(RqFailed)
	}

	// Goroutines on every P (race detector) count while the table grows to maxHostLines.
	runtime.GOMAXPROCS(2 * maxHostLines)
	const goroutines, requests = 8, 2000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range requests {
				hs.RqStarted(stats.Line(g*7 + i%(2*maxHostLines))).RqEnded(RqSucceeded)
			}
		})
	}
	wg.Wait()
	if n := len(hs.rq.Load().line); n != maxHostLines {
		t.Errorf("at GOMAXPROCS %d the host has %d lines; want %d", 2*maxHostLines, n, maxHostLines)
	}
	want := HostRq{Total: procs + 1 + goroutines*requests, Success: 1 + goroutines*requests, Error: procs}
	if got := hs.Rq(); got != want {
		t.Errorf("Rq() after the growth = %+v; want %+v", got, want)
	}
}
