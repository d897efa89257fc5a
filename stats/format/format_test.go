package format

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/legateproxy/legate/stats"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type clusterStats struct {
	UpstreamCxTotal  stats.Counter   `stat:"upstream_cx_total"`
	UpstreamRqTotal  stats.Counter   `stat:"upstream_rq_total"`
	UpstreamCxActive stats.Gauge     `stat:"upstream_cx_active,accumulate"`
	MaxHostWeight    stats.Gauge     `stat:"max_host_weight,never_import"`
	UpstreamRqTime   stats.Histogram `stat:"upstream_rq_time,unit=ms"`
	UpstreamCxLength stats.Histogram `stat:"upstream_cx_length_ms,unit=ms"`
	Breakers         struct {
		CxOpen stats.Gauge `stat:"cx_open"`
	} `stat:"circuit_breakers.default."`
}

type listenerStats struct {
	DownstreamCxTotal stats.Counter `stat:"downstream_cx_total"`
	Hidden            stats.Gauge   `stat:"hidden_thing,hidden"`
}

// fixture builds a small deterministic store: server stats, two clusters,
// a listener, an HTTP connection manager, dynamic response-code counters, a
// text readout and histograms in several states.
func fixture(t testing.TB) *stats.Store {
	t.Helper()
	s, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var srv stats.ServerStats
	s.Register("server.", &srv)
	srv.Uptime.Set(124)
	srv.Version.Set(14438601)
	srv.Live.Set(1)
	srv.Concurrency.Set(8)
	srv.InitializationTimeMs.Record(12)

	var a, b clusterStats
	s.Register("cluster.service_a.", &a)
	s.Register("cluster.b.", &b)
	a.UpstreamCxTotal.Add(2)
	a.UpstreamRqTotal.Add(5)
	a.UpstreamRqTime.Record(200)
	a.UpstreamRqTime.Record(300)
	a.UpstreamRqTime.Record(300)
	b.UpstreamRqTime.Record(2)
	s.Counter("cluster.service_a.upstream_rq_200").Add(5)
	s.Counter("cluster.service_a.upstream_rq_2xx").Add(5)
	s.Counter("cluster.b.upstream_rq_503").Inc()

	var l listenerStats
	s.Register("listener.0.0.0.0_10000.", &l)
	l.DownstreamCxTotal.Add(3)
	l.Hidden.Set(7)
	s.Counter("http.admin.downstream_rq_2xx").Add(3)
	s.Counter("http.admin.downstream_rq_4xx").Add(1)
	s.Counter("listener.admin.http.admin.downstream_rq_2xx").Add(3)
	s.TextReadout("server.name").Set(`legate "one"`)
	s.TextReadout("cluster.b.note")
	s.Flush() // b's sample and everything else move into an interval
	a.UpstreamRqTime.Record(205)
	a.UpstreamRqTime.Record(0)
	s.Flush() // a now has a fresh interval; b's interval is empty
	return s
}

func render(t *testing.T, s *stats.Store, rawQuery string, prometheus bool) string {
	t.Helper()
	vals, err := url.ParseQuery(rawQuery)
	if err != nil {
		t.Fatal(err)
	}
	q, err := ParseQuery(vals, prometheus)
	if err != nil {
		t.Fatalf("ParseQuery(%q) error: %v", rawQuery, err)
	}
	var buf bytes.Buffer
	switch q.Format {
	case JSON:
		err = WriteJSON(&buf, s, q)
	case Prometheus:
		err = WritePrometheus(&buf, s, q)
	default:
		err = WriteText(&buf, s, q)
	}
	if err != nil {
		t.Fatalf("write error: %v", err)
	}
	return buf.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", path, diff)
	}
}

