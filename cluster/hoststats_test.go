package cluster

import (
	"sync"
	"testing"
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
