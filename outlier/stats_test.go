package outlier

import (
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/stats"
)

func TestStatNames(t *testing.T) {
	store, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var s Stats
	reg := store.Register("cluster.web.outlier_detection.", &s)
	defer reg.Unregister()
	var got []string
	store.Each(stats.KindSet(stats.KindCounter, stats.KindGauge), func(st *stats.Stat) bool {
		got = append(got, st.Kind().String()+" "+strings.TrimPrefix(st.Name(), "cluster.web.outlier_detection."))
		return true
	})
	// Envoy's ALL_OUTLIER_DETECTION_STATS.
	want := []string{
		"counter ejections_consecutive_5xx",
		"counter ejections_detected_consecutive_5xx",
		"counter ejections_detected_consecutive_gateway_failure",
		"counter ejections_detected_success_rate",
		"counter ejections_detected_failure_percentage",
		"counter ejections_enforced_consecutive_5xx",
		"counter ejections_enforced_consecutive_gateway_failure",
		"counter ejections_enforced_success_rate",
		"counter ejections_enforced_failure_percentage",
		"counter ejections_detected_consecutive_local_origin_failure",
		"counter ejections_enforced_consecutive_local_origin_failure",
		"counter ejections_detected_local_origin_success_rate",
		"counter ejections_enforced_local_origin_success_rate",
		"counter ejections_detected_local_origin_failure_percentage",
		"counter ejections_enforced_local_origin_failure_percentage",
		"counter ejections_enforced_total",
		"counter ejections_overflow",
		"counter ejections_success_rate",
		"counter ejections_total",
		"gauge ejections_active",
	}
	sort.Strings(got)
	sort.Strings(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stat names (-want +got):\n%s", diff)
	}
}
