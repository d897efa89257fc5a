package stats

import (
	"sync"
	"testing"
)

type pickStats struct {
	Selected HotCounter `stat:"lb_subsets_selected"`
	Plain    Counter    `stat:"lb_subsets_fallback"`
}

// TestHotCounter checks that a HotCounter counts increments from many goroutines exactly and
// reads like a Counter everywhere: /stats values, usedonly, flush deltas and /reset_counters.
func TestHotCounter(t *testing.T) {
	s := newStore(t, Config{})
	var c pickStats
	s.Register("cluster.web.", &c)
	if c.Selected.Used() {
		t.Fatal("fresh HotCounter reports used")
	}
	const goroutines, incs = 8, 10_000
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range incs {
				c.Selected.Inc()
			}
		})
	}
	wg.Wait()
	value := func() (uint64, bool) {
		var v uint64
		var used, found bool
		s.Each(KindSet(KindCounter), func(st *Stat) bool {
			if st.Name() == "cluster.web.lb_subsets_selected" {
				v, used, found = st.Value(), st.Used(), true
			}
			return true
		})
		if !found {
			t.Fatal("cluster.web.lb_subsets_selected not listed")
		}
		return v, used
	}
	if v, used := value(); v != goroutines*incs || !used {
		t.Errorf("listed value, used = %d, %v; want %d, true", v, used, goroutines*incs)
	}
	sink := make(chanSink, 1)
	s.AddSink(sink)
	c.Selected.Inc()
	s.Flush()
	for _, cs := range recv(t, sink).Counters {
		if cs.Name == "cluster.web.lb_subsets_selected" && (cs.Delta != goroutines*incs+1 || cs.Value != goroutines*incs+1) {
			t.Errorf("flushed delta, value = %d, %d; want %d both", cs.Delta, cs.Value, goroutines*incs+1)
		}
	}
	c.Selected.Inc()
	s.ResetCounters()
	if v, used := value(); v != 0 || !used {
		t.Errorf("after reset: value, used = %d, %v; want 0, true", v, used)
	}
	c.Selected.Inc()
	if got := c.Selected.Value(); got != 1 {
		t.Errorf("Value() after reset and Inc = %d; want 1", got)
	}
}

func BenchmarkHotCounterInc(b *testing.B) {
	b.Run("Counter", func(b *testing.B) {
		var c Counter
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.Inc()
			}
		})
	})
	b.Run("HotCounter", func(b *testing.B) {
		var c HotCounter
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.Inc()
			}
		})
	})
}
