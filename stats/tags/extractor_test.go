package tags

import (
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRegexPrefix(t *testing.T) {
	tests := []struct{ expr, want string }{
		{`^prefix(foo).`, ""},
		{`^prefix\.foo`, "prefix"},
		{`^prefix_optional(?=\.)`, "prefix_optional"},
		{`^notACompleteToken`, ""},
		{`^onlyToken$`, "onlyToken"},
		{`^onlyToken$x`, ""},
		{`(prefix)`, ""},
		{`^(prefix)`, ""},
		{`prefix(foo)`, ""},
		{`^\.x`, ""},
		{`^`, ""},
		{`^a.b`, ""},
		{`^cluster\.((.+?)\.)`, "cluster"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			if got := regexPrefix(tt.expr); got != tt.want {
				t.Errorf("regexPrefix(%q) = %q; want %q", tt.expr, got, tt.want)
			}
		})
	}
}

func TestDefaultPrefixes(t *testing.T) {
	var got []string
	for _, d := range defaultRegexes {
		got = append(got, newRE2Extractor(d).Prefix())
	}
	want := []string{"", "", "http", "http", "http", "listener", "", "", "", "cluster", "listener", "",
		"listener", "http", "http", "http", "http", "proxy_proto", "proxy_proto", "", "sds"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("regex extractor prefixes (-want +got):\n%s", diff)
	}
	got = nil
	for _, d := range defaultTokens {
		got = append(got, newTokenExtractor(d).Prefix())
	}
	want = []string{"mongo", "mongo", "mongo", "cluster", "http", "vhost", "http", "cluster", "tcp", "udp",
		"auth", "ratelimit", "cluster", "cluster", "http", "http", "vhost", "mongo", "vhost", "thrift",
		"redis", "", "local_rate_limit", "listener_local_ratelimit", "dns_filter", "connection_limit", "", "grpc"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tokenized extractor prefixes (-want +got):\n%s", diff)
	}
}

func TestRequiredLiterals(t *testing.T) {
	tests := []struct{ expr, start, contain string }{
		{`^(?:listener\.x|server)\.worker_((\d+)\.)`, "", ".worker_"},
		{`_rq(_(\d{3}))$`, "", "_rq"},
		{`^sds\.((x)\.).+`, "sds.", "sds."},
		{`^a\.((b\.c)\.)d`, "a.", "b.c"},
		{`(?i)^abc\.(x)`, "", ""},
		{`(?m)^abc`, "", "abc"},
		{`a|b`, "", ""},
		{`(`, "", ""},
		{"^\uFFFD(x)", "", "x"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			start, contain := requiredLiterals(tt.expr)
			if start != tt.start || contain != tt.contain {
				t.Errorf("requiredLiterals(%q) = %q, %q; want %q, %q", tt.expr, start, contain, tt.start, tt.contain)
			}
		})
	}
}

