package statstest

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/legateproxy/legate/stats"
)

// counter10 is ten counters with Envoy-length names.
type counter10 struct {
	A stats.Counter `stat:"upstream_cx_connect_attempts_exceeded_a"`
	B stats.Counter `stat:"upstream_cx_connect_attempts_exceeded_b"`
	C stats.Counter `stat:"upstream_rq_per_try_idle_timeout_total_c"`
	D stats.Counter `stat:"upstream_rq_per_try_idle_timeout_total_d"`
	E stats.Counter `stat:"upstream_cx_destroy_local_with_active_rq_e"`
	F stats.Counter `stat:"upstream_cx_destroy_local_with_active_rq_f"`
	G stats.Counter `stat:"lb_subsets_single_host_per_subset_dup_g"`
	H stats.Counter `stat:"lb_subsets_single_host_per_subset_dup_h"`
	I stats.Counter `stat:"membership_change_with_degraded_hosts_i"`
	J stats.Counter `stat:"membership_change_with_degraded_hosts_j"`
}

// Hundred is 100 counters in ten groups of ten.
type Hundred struct {
	G0 counter10 `stat:"g0."`
	G1 counter10 `stat:"g1."`
	G2 counter10 `stat:"g2."`
	G3 counter10 `stat:"g3."`
	G4 counter10 `stat:"g4."`
	G5 counter10 `stat:"g5."`
	G6 counter10 `stat:"g6."`
	G7 counter10 `stat:"g7."`
	G8 counter10 `stat:"g8."`
	G9 counter10 `stat:"g9."`
}

// Million is 10,000 clusters × 100 counters with long names (1M counters),
// the shape of Envoy's admin speed test. One counter per cluster is non-zero.
func Million(tb testing.TB) *stats.Store {
	tb.Helper()
	s, err := stats.New(stats.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i < 10000; i++ {
		h := new(Hundred)
		s.Register(fmt.Sprintf("cluster.service_%05d_with_a_long_name.", i), h)
		h.G3.C.Add(uint64(i))
	}
	runtime.GC()
	return s
}

// Value returns the value of the counter or gauge called name in st, and whether it exists.
func Value(st *stats.Store, name string) (uint64, bool) {
	var v uint64
	found := false
	st.Each(stats.KindSet(stats.KindCounter, stats.KindGauge), func(s *stats.Stat) bool {
		if s.Name() == name {
			v, found = s.Value(), true
			return false
		}
		return true
	})
	return v, found
}
