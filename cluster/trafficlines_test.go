package cluster

import (
	"sync"
	"testing"

	"github.com/legateproxy/legate/stats"
)

// TestTrafficLinesBoundWhileCounting checks a cluster's traffic lines (Stats.Lines), made on
// the first request while other goroutines count the same stats with Inc and Add (the TCP
// proxy's upstream_rq_total, the UDP proxy's byte totals, one of each made before): from
// goroutines on every P (run with -cpu 1,2), some on lines beyond the table's, every count
// lands exactly once in the counters' values, whichever came first.
func TestTrafficLinesBoundWhileCounting(t *testing.T) {
	var st Stats
	st.UpstreamRqTotal.Inc() // before any line is bound: on the counter's own lines
	st.UpstreamCxTxBytesTotal.Add(5)
	const goroutines, requests = 8, 4000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			l := testLine(g)
			for i := range requests {
				if (g+i)%3 == 0 {
					st.UpstreamRqTotal.Inc()
					st.UpstreamCxTxBytesTotal.Add(5)
					continue
				}
				tl := st.Lines().On(l)
				tl.RqTotal.Add(1)
				tl.RqCompleted.Add(1)
				tl.CxRxBytes.Add(7)
				tl.CxTxBytes.Add(5)
			}
		})
	}
	wg.Wait()
	var onLines uint64
	for g := range goroutines {
		for i := range requests {
			if (g+i)%3 != 0 {
				onLines++
			}
		}
	}
	const all = goroutines*requests + 1
	if got := st.UpstreamRqTotal.Value(); got != all {
		t.Errorf("upstream_rq_total = %d; want %d", got, all)
	}
	if got := st.UpstreamRqCompleted.Value(); got != onLines {
		t.Errorf("upstream_rq_completed = %d; want %d", got, onLines)
	}
	if got := st.UpstreamCxRxBytesTotal.Value(); got != 7*onLines {
		t.Errorf("upstream_cx_rx_bytes_total = %d; want %d", got, 7*onLines)
	}
	if got := st.UpstreamCxTxBytesTotal.Value(); got != 5*all {
		t.Errorf("upstream_cx_tx_bytes_total = %d; want %d", got, 5*all)
	}
	if st.Lines() != st.Lines() {
		t.Error("Lines() made a second block")
	}
}

// testLine is the line goroutine g counts on: its P's, or for odd g one far beyond the table
// (the lines a P past it would take), so that both kinds are summed.
func testLine(g int) stats.Line {
	l := stats.ThisLine()
	if g%2 == 1 {
		l += stats.Line(g * 1000)
	}
	return l
}
