package stats_test

import (
	"fmt"

	"github.com/legateproxy/legate/stats"
)

// ClusterStats is how a component declares its stats: struct fields named
// exactly as Envoy names them.
type ClusterStats struct {
	UpstreamRqTotal  stats.Counter   `stat:"upstream_rq_total"`
	UpstreamCxActive stats.Gauge     `stat:"upstream_cx_active,accumulate"`
	UpstreamRqTime   stats.Histogram `stat:"upstream_rq_time,unit=ms"`
}

func ExampleStore_Register() {
	store, err := stats.New(stats.Config{})
	if err != nil {
		panic(err)
	}
	var cs ClusterStats
	reg := store.Register("cluster.web.", &cs)
	defer reg.Unregister()

	cs.UpstreamRqTotal.Inc()       // request path: one atomic add
	reg.Counter("upstream_rq_200") // slow path: a stat named at run time
	store.Each(stats.KindSet(stats.KindCounter, stats.KindGauge), func(st *stats.Stat) bool {
		fmt.Printf("%s: %d\n", st.Name(), st.Value())
		return true
	})
	// Output:
	// cluster.web.upstream_cx_active: 0
	// cluster.web.upstream_rq_200: 0
	// cluster.web.upstream_rq_total: 1
}
