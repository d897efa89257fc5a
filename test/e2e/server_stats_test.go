package e2e

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
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
		code, _, body := p.get("/stats?filter=" + url.QueryEscape(`^cluster\.backend\.(ClusterTrafficStats|upstream_rq_total|upstream_rq_time$|membership_total)`) + query)
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
	// upstream_rq_time, which Envoy's router creates with the first response, is listed now
	// (item 14's rest: it was listed from the start). It is recorded when the exchange ends,
	// which may be just after the client has the response.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(stats(""), "cluster.backend.upstream_rq_time: "); {
		if time.Now().After(deadline) {
			t.Fatalf("upstream_rq_time not listed 10 s after a request:\n%s", stats(""))
		}
		time.Sleep(20 * time.Millisecond)
	}
	want := initialized + ": 1\ncluster.backend.membership_total: 1\ncluster.backend.upstream_rq_total: 1\n"
	got := stats("&hidden=include")
	got = regexp.MustCompile(`(?m)^cluster\.backend\.upstream_rq_time: .*\n`).ReplaceAllString(got, "")
	if got != want {
		t.Errorf("after a request, /stats&hidden=include =\n%s\nwant\n%s and upstream_rq_time", stats("&hidden=include"), want)
	}
	if got := stats(""); strings.Contains(got, initialized) || !strings.Contains(got, "upstream_rq_total: 1") {
		t.Errorf("after a request, /stats (hidden excluded) =\n%s\nwant upstream_rq_total and no hidden gauge", got)
	}
}

// TestUpstreamRqTimeOnlyWithAResponse: Envoy's router creates
// cluster.<name>.upstream_rq_time with the first upstream response, so a
// cluster whose requests all failed to connect (503) lists none, with or
// without deferred_stat_options; its other traffic stats are there.
func TestUpstreamRqTimeOnlyWithAResponse(t *testing.T) {
	for _, extra := range []string{"", "deferred_stat_options: {enable_deferred_creation_stats: true}\n"} {
		p := start(t, "-c", writeConfig(t, routeAllConfig("http://127.0.0.1:1", extra)))
		resp, err := http.Get("http://" + p.listenerAddr("http") + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("status %d; want 503 (nothing listens on port 1)", resp.StatusCode)
		}
		p.waitStatAtLeast("cluster.backend.upstream_cx_connect_fail", 1)
		if _, _, body := p.get("/stats?filter=" + url.QueryEscape(`^cluster\.backend\.upstream_rq_time$`)); body != "" {
			t.Errorf("%q: /stats lists %q; want no upstream_rq_time before a response", extra, body)
		}
	}
}
