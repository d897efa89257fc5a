package stats

import (
	"fmt"
	"sync"
	"testing"
)

// TestConcurrentUse races increments, registration, by-name lookups, flushes
// and both iteration orders; run with -race.
func TestConcurrentUse(t *testing.T) {
	s := newStore(t, Config{})
	var c clusterStats
	s.Register("cluster.web.", &c)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 2; g++ {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c.UpstreamRqTotal.Inc()
				c.UpstreamCxActive.Set(3)
				c.UpstreamRqTime.Record(7)
				c.Version.Set("x")
			}
		})
	}
	wg.Go(func() {
		for i := 0; i < 200; i++ {
			r := s.Register(fmt.Sprintf("cluster.c%d.", i), new(small))
			r.Counter("dyn").Inc()
			if i%2 == 0 {
				r.Unregister()
			}
		}
	})
	for i := 0; i < 50; i++ {
		s.Flush()
		n := 0
		s.Each(allKinds, func(st *Stat) bool { n++; _ = st.Value(); return true })
		s.EachTagged(KindCounter, func(*Stat) bool { return true }, func(st *TaggedStat, _ bool) bool { _ = st.Value(); return true })
		s.ResetCounters()
	}
	close(stop)
	wg.Wait()
	if got := len(listNames(s, allKinds)); got != 6+100*3 {
		t.Errorf("listed %d stats; want %d", got, 6+100*3)
	}
}