var goldenCases = []struct {
	name, query string
	prometheus  bool
}{
	{"text", "", false},
	{"text_usedonly", "usedonly", false},
	{"text_cumulative", "histogram_buckets=cumulative", false},
	{"text_disjoint", "histogram_buckets=disjoint", false},
	{"text_detailed", "histogram_buckets=detailed&filter=upstream_rq_time", false},
	{"text_filter", `filter=^server\.(uptime|version|concurrency|state)$`, false},
	{"text_hidden_only", "hidden=only", false},
	{"text_hidden_include_gauges", "hidden=include&type=Gauges", false},
	{"text_type_histograms", "type=Histograms&usedonly", false},
	{"text_type_textreadouts", "type=TextReadouts", false},
	{"json", "format=json", false},
	{"json_usedonly", "format=json&usedonly", false},
	{"json_cumulative", "format=json&histogram_buckets=cumulative&filter=rq_time", false},
	{"json_disjoint", "format=json&histogram_buckets=disjoint&filter=rq_time", false},
	{"json_detailed", "format=json&histogram_buckets=detailed&filter=rq_time", false},
	{"json_empty", "format=json&filter=nothing_matches_this", false},
	{"prometheus", "", true},
	{"prometheus_summary", "histogram_buckets=summary", true},
	{"prometheus_text_readouts", "text_readouts&usedonly&filter=server", true},
	{"prometheus_format_param", "format=prometheus&usedonly&type=Counters", false},
}

func TestGolden(t *testing.T) {
	s := fixture(t)
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			got := render(t, s, tc.query, tc.prometheus)
			golden(t, tc.name, got)
			switch {
			case strings.HasPrefix(tc.name, "json"):
				var v any
				if err := json.Unmarshal([]byte(got), &v); err != nil {
					t.Errorf("output is not JSON: %v", err)
				}
			case strings.HasPrefix(tc.name, "prometheus"):
				p := expfmt.NewTextParser(model.LegacyValidation)
				if _, err := p.TextToMetricFamilies(strings.NewReader(got)); err != nil {
					t.Errorf("expfmt parse: %v", err)
				}
			}
		})
	}
}

// TestReferenceExamples checks the byte-exact examples of the reference.
func TestReferenceExamples(t *testing.T) {
	s, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.Counter("c1").Add(10)
	h := s.Histogram("h1", stats.Unspecified)
	h.Record(200)
	h.Record(300)
	h.Record(300)
	s.Flush()
	g := s.Histogram("cluster.a.upstream_rq_time", stats.Milliseconds)
	g.Record(2)
	s.Flush()
	s.Flush()
	want := `{"stats":[{"name":"c1","value":10},{"histograms":{"supported_quantiles":[0,25,50,75,90,95,99,99.5,99.9,100],"computed_quantiles":[{"name":"h1","values":[{"cumulative":200,"interval":200},{"cumulative":207.5,"interval":207.5},{"cumulative":302.5,"interval":302.5},{"cumulative":306.25,"interval":306.25},{"cumulative":308.5,"interval":308.5},{"cumulative":309.25,"interval":309.25},{"cumulative":309.85,"interval":309.85},{"cumulative":309.925,"interval":309.925},{"cumulative":309.985,"interval":309.985},{"cumulative":310,"interval":310}]}]}}]}`
	// h1 was flushed three times, so its interval is now empty; rebuild the
	// reference state in a fresh store for the JSON example.
	s2, _ := stats.New(stats.Config{})
	s2.Counter("c1").Add(10)
	h2 := s2.Histogram("h1", stats.Unspecified)
	for _, v := range []uint64{200, 300, 300} {
		h2.Record(v)
	}
	s2.Flush()
	if got := render(t, s2, "format=json", false); got != want {
		t.Errorf("JSON example:\ngot  %s\nwant %s", got, want)
	}
	wantText := "cluster.a.upstream_rq_time: P0(nan,2) P25(nan,2.025) P50(nan,2.05) P75(nan,2.075) P90(nan,2.09) P95(nan,2.095) P99(nan,2.099) P99.5(nan,2.0995) P99.9(nan,2.0999) P100(nan,2.1)\n"
	if got := render(t, s, "filter=upstream_rq_time", false); got != wantText {
		t.Errorf("text example:\ngot  %q\nwant %q", got, wantText)
	}
	if got, want := render(t, s, `format=json&filter=^nothing$`, false), `{"stats":[]}`; got != want {
		t.Errorf("empty JSON = %q; want %q", got, want)
	}
	if got := render(t, s, `filter=^nothing$`, false); got != "" {
		t.Errorf("empty text = %q; want empty", got)
	}
}