func TestTokenMatching(t *testing.T) {
	tests := []struct {
		pattern, name    string
		value, extracted string
		ok               bool
	}{
		{"tcp.$.**", "tcp.p.x", "p", "tcp.x", true},
		{"tcp.$.**", "tcp.p", "", "", false}, // a final ** needs one token or more
		{"tcp.$.**", "tcp.p.", "p", "tcp.", true},
		{"tcp.$.**", "tcp..x", "", "tcp.x", true},
		{"tcp.$.**", "udp.p.x", "", "", false},
		{"a.*.$", "a.b.c", "c", "a.b", true}, // a last token goes with the dot before it
		{"$.rbac.**", "x.rbac.y", "x", "rbac.y", true},
		{"$.rbac.**", "rbac.y", "", "", false},
		{"mongo.*.collection.$.**.query.*", "mongo.m.collection.c.query.q", "c", "mongo.m.collection.query.q", true},
		{"mongo.*.collection.$.**.query.*", "mongo.m.collection.c.a.query.b.query.q", "c", "mongo.m.collection.a.query.b.query.q", true},
		{"mongo.*.collection.$.**.query.*", "mongo.m.collection.c.query", "", "", false},
		{"a.**.$.z", "a.x.y.v.z", "v", "a.x.y.z", true},
		{"a.**.$.z", "a.v.z", "v", "a.z", true},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+" "+tt.name, func(t *testing.T) {
			e := newTokenExtractor(tokenDescriptor{name: "t", pattern: tt.pattern})
			var buf [maxStackTokens]span
			value, lo, hi, ok := e.matchTokens(tt.name, splitTokens(tt.name, buf[:0]))
			if ok != tt.ok {
				t.Fatalf("matchTokens(%q) ok = %v; want %v", tt.name, ok, tt.ok)
			}
			if !ok {
				return
			}
			if got := tt.name[:lo] + tt.name[hi:]; value != tt.value || got != tt.extracted {
				t.Errorf("matchTokens(%q) = %q, %q; want %q, %q", tt.name, value, got, tt.value, tt.extracted)
			}
		})
	}
}

func TestCutName(t *testing.T) {
	tests := []struct {
		name string
		cuts []span
		want string
	}{
		{"abcdef", nil, "abcdef"},
		{"abcdef", []span{{1, 3}}, "adef"},
		{"abcdef", []span{{4, 6}, {0, 1}}, "bcd"},
		{"abcdef", []span{{1, 4}, {2, 5}}, "af"}, // overlapping ranges merge
		{"abcdef", []span{{1, 3}, {3, 5}}, "af"}, // adjacent ranges merge
		{"abcdef", []span{{1, 5}, {2, 3}}, "af"}, // nested ranges
		{"abcdef", []span{{0, 6}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := cutName(tt.name, append([]span(nil), tt.cuts...)); got != tt.want {
				t.Errorf("cutName(%q, %v) = %q; want %q", tt.name, tt.cuts, got, tt.want)
			}
		})
	}
}

// TestRE2NeedsTwoGroups pins Envoy's RE2 rule: a default-style extractor
// whose regex has fewer than two capture groups never matches.
func TestRE2NeedsTwoGroups(t *testing.T) {
	e := newRE2Extractor(regexDescriptor{name: "x", re: regexp.MustCompile(`^a\.(b)`)})
	if _, _, _, ok := e.matchRegex("a.b"); ok {
		t.Errorf("matchRegex with one capture group matched; want no match")
	}
}

// checkFast reports where a default extractor's hand-written matcher and
// its regex disagree on name.
func checkFast(t *testing.T, name string) {
	t.Helper()
	for _, d := range defaultRegexes {
		if d.fast == nil {
			continue
		}
		e := newRE2Extractor(d)
		slow := *e
		slow.fast = nil
		v1, lo1, hi1, ok1 := e.matchRegex(name)
		v2, lo2, hi2, ok2 := slow.matchRegex(name)
		if v1 != v2 || lo1 != lo2 || hi1 != hi2 || ok1 != ok2 {
			t.Errorf("%s on %q: fast matcher = %q [%d,%d) %v; regex = %q [%d,%d) %v",
				d.name, name, v1, lo1, hi1, ok1, v2, lo2, hi2, ok2)
		}
	}
}

func TestFastMatchersAgreeWithRegex(t *testing.T) {
	for _, name := range []string{
		"cluster.a.upstream_rq_200", "upstream_rq_2xx", "_rq_200", "_rq_2xx", "rq_200", "x_rq_20", "x_rq_2000",
		"x_rq_x00", "x_rq_2x0", "x_rq_20x", "x_rq_2xy", "x_rq_22xx", "x_rq_200_rq_300", "x_rq_٢00", "_rq__rq_1xx",
		"x_rq_200\n", "", "_rq_", "a_rq_1xx.b",
	} {
		checkFast(t, name)
	}
}
