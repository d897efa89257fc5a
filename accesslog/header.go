package accesslog

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// headerMatch is a compiled route.v3.HeaderMatcher of a header_filter, applied to the
// request headers as Envoy's HeaderUtility::matchHeaders applies it: several values of a
// header are joined with ",", a missing header matches only present_match false (or, with
// treat_missing_header_as_empty, is compared as ""), and invert_match inverts the result for
// a present header. Immutable.
type headerMatch struct {
	key          string // as headerKey spells it
	present      *bool  // present_match (or no specifier: true); nil for a value match
	value        func(string) bool
	invert       bool
	missingEmpty bool
}

func compileHeaderMatch(path string, h *routev3.HeaderMatcher) (*headerMatch, error) {
	if h == nil {
		return nil, fmt.Errorf("%s: is required", path)
	}
	if h.GetName() == "" {
		return nil, fmt.Errorf("%s.name = \"\"; must not be empty", path)
	}
	m := &headerMatch{key: headerKey(h.GetName()), invert: h.GetInvertMatch(), missingEmpty: h.GetTreatMissingHeaderAsEmpty()}
	var err error
	switch s := h.GetHeaderMatchSpecifier().(type) {
	case nil:
		yes := true
		m.present = &yes
	case *routev3.HeaderMatcher_PresentMatch:
		m.present = &s.PresentMatch
	case *routev3.HeaderMatcher_ExactMatch:
		// The deprecated exact_match: an empty value matches any value.
		want := s.ExactMatch
		m.value = func(v string) bool { return want == "" || v == want }
	case *routev3.HeaderMatcher_PrefixMatch:
		m.value, err = stringMatch(path+".prefix_match", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: s.PrefixMatch}})
	case *routev3.HeaderMatcher_SuffixMatch:
		m.value, err = stringMatch(path+".suffix_match", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: s.SuffixMatch}})
	case *routev3.HeaderMatcher_ContainsMatch:
		m.value, err = stringMatch(path+".contains_match", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: s.ContainsMatch}})
	case *routev3.HeaderMatcher_SafeRegexMatch:
		m.value, err = wholeRegex(path+".safe_regex_match.regex", s.SafeRegexMatch.GetRegex())
	case *routev3.HeaderMatcher_StringMatch:
		m.value, err = stringMatch(path+".string_match", s.StringMatch)
	case *routev3.HeaderMatcher_RangeMatch:
		lo, hi := s.RangeMatch.GetStart(), s.RangeMatch.GetEnd()
		if lo >= hi {
			return nil, fmt.Errorf("%s.range_match = [%d, %d); start must be < end", path, lo, hi)
		}
		m.value = func(v string) bool {
			n, err := strconv.ParseInt(v, 10, 64)
			return err == nil && n >= lo && n < hi
		}
	default:
		return nil, fmt.Errorf("%s: header_match_specifier %T is not implemented by Legate", path, s)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// stringMatch compiles a StringMatcher (exact, prefix, suffix, contains with ignore_case;
// safe_regex matching the whole value).
func stringMatch(path string, pb *matcherv3.StringMatcher) (func(string) bool, error) {
	fold := pb.GetIgnoreCase()
	norm := func(s string) string {
		if fold {
			return strings.ToLower(s)
		}
		return s
	}
	nonEmpty := func(field, v string) error {
		if v == "" {
			return fmt.Errorf("%s.%s = \"\"; must not be empty", path, field)
		}
		return nil
	}
	switch p := pb.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		want := norm(p.Exact)
		return func(v string) bool { return norm(v) == want }, nil
	case *matcherv3.StringMatcher_Prefix:
		want := norm(p.Prefix)
		return func(v string) bool { return strings.HasPrefix(norm(v), want) }, nonEmpty("prefix", p.Prefix)
	case *matcherv3.StringMatcher_Suffix:
		want := norm(p.Suffix)
		return func(v string) bool { return strings.HasSuffix(norm(v), want) }, nonEmpty("suffix", p.Suffix)
	case *matcherv3.StringMatcher_Contains:
		want := norm(p.Contains)
		return func(v string) bool { return strings.Contains(norm(v), want) }, nonEmpty("contains", p.Contains)
	case *matcherv3.StringMatcher_SafeRegex:
		return wholeRegex(path+".safe_regex.regex", p.SafeRegex.GetRegex())
	}
	return nil, fmt.Errorf("%s: one of exact, prefix, suffix, contains or safe_regex is required", path)
}

// wholeRegex compiles an RE2 expression that must match a whole value, as Envoy's safe_regex
// does.
func wholeRegex(path, expr string) (func(string) bool, error) {
	re, err := regexp.Compile(`^(?:` + expr + `)$`)
	if err != nil {
		return nil, fmt.Errorf("%s = %q; not a valid RE2 expression", path, expr)
	}
	return re.MatchString, nil
}

// match applies the matcher to e's request headers.
func (m *headerMatch) match(e *Entry) bool {
	v, ok := requestHeaderValue(e, m.key)
	if !ok && !m.missingEmpty {
		// Only "must be absent" matches a missing header; inverted, only "must be present".
		return m.present != nil && *m.present == m.invert
	}
	var matched bool
	if m.present != nil {
		matched = *m.present
	} else {
		matched = m.value(v)
	}
	return matched != m.invert
}

// requestHeaderValue returns a request header (a pseudo-header from the entry's fields),
// several values joined with ","; ok is false when it is absent.
func requestHeaderValue(e *Entry, key string) (string, bool) {
	var v string
	switch key {
	case ":method":
		v = e.Method
	case ":path":
		v = e.Path
	case ":authority":
		v = e.Authority
	case ":scheme":
		v = e.Scheme
	default:
		vs := e.RequestHeaders[key]
		if len(vs) == 0 {
			return "", false
		}
		return strings.Join(vs, ","), true
	}
	return v, v != ""
}
