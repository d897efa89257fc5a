package format

import (
	"bytes"
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/stats"
)

// htmlStore is a small store with one stat of each kind, a name and a text
// readout that need HTML escaping, and an unused counter.
func htmlStore(t testing.TB) *stats.Store {
	t.Helper()
	s, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.TextReadout("server.motd").Set(`a <b> & "c" 'd'`)
	s.Counter("cluster.x.upstream_rq_total").Add(3)
	s.Counter("cluster.x.unused")
	s.Counter("cluster.<x>.odd").Inc()
	s.Gauge("cluster.x.cx_active", stats.Accumulate).Set(1)
	s.Histogram("cluster.x.rq_time", stats.Milliseconds).Record(10)
	s.Flush()
	return s
}

// htmlQuery parses raw as a /stats query string.
func htmlQuery(t testing.TB, raw string) Query {
	t.Helper()
	v, err := url.ParseQuery(raw)
	if err != nil {
		t.Fatal(err)
	}
	q, err := ParseQuery(v, false)
	if err != nil {
		t.Fatalf("ParseQuery(%q): %v", raw, err)
	}
	return q
}

func renderHTML(t testing.TB, s *stats.Store, raw string) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteHTML(&b, s, htmlQuery(t, raw)); err != nil {
		t.Fatalf("WriteHTML(%q): %v", raw, err)
	}
	return b.String()
}

// preBody returns what the html page prints after its script: the stat
// lines, up to the closing </pre>.
func preBody(t *testing.T, page string) string {
	t.Helper()
	const start, end = "</script>\n<pre>\n", "</pre>\n</body>\n</html>\n"
	i := strings.Index(page, start)
	if i < 0 || !strings.HasSuffix(page, end) {
		t.Fatalf("page lacks %q or does not end with %q:\n%s", start, end, page)
	}
	return page[i+len(start) : len(page)-len(end)]
}

func TestWriteHTMLLines(t *testing.T) {
	s := htmlStore(t)
	var hist bytes.Buffer
	if err := WriteText(&hist, s, htmlQuery(t, "type=Histograms")); err != nil {
		t.Fatal(err)
	}
	none := func(label string) string { return "</pre>\n<br/><i>No " + label + " found</i><br/>\n<pre>\n" }
	tests := []struct {
		name, query, want string
	}{
		{
			name:  "everything, escaped",
			query: "format=html",
			want: "server.motd: \"a &lt;b&gt; &amp; &quot;c&quot; &#39;d&#39;\"\n" +
				"cluster.&lt;x&gt;.odd: 1\n" +
				"cluster.x.cx_active: 1\n" +
				"cluster.x.unused: 0\n" +
				"cluster.x.upstream_rq_total: 3\n" +
				hist.String(),
		},
		{
			name:  "used only and filter",
			query: "format=html&usedonly&filter=x%5C.u",
			want:  none("text readouts") + "cluster.x.upstream_rq_total: 3\n" + none("Histograms"),
		},
		{
			name:  "nothing matches: one marker per phase",
			query: "format=html&filter=nomatch",
			want:  none("text readouts") + none("Counters and Gauges") + none("Histograms"),
		},
		{
			name:  "type given: the label stays text readouts",
			query: "format=html&filter=nomatch&type=Counters",
			want:  none("text readouts"),
		},
		{
			name:  "type=Histograms: the label stays text readouts",
			query: "format=html&filter=nomatch&type=Histograms",
			want:  none("text readouts"),
		},
		{
			name:  "type=Gauges",
			query: "format=html&type=Gauges",
			want:  "cluster.x.cx_active: 1\n",
		},
		{
			name:  "text readouts only",
			query: "format=html&type=TextReadouts&filter=nomatch",
			want:  none("text readouts"),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := preBody(t, renderHTML(t, s, tc.query))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("WriteHTML(%q) lines (-want +got):\n%s", tc.query, diff)
			}
		})
	}
}

