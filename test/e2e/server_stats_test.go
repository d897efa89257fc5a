package e2e

import (
	"net/http"
	"net/url"
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

// TestHiddenStatsDeferredCreation is issue 17's item 14: with
// deferred_stat_options.enable_deferred_creation_stats, a cluster's traffic
// stats do not exist until it carries traffic, and Envoy's hidden gauge
// cluster.<name>.ClusterTrafficStats.initialized says whether they do; it is
// what hidden=include and hidden=only show, and the default leaves it out.
func TestHiddenStatsDeferredCreation(t *testing.T) {
	up := statusUpstream(t)
	p := start(t, "-c", writeConfig(t, routeAllConfig(up.URL, "deferred_stat_options: {enable_deferred_creation_stats: true}\n")))
	const initialized = "cluster.backend.ClusterTrafficStats.initialized"
	stats := func(query string) string {
		t.Helper()
		code, _, body := p.get("/stats?filter=" + url.QueryEscape(`^cluster\.backend\.(ClusterTrafficStats|upstream_rq_total|membership_total)`) + query)
		if code != http.StatusOK {
			t.Fatalf("GET /stats%s = %d\n%s", query, code, body)
		}
		return body
	}
	for _, c := range []struct{ query, want string }{
		{"", "cluster.backend.membership_total: 1\n"},
		{"&hidden=exclude", "cluster.backend.membership_total: 1\n"},
		{"&hidden=include", initialized + ": 0\ncluster.backend.membership_total: 1\n"},
		{"&hidden=only", initialized + ": 0\n"},
	} {
		if got := stats(c.query); got != c.want {
			t.Errorf("before traffic, /stats%s =\n%s\nwant\n%s", c.query, got, c.want)
		}
	}
	resp, err := http.Get("http://" + p.listenerAddr("http") + "/status/200")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := initialized + ": 1\ncluster.backend.membership_total: 1\ncluster.backend.upstream_rq_total: 1\n"
	if got := stats("&hidden=include"); got != want {
		t.Errorf("after a request, /stats&hidden=include =\n%s\nwant\n%s", got, want)
	}
	if got := stats(""); strings.Contains(got, initialized) || !strings.Contains(got, "upstream_rq_total: 1") {
		t.Errorf("after a request, /stats (hidden excluded) =\n%s\nwant upstream_rq_total and no hidden gauge", got)
	}
}
