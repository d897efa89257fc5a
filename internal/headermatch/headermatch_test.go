package headermatch

import (
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"
)

func header(t testing.TB, y string) *routev3.HeaderMatcher {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	var h routev3.HeaderMatcher
	if err := protojson.Unmarshal(j, &h); err != nil {
		t.Fatal(err)
	}
	return &h
}

func TestHeaderMatch(t *testing.T) {
	type value struct {
		v       string
		present bool
		want    bool
	}
	missing := value{"", false, false}
	tests := []struct {
		name   string
		yaml   string
		values []value
	}{
		{"no specifier is presence", "{name: x}", []value{{"", true, true}, {"a", true, true}, missing}},
		{"present false", "{name: x, present_match: false}", []value{{"a", true, false}, {"", false, true}}},
		{"present inverted", "{name: x, present_match: true, invert_match: true}", []value{{"a", true, false}, {"", false, true}}},
		{"legacy exact empty matches all", "{name: x, exact_match: ''}", []value{{"a", true, true}, missing}},
		{"legacy exact", "{name: x, exact_match: a}", []value{{"a", true, true}, {"A", true, false}}},
		{"prefix", "{name: x, prefix_match: ab}", []value{{"abc", true, true}, {"xab", true, false}, missing}},
		{"suffix", "{name: x, suffix_match: bc}", []value{{"abc", true, true}, {"bcx", true, false}}},
		{"contains", "{name: x, contains_match: b}", []value{{"abc", true, true}, {"ac", true, false}}},
		{"safe regex whole value", "{name: x, safe_regex_match: {regex: 'a.c'}}", []value{{"abc", true, true}, {"abcd", true, false}}},
		{"string exact ignore case", "{name: x, string_match: {exact: aBc, ignore_case: true}}", []value{{"ABC", true, true}, {"ABCD", true, false}}},
		{"string suffix ignore case", "{name: x, string_match: {suffix: Bc, ignore_case: true}}", []value{{"XBC", true, true}, {"c", true, false}}},
		{"string contains ignore case", "{name: x, string_match: {contains: B, ignore_case: true}}", []value{{"abc", true, true}, {"ac", true, false}}},
		{"string regex", "{name: x, string_match: {safe_regex: {regex: '[0-9]+'}}}", []value{{"123", true, true}, {"12a", true, false}}},
		{"range", "{name: x, range_match: {start: -10, end: 10}}", []value{{"-10", true, true}, {"10", true, false}, {"x", true, false}, missing}},
		{"invert value", "{name: x, prefix_match: a, invert_match: true}", []value{{"ab", true, false}, {"b", true, true}, missing}},
		{"missing as empty", "{name: x, string_match: {exact: ''}, treat_missing_header_as_empty: true}", []value{{"", false, true}, {"a", true, false}}},
		{"missing as empty inverted", "{name: x, prefix_match: a, invert_match: true, treat_missing_header_as_empty: true}", []value{{"", false, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := CompileHeader(header(t, tt.yaml), "h")
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range tt.values {
				if got := m.Match(v.v, v.present); got != v.want {
					t.Errorf("Match(%q, %v) = %v; want %v", v.v, v.present, got, v.want)
				}
			}
		})
	}
}

func TestCompileHeaderErrors(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"no name", "{exact_match: a}", `h.name = "": must not be empty`},
		{"bad regex", "{name: x, safe_regex_match: {regex: '('}}", `h.safe_regex_match.regex = "(": invalid RE2: error parsing regexp: missing closing ): ` + "`(`"},
		{"empty prefix", "{name: x, prefix_match: ''}", `h.prefix_match = "": must not be empty`},
		{"empty string contains", "{name: x, string_match: {contains: ''}}", `h.string_match.contains = "": must not be empty`},
		{"empty range", "{name: x, range_match: {start: 5, end: 5}}", "h.range_match = [5, 5): start must be < end"},
		{"string without pattern", "{name: x, string_match: {}}", "h.string_match: one of exact, prefix, suffix, contains or safe_regex is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CompileHeader(header(t, tt.yaml), "h")
			if err == nil || err.Error() != tt.want {
				t.Errorf("CompileHeader() error = %v; want %s", err, tt.want)
			}
		})
	}
}