func TestJSONDecodes(t *testing.T) {
	s := fixture(t)
	var got struct {
		Stats []json.RawMessage `json:"stats"`
	}
	if err := json.Unmarshal([]byte(render(t, s, "format=json&usedonly", false)), &got); err != nil {
		t.Fatal(err)
	}
	type entry struct {
		Name  string
		Value any
	}
	var first entry
	if err := json.Unmarshal(got.Stats[0], &first); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(entry{"server.name", `legate "one"`}, first); diff != "" {
		t.Errorf("first entry (-want +got):\n%s", diff)
	}
	var last struct {
		Histograms struct {
			SupportedQuantiles []float64 `json:"supported_quantiles"`
			ComputedQuantiles  []struct {
				Name   string
				Values []struct{ Cumulative, Interval *float64 }
			} `json:"computed_quantiles"`
		}
	}
	if err := json.Unmarshal(got.Stats[len(got.Stats)-1], &last); err != nil {
		t.Fatal(err)
	}
	h := last.Histograms
	if diff := cmp.Diff([]float64{0, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 100}, h.SupportedQuantiles); diff != "" {
		t.Errorf("supported_quantiles (-want +got):\n%s", diff)
	}
	var names []string
	for _, c := range h.ComputedQuantiles {
		names = append(names, c.Name)
	}
	want := []string{"cluster.b.upstream_rq_time", "cluster.service_a.upstream_rq_time", "server.initialization_time_ms"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("histogram names (-want +got):\n%s", diff)
	}
	if v := h.ComputedQuantiles[0].Values[0]; v.Interval != nil || v.Cumulative == nil || *v.Cumulative != 2 {
		t.Errorf("cluster.b P0 = %v; want interval null, cumulative 2", v)
	}
}

func TestPrometheusParses(t *testing.T) {
	s := fixture(t)
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(render(t, s, "text_readouts", true)))
	if err != nil {
		t.Fatal(err)
	}
	rq := fams["envoy_cluster_upstream_rq"]
	if rq == nil || len(rq.Metric) != 2 {
		t.Fatalf("envoy_cluster_upstream_rq = %v; want 2 series", rq)
	}
	l := rq.Metric[1].Label
	if l[0].GetName() != "envoy_response_code" || l[0].GetValue() != "200" || l[1].GetValue() != "service_a" {
		t.Errorf("labels = %v; want response_code=200, cluster_name=service_a", l)
	}
	h := fams["envoy_cluster_upstream_rq_time"]
	if h == nil || h.Metric[1].Histogram.GetSampleCount() != 5 {
		t.Errorf("envoy_cluster_upstream_rq_time = %v; want service_a with 5 samples", h)
	}
	if g := fams["envoy_server_name"]; g == nil || g.Metric[0].Label[0].GetValue() != `legate "one"` {
		t.Errorf("text readout = %v", g)
	}
}

func TestParseQuery(t *testing.T) {
	tests := []struct {
		name       string
		query      string
		prometheus bool
		want       Query
		wantErr    string
	}{
		{name: "empty", want: Query{}},
		{name: "flags", query: "usedonly&text_readouts=1&pretty&safe", want: Query{UsedOnly: true, TextReadouts: true}},
		{name: "empty_values", query: "filter=&type=&hidden=&format=&histogram_buckets=", want: Query{}},
		{name: "all_choices", query: "type=Gauges&hidden=only&format=json&histogram_buckets=detailed", want: Query{Type: Gauges, Hidden: HiddenOnly, Format: JSON, Buckets: BucketsDetailed}},
		{name: "none_is_summary", query: "histogram_buckets=none&format=html", want: Query{Buckets: BucketsSummary, Format: HTML}},
		{name: "active_html", query: "format=active-html&type=TextReadouts&hidden=include", want: Query{Format: ActiveHTML, Type: TextReadouts, Hidden: HiddenInclude}},
		{name: "prometheus_path", query: "format=text&histogram_buckets=cumulative", prometheus: true, want: Query{Format: Prometheus, Buckets: BucketsCumulative}},
		{name: "bad_filter", query: "filter=(", wantErr: "Invalid re2 regex"},
		{name: "bad_buckets", query: "histogram_buckets=x", wantErr: "usage: /stats?histogram_buckets=(cumulative|disjoint|detailed|summary)\n"},
		{name: "bad_type", query: "type=counters", wantErr: "invalid &type= param"},
		{name: "bad_hidden", query: "hidden=all", wantErr: "usage: /stats?hidden=(include|only|exclude)\n\n"},
		{name: "bad_format", query: "format=xml", wantErr: "usage: /stats?format=(html|active-html|json|prometheus|text)\n\n"},
		{name: "order_filter_first", query: "format=xml&type=x&filter=(", wantErr: "Invalid re2 regex"},
		{name: "order_buckets_before_type", query: "type=x&histogram_buckets=x", wantErr: "usage: /stats?histogram_buckets=(cumulative|disjoint|detailed|summary)\n"},
		{name: "order_type_before_hidden", query: "hidden=x&type=x", wantErr: "invalid &type= param"},
		{name: "order_hidden_before_format", query: "hidden=x&format=x", wantErr: "usage: /stats?hidden=(include|only|exclude)\n\n"},
		{name: "prometheus_disjoint", query: "histogram_buckets=disjoint", prometheus: true, wantErr: "unsupported prometheus histogram bucket mode"},
		{name: "format_prometheus_detailed", query: "format=prometheus&histogram_buckets=detailed", wantErr: "unsupported prometheus histogram bucket mode"},
		{name: "prometheus_bad_format", query: "format=xml", prometheus: true, wantErr: "usage: /stats?format=(html|active-html|json|prometheus|text)\n\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vals, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseQuery(vals, tc.prometheus)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Errorf("ParseQuery(%q) error = %q; want %q", tc.query, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseQuery(%q) error: %v", tc.query, err)
			}
			got.Filter = nil
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseQuery(%q) (-want +got):\n%s", tc.query, diff)
			}
		})
	}
}