func TestWriteHTMLPage(t *testing.T) {
	s := htmlStore(t)
	tests := []struct {
		name, query  string
		want, absent []string
	}{
		{
			name:  "defaults",
			query: "format=html",
			want: []string{
				"<!DOCTYPE html>\n<html lang='en'>\n<head>\n  <title>Envoy Admin</title>\n",
				"<form action='stats' method='get' id='stats' class='home-form'></form>",
				"<input type='checkbox' name='usedonly' id='param-1-stats-usedonly' form='stats' onchange='this.form.submit()'>",
				"<input type='text' name='filter' id='param-1-stats-filter' form='stats' onchange='this.form.submit()' />",
				"<option value='html' selected>html</option>",
				"<option value='All' selected>All</option>",
				"<option value='summary' selected>summary</option>",
				"<label for='param-1-stats-histogram_buckets'>Histogram bucket display mode</label>",
				"function renderHistogram(",
			},
			absent: []string{" checked", "active-max-display-count"},
		},
		{
			name:  "query values shown in the widgets",
			query: "format=html&usedonly&filter=a'b&type=Gauges&histogram_buckets=disjoint",
			want: []string{
				"id='param-1-stats-usedonly' form='stats' onchange='this.form.submit()' checked>",
				"id='param-1-stats-filter' form='stats' onchange='this.form.submit()' value='a&#39;b' />",
				"<option value='Gauges' selected>Gauges</option>",
				"<option value='disjoint' selected>disjoint</option>",
			},
			absent: []string{"<option value='All' selected>", "<option value='summary' selected>"},
		},
		{
			name:  "active view: widgets and script, no stats",
			query: "format=active-html&filter=rq&type=Counters",
			want: []string{
				"id='param-1-stats-filter' form='stats' value='rq' />",
				"<option value='Counters' selected>Counters</option>",
				"id='active-max-display-count' value='50'",
				"id='active-update-interval' value='5'",
				"<div id='active-status'>",
				"'stats?format=json&usedonly'",
			},
			absent: []string{"upstream_rq_total", "server.motd", "<pre>", "onchange=", "name='format'", "histogram_buckets", "usedonly' id="},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			page := renderHTML(t, s, tc.query)
			for _, w := range tc.want {
				if !strings.Contains(page, w) {
					t.Errorf("WriteHTML(%q) lacks %q", tc.query, w)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(page, a) {
					t.Errorf("WriteHTML(%q) contains %q; want it absent", tc.query, a)
				}
			}
			if !strings.HasSuffix(page, "</body>\n</html>\n") {
				t.Errorf("WriteHTML(%q) ends %q; want </body></html>", tc.query, page[max(0, len(page)-40):])
			}
		})
	}
}

func TestWriteHTMLDetailed(t *testing.T) {
	s := htmlStore(t)
	s.Histogram("cluster.</script><x>.t", stats.Milliseconds).Record(7)
	s.Flush()
	got := preBody(t, renderHTML(t, s, "format=html&type=Histograms&histogram_buckets=detailed"))
	if !strings.HasPrefix(got, "</pre>\n<div id='histograms'></div>\n<script>\n") || !strings.HasSuffix(got, "<pre>\n") {
		t.Fatalf("detailed histograms are not set apart from the <pre>:\n%s", got)
	}
	if strings.Contains(got, "</script><x>") {
		t.Errorf("a histogram name closed the script element:\n%s", got)
	}
	calls := regexp.MustCompile(`<script>renderHistogram\(histogramDiv, supportedPercentiles, (.*)\);</script>\n`).FindAllStringSubmatch(got, -1)
	var names []string
	for _, c := range calls {
		var detail struct {
			Name        string
			Totals      []struct{ Count uint64 }
			Percentiles []struct{ Cumulative float64 }
		}
		if err := json.Unmarshal([]byte(c[1]), &detail); err != nil {
			t.Fatalf("renderHistogram argument %s: %v", c[1], err)
		}
		if len(detail.Totals) == 0 || len(detail.Percentiles) != len(supported) {
			t.Errorf("histogram %q: %d bins, %d percentiles; want bins and %d percentiles", detail.Name, len(detail.Totals), len(detail.Percentiles), len(supported))
		}
		names = append(names, detail.Name)
	}
	if diff := cmp.Diff([]string{"cluster.</script><x>.t", "cluster.x.rq_time"}, names); diff != "" {
		t.Errorf("rendered histograms (-want +got):\n%s", diff)
	}
}

