package e2e

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestStatsRecentLookupsGauge is issue 17's item 12: the by-name stat
// lookups that /stats/recentlookups counts show in the gauge
// server.stats_recent_lookups, refreshed on each stats flush as in Envoy.
func TestStatsRecentLookupsGauge(t *testing.T) {
	up := statusUpstream(t)
	p := start(t, "-c", writeConfig(t, routeAllConfig(up.URL, "stats_flush_interval: 0.1s\n")))
	listener := "http://" + p.listenerAddr("http")
	for _, code := range []int{200, 201, 404} {
		resp, err := http.Get(listener + "/status/" + strconv.Itoa(code))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	_, _, body := p.get("/stats/recentlookups")
	_, total, _ := strings.Cut(body, "total: ")
	n, err := strconv.ParseUint(strings.TrimSpace(total), 10, 64)
	if err != nil || n == 0 {
		t.Fatalf("/stats/recentlookups total = %q after three response codes; want a positive count\n%s", total, body)
	}
	p.waitStatAtLeast("server.stats_recent_lookups", n)
}