func FuzzParseQuery(f *testing.F) {
	for _, tc := range goldenCases {
		f.Add(tc.query, tc.prometheus)
	}
	f.Add("filter=(&format=x", false)
	f.Fuzz(func(t *testing.T, raw string, prometheus bool) {
		vals, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := ParseQuery(vals, prometheus)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error %T is not *Error", err)
			}
			return
		}
		if prometheus && q.Format != Prometheus {
			t.Fatalf("prometheus path gave format %v", q.Format)
		}
	})
}

func TestNumbers(t *testing.T) {
	tests := []struct {
		v                 float64
		shortest, jsonNum string
		g6, g32           string
	}{
		{0.5, "0.5", "0.5", "0.5", "0.5"},
		{300000, "300000", "3e+05", "300000", "300000"},
		{100000, "100000", "1e+05", "100000", "100000"},
		{10000, "10000", "10000", "10000", "10000"},
		{1800000, "1800000", "1800000", "1.8e+06", "1800000"},
		{3600000, "3600000", "3600000", "3.6e+06", "3600000"},
		{1e16, "1e+16", "1e+16", "1e+16", "10000000000000000"},
		{0.0001, "0.0001", "1e-04", "0.0001", "0.00010000000000000000479217360238593"},
		{0.00001, "1e-05", "1e-05", "1e-05", "1.0000000000000000818030539140313e-05"},
		{115.00000000000001, "115.00000000000001", "115.00000000000001", "115", "115.000000000000014210854715202"},
		{0, "0", "0", "0", "0"},
	}
	for _, tc := range tests {
		t.Run(tc.shortest, func(t *testing.T) {
			if got := string(appendShortest(nil, tc.v)); got != tc.shortest {
				t.Errorf("appendShortest(%v) = %q; want %q", tc.v, got, tc.shortest)
			}
			if got := string(appendJSONDouble(nil, tc.v)); got != tc.jsonNum {
				t.Errorf("appendJSONDouble(%v) = %q; want %q", tc.v, got, tc.jsonNum)
			}
			if got := string(appendG(nil, tc.v, 6)); got != tc.g6 {
				t.Errorf("%%g(%v) = %q; want %q", tc.v, got, tc.g6)
			}
			if got := string(appendG(nil, tc.v, 32)); got != tc.g32 {
				t.Errorf("%%.32g(%v) = %q; want %q", tc.v, got, tc.g32)
			}
		})
	}
}

func TestJSONString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain.name", `"plain.name"`},
		{"q\"b\\", `"q\"b\\"`},
		{"\b\f\n\r\t\x01\x7f", `"\b\f\n\r\t\u0001` + "\x7f\""},
		{"héllo", `"héllo"`},
		{"bad\xffbyte", `"bad\u00ffbyte"`},
		{"<&>", `"<&>"`},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			if got := string(appendJSONString(nil, tc.in)); got != tc.want {
				t.Errorf("appendJSONString(%q) = %s; want %s", tc.in, got, tc.want)
			}
		})
	}
}