func TestWriteHTMLOddQuery(t *testing.T) {
	// A Query no parameter produces still renders, with nothing selected.
	var b bytes.Buffer
	if err := WriteHTML(&b, htmlStore(t), Query{Format: HTML, Type: 99, Buckets: 99}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), " selected>All<") || !strings.Contains(b.String(), "server.motd") {
		t.Errorf("WriteHTML(out-of-range query) = %s", b.String())
	}
}

func TestAppendEscapedHTML(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain.name_1", "plain.name_1"},
		{`<a href="x">'&'</a>`, "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"},
		{"ünï<", "ünï&lt;"},
		{"cluster.service_with_a_long_name.upstream_rq_total", "cluster.service_with_a_long_name.upstream_rq_total"},
		{"neighbours $%=?;:#(\x00\xff) of the five", "neighbours $%=?;:#(\x00\xff) of the five"},
		{"01234567>", "01234567&gt;"},
		{"0123456&", "0123456&amp;"},
		{"01234567890123'", "01234567890123&#39;"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			if got := string(appendEscapedHTML(nil, tc.in)); got != tc.want {
				t.Errorf("appendEscapedHTML(%q) = %q; want %q", tc.in, got, tc.want)
			}
		})
	}
}

// htmlEscaper is the reference for appendEscapedHTML.
var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;")

func FuzzAppendEscapedHTML(f *testing.F) {
	for _, seed := range []string{"", "plain", "<&>\"'", "cluster.a_long_name_of_thirty_two.", "0123456<89abcdef>"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(appendEscapedHTML([]byte("x"), s)), "x"+htmlEscaper.Replace(s); got != want {
			t.Errorf("appendEscapedHTML(%q) = %q; want %q", s, got, want)
		}
	})
}

// FuzzWriteHTMLEscaping checks that no stat name or text readout value can
// put markup into the html page: whatever they hold, the page has exactly the
// tags of a page without them.
func FuzzWriteHTMLEscaping(f *testing.F) {
	for _, seed := range []string{"plain", "<script>alert(1)</script>", `"'&<>`, "</pre><i>", "\xff<"} {
		f.Add(seed, seed)
	}
	tags := regexp.MustCompile(`<[a-zA-Z/!]`)
	f.Fuzz(func(t *testing.T, name, value string) {
		s, err := stats.New(stats.Config{})
		if err != nil {
			t.Fatal(err)
		}
		s.TextReadout("a").Set(value)
		s.Counter("a1").Inc()
		s.Histogram("a2", stats.Milliseconds).Record(1)
		page := renderHTML(t, s, "format=html")
		want := len(tags.FindAllStringIndex(page, -1))
		s.TextReadout("b" + name).Set(value)
		s.Counter("c" + name).Inc()
		s.Histogram("d"+name, stats.Milliseconds).Record(1)
		for _, q := range []string{"format=html", "format=html&histogram_buckets=detailed"} {
			page := renderHTML(t, s, q)
			if q == "format=html" {
				if got := len(tags.FindAllStringIndex(page, -1)); got != want {
					t.Fatalf("name %q, value %q: page has %d tags; want %d:\n%s", name, value, got, want, page)
				}
			} else if strings.Contains(page, "<script>renderHistogram") && strings.Count(page, "</script>") != strings.Count(page, "<script>") {
				t.Fatalf("name %q: unbalanced script elements:\n%s", name, page)
			}
		}
	})
}

// BenchmarkRenderHTML renders the html page of 1M counters (bigStore), the
// same work as BenchmarkRenderText plus escaping.
func BenchmarkRenderHTML(b *testing.B) { benchRender(b, "format=html", false, WriteHTML) }