func TestKey(t *testing.T) {
	for in, want := range map[string]string{"Host": ":authority", ":AUTHORITY": ":authority", ":Path": ":path",
		":status": ":status", "x-foo-bar": "X-Foo-Bar"} {
		t.Run(in, func(t *testing.T) {
			if got := Key(in); got != want {
				t.Errorf("Key(%q) = %q; want %q", in, got, want)
			}
		})
	}
}

func TestExact(t *testing.T) {
	tests := []struct {
		name      string
		m         *matcherv3.StringMatcher
		wantValue string
		wantOK    bool
	}{
		{"exact", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "Web"}}, "Web", true},
		{"exact ignore case", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "Web"}, IgnoreCase: true}, "web", true},
		{"prefix", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "we"}}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := CompileString(tt.m, "m")
			if err != nil {
				t.Fatal(err)
			}
			if v, ok := m.Exact(); v != tt.wantValue || ok != tt.wantOK {
				t.Errorf("Exact() = %q, %v; want %q, %v", v, ok, tt.wantValue, tt.wantOK)
			}
		})
	}
	t.Run("ExactString", func(t *testing.T) {
		m := ExactString("Web")
		for v, want := range map[string]bool{"Web": true, "web": false, "Webs": false} {
			if got := m.Match(v); got != want {
				t.Errorf("ExactString(%q).Match(%q) = %v; want %v", "Web", v, got, want)
			}
		}
	})
}

func TestValue(t *testing.T) {
	tests := []struct {
		name   string
		vs     []string
		want   string
		wantOK bool
	}{
		{"absent", nil, "", false},
		{"one", []string{"a"}, "a", true},
		{"one empty", []string{""}, "", true},
		{"several joined", []string{"a", "b", "c"}, "a,b,c", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, ok := Value(tt.vs); got != tt.want || ok != tt.wantOK {
				t.Errorf("Value(%q) = %q, %v; want %q, %v", tt.vs, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	m, err := CompileHeader(header(t, "{name: x, string_match: {contains: needle, ignore_case: true}}"), "h")
	if err != nil {
		t.Fatal(err)
	}
	v := strings.Repeat("hay", 20) + "NEEDLE"
	if n := testing.AllocsPerRun(100, func() { m.Match(v, true) }); n != 0 {
		t.Errorf("Match allocates %v times; want 0", n)
	}
}

func BenchmarkHeaderMatch(b *testing.B) {
	m, err := CompileHeader(header(b, "{name: x, string_match: {suffix: '.example.com', ignore_case: true}}"), "h")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		m.Match("api.EXAMPLE.com", true)
	}
}

func FuzzCompileString(f *testing.F) {
	f.Add("a.c", "abc", uint8(0), false)
	f.Add("(", "x", uint8(4), true)
	f.Fuzz(func(t *testing.T, pattern, value string, kind uint8, fold bool) {
		sm := &matcherv3.StringMatcher{IgnoreCase: fold}
		switch kind % 5 {
		case 0:
			sm.MatchPattern = &matcherv3.StringMatcher_Exact{Exact: pattern}
		case 1:
			sm.MatchPattern = &matcherv3.StringMatcher_Prefix{Prefix: pattern}
		case 2:
			sm.MatchPattern = &matcherv3.StringMatcher_Suffix{Suffix: pattern}
		case 3:
			sm.MatchPattern = &matcherv3.StringMatcher_Contains{Contains: pattern}
		default:
			sm.MatchPattern = &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: pattern}}
		}
		m, err := CompileString(sm, "s")
		if err != nil {
			return
		}
		got := m.Match(value)
		if kind%5 == 0 && !fold && got != (pattern == value) {
			t.Errorf("exact %q Match(%q) = %v", pattern, value, got)
		}
	})
}
