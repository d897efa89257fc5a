package tlsutil

import (
	"testing"

	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

func TestSANMatcherMatch(t *testing.T) {
	exact := func(v string, fold bool) *matcherv3.StringMatcher {
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: v}, IgnoreCase: fold}
	}
	prefix := func(v string, fold bool) *matcherv3.StringMatcher {
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: v}, IgnoreCase: fold}
	}
	regex := func(v string) *matcherv3.StringMatcher {
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: v}}}
	}
	tests := []struct {
		name  string
		typ   SANType
		m     *matcherv3.StringMatcher
		value string
		want  bool
	}{
		{"DNS exact folds case", SANDNS, exact("API.example.com", false), "api.EXAMPLE.com", true},
		{"DNS exact matches wildcard SAN", SANDNS, exact("a.example.com", false), "*.example.com", true},
		{"DNS exact wildcard one label only", SANDNS, exact("a.b.example.com", false), "*.example.com", false},
		{"DNS prefix is not a DNS rule", SANDNS, prefix("a.", false), "*.example.com", false},
		{"URI exact is case-sensitive", SANURI, exact("spiffe://td/Web", false), "spiffe://td/web", false},
		{"URI exact ignore case", SANURI, exact("spiffe://td/Web", true), "SPIFFE://td/web", true},
		{"email prefix ignore case", SANEmail, prefix("Ops@", true), "ops@example.com", true},
		{"email prefix case-sensitive", SANEmail, prefix("Ops@", false), "ops@example.com", false},
		{"regex matches whole value", SANURI, regex("spiffe://td/.*"), "spiffe://td/web", true},
		{"regex anchored", SANURI, regex("td/web"), "spiffe://td/web", false},
		{"ignore case folds ASCII only", SANEmail, exact("é@example.com", true), "É@example.com", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sm, err := stringMatchFromProto("m", tt.m)
			if err != nil {
				t.Fatal(err)
			}
			m := SANMatcher{Type: tt.typ, Match: sm}
			if got := m.match(tt.value); got != tt.want {
				t.Errorf("match(%q) = %v; want %v", tt.value, got, tt.want)
			}
		})
	}
}

func TestStringMatchFromProtoErrors(t *testing.T) {
	tests := []struct {
		name string
		m    *matcherv3.StringMatcher
		want string
	}{
		{"empty prefix", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{}}, `m.prefix = "": must not be empty`},
		{"no pattern", &matcherv3.StringMatcher{}, "m: one of exact, prefix, suffix, contains or safe_regex is required"},
		{"bad regex", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "a)"}}},
			`m.safe_regex.regex = "a)": invalid regex: error parsing regexp: unexpected ): ` + "`a)`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := stringMatchFromProto("m", tt.m)
			if err == nil || err.Error() != tt.want {
				t.Errorf("stringMatchFromProto error = %v; want %s", err, tt.want)
			}
		})
	}
}
