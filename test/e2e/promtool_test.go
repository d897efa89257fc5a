package e2e

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/stats/format"
)

// promtool returns the path of Debian's promtool. Without it the test is
// skipped, unless LEGATE_E2E_TOOLS=1 (make e2e, which installs it) makes a
// missing tool a failure.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("LEGATE_E2E_TOOLS") == "1" {
			t.Fatalf("LEGATE_E2E_TOOLS=1 but promtool is missing: %v", err)
		}
		t.Skipf("promtool not installed (%v); make e2e installs it", err)
	}
	return path
}

// envoyLints are the promtool lint messages about metric naming that Envoy's
// own exposition draws and that Legate, byte-compatible with it, must draw
// too; each comes with a stat of Envoy's that forces it. Every other lint
// (labels such as le or quantile on the wrong type, reserved characters,
// camelCase) and every parse error fails the test.
var envoyLints = []string{
	// Envoy writes no # HELP lines.
	" no help text",
	// cluster.<name>.upstream_rq_<code> becomes envoy_cluster_upstream_rq.
	` counter metrics should have "_total" suffix`,
	// cluster.<name>.membership_total is a gauge.
	` non-counter metrics should not have "_total" suffix`,
	// cluster.<name>.default.total_match_count is a counter.
	` non-histogram and non-summary metrics should not have "_count" suffix`,
	// server.initialization_time_ms, cluster.<name>.upstream_cx_length_ms.
	" metric names should not contain abbreviated units",
	// server.days_until_first_cert_expiring.
	` use base unit "seconds" instead of "days"`,
}

// checkMetrics pipes body through `promtool check metrics` and fails on any
// error or lint problem it reports, except envoyLints.
func checkMetrics(t *testing.T, tool, what, body string) {
	t.Helper()
	if strings.TrimSpace(body) == "" {
		t.Fatalf("%s: empty exposition", what)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return
	case errors.As(err, &ee) && ee.ExitCode() == 3:
		// Exit code 3: lint problems, one "<metric> <problem>" per line.
	default:
		t.Fatalf("%s: promtool check metrics: %v\n%s\ninput:\n%s", what, err, out.String(), body)
	}
	var problems []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !slices.ContainsFunc(envoyLints, func(l string) bool { return strings.HasSuffix(line, l) }) {
			problems = append(problems, line)
		}
	}
	if len(problems) > 0 {
		t.Errorf("%s: promtool check metrics reports:\n%s\ninput:\n%s", what, strings.Join(problems, "\n"), body)
	}
}

func TestPromtoolAcceptsRunningLegate(t *testing.T) {
	tool := promtool(t)
	p := start(t, "-c", writeConfig(t, minimalConfig))
	// Traffic to the admin interface fills its counters and histograms.
	for range 3 {
		p.get("/ready")
	}
	for _, path := range []string{
		"/stats/prometheus",
		"/stats/prometheus?text_readouts",
		"/stats/prometheus?usedonly",
		"/stats/prometheus?histogram_buckets=summary",
		"/stats?format=prometheus",
	} {
		t.Run(path, func(t *testing.T) {
			code, _, body := p.get(path)
			if code != 200 {
				t.Fatalf("GET %s = %d; want 200\n%s", path, code, body)
			}
			checkMetrics(t, tool, path, body)
		})
	}
}

// promStats is a component's stats struct for the populated store.
type promStats struct {
	RqTotal  stats.Counter   `stat:"upstream_rq_total"`
	CxActive stats.Gauge     `stat:"upstream_cx_active,accumulate"`
	RqTime   stats.Histogram `stat:"upstream_rq_time,unit=ms"`
	Idle     stats.Histogram `stat:"upstream_cx_length_ms,unit=ms"`
}

func TestPromtoolAcceptsPopulatedStore(t *testing.T) {
	tool := promtool(t)
	s, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var srv stats.ServerStats
	s.Register("server.", &srv)
	srv.Live.Set(1)
	srv.Uptime.Set(42)
	// Cluster names that need sanitizing and label escaping.
	for i, name := range []string{"web", "api_v2", "odd-name.with.dots", "quote\"back\\slash"} {
		var cs promStats
		s.Register("cluster."+name+".", &cs)
		cs.RqTotal.Add(uint64(10 * (i + 1)))
		cs.CxActive.Set(uint64(i))
		for v := range uint64(100) {
			cs.RqTime.Record(v * uint64(i+1))
		}
		s.Counter("cluster." + name + ".upstream_rq_200").Add(7)
		s.Counter("cluster." + name + ".upstream_rq_503").Inc()
	}
	s.Counter("http.ingress.downstream_rq_2xx").Add(5)
	s.Counter("listener.127.0.0.1_8080.downstream_cx_total").Add(2)
	s.Gauge("runtime.num_keys", stats.NeverImport).Set(3)
	s.TextReadout("server.version_text").Set("1.0 \"legate\"")
	s.Flush()

	for _, raw := range []string{"", "text_readouts", "usedonly", "histogram_buckets=summary", "filter=cluster", "histogram_buckets=cumulative"} {
		t.Run("query="+raw, func(t *testing.T) {
			v, err := url.ParseQuery(raw)
			if err != nil {
				t.Fatal(err)
			}
			q, err := format.ParseQuery(v, true)
			if err != nil {
				t.Fatalf("ParseQuery(%q): %v", raw, err)
			}
			var b bytes.Buffer
			if err := format.WritePrometheus(&b, s, q); err != nil {
				t.Fatalf("WritePrometheus: %v", err)
			}
			checkMetrics(t, tool, "WritePrometheus("+raw+")", b.String())
		})
	}
}
