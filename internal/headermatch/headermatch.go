package headermatch

import (
	"fmt"
	"net/textproto"
	"regexp"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// Regex is a compiled RE2 pattern with Envoy's safe_regex semantics: it must
// match the whole value. A literal prefix of the pattern rejects most values
// without running the regexp. Immutable.
type Regex struct {
	re     *regexp.Regexp
	prefix string
}

// CompileRegex compiles a RegexMatcher; path names the field in errors.
func CompileRegex(m *matcherv3.RegexMatcher, path string) (*Regex, error) {
	if m == nil {
		return nil, fmt.Errorf("%s: regex is missing", path)
	}
	re, err := regexp.Compile(`^(?:` + m.GetRegex() + `)$`)
	if err != nil {
		// Compile the bare pattern for an error message that does not show our wrapping.
		if _, e2 := regexp.Compile(m.GetRegex()); e2 != nil {
			err = e2
		}
		return nil, fmt.Errorf("%s.regex = %q: invalid RE2: %v", path, m.GetRegex(), err)
	}
	prefix, _ := re.LiteralPrefix()
	return &Regex{re: re, prefix: prefix}, nil
}

// Match reports whether the pattern matches all of s.
func (r *Regex) Match(s string) bool {
	return strings.HasPrefix(s, r.prefix) && r.re.MatchString(s)
}

// Prefix returns the literal text every match starts with ("" when none).
func (r *Regex) Prefix() string { return r.prefix }

// stringKind is the kind of a StringMatcher.
type stringKind uint8

const (
	strExact stringKind = iota
	strPrefix
	strSuffix
	strContains
	strRegex
)

// String is a compiled envoy.type.matcher.v3.StringMatcher: exact, prefix,
// suffix and contains (ignore_case folds ASCII only, as Envoy's
// absl::EqualsIgnoreCase) and safe_regex. Immutable; the zero value matches
// only "".
type String struct {
	kind       stringKind
	value      string // lower-cased when ignoreCase
	ignoreCase bool
	re         *Regex
}

// CompileString compiles a StringMatcher; path names the field in errors.
func CompileString(m *matcherv3.StringMatcher, path string) (String, error) {
	sm := String{ignoreCase: m.GetIgnoreCase()}
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		sm.kind, sm.value = strExact, p.Exact
	case *matcherv3.StringMatcher_Prefix:
		sm.kind, sm.value = strPrefix, p.Prefix
	case *matcherv3.StringMatcher_Suffix:
		sm.kind, sm.value = strSuffix, p.Suffix
	case *matcherv3.StringMatcher_Contains:
		sm.kind, sm.value = strContains, p.Contains
	case *matcherv3.StringMatcher_SafeRegex:
		re, err := CompileRegex(p.SafeRegex, path+".safe_regex")
		if err != nil {
			return sm, err
		}
		sm.kind, sm.re, sm.ignoreCase = strRegex, re, false
	case *matcherv3.StringMatcher_Custom:
		return sm, fmt.Errorf("%s.custom: custom string matchers are not supported", path)
	default:
		return sm, fmt.Errorf("%s: one of exact, prefix, suffix, contains or safe_regex is required", path)
	}
	if sm.kind != strExact && sm.kind != strRegex && sm.value == "" {
		return sm, fmt.Errorf("%s.%s = \"\": must not be empty", path, sm.kind.field())
	}
	if sm.ignoreCase {
		sm.value = strings.ToLower(sm.value)
	}
	return sm, nil
}

// ExactString returns the matcher of StringMatcher{exact: v}: case-sensitive
// equality with v.
func ExactString(v string) String { return String{kind: strExact, value: v} }

// Exact returns the value of an exact matcher (in lower case when it ignores
// case) and true; for any other kind it returns "" and false. Callers with
// their own rules for exact values use it, as the DNS SAN matcher does for
// wildcard certificates.
func (m *String) Exact() (string, bool) {
	if m.kind != strExact {
		return "", false
	}
	return m.value, true
}

func (k stringKind) field() string {
	switch k {
	case strPrefix:
		return "prefix"
	case strSuffix:
		return "suffix"
	case strContains:
		return "contains"
	}
	return "exact"
}

// Match reports whether s matches.
func (m *String) Match(s string) bool {
	switch m.kind {
	case strExact:
		if m.ignoreCase {
			return len(s) == len(m.value) && HasPrefixFold(s, m.value)
		}
		return s == m.value
	case strPrefix:
		if m.ignoreCase {
			return HasPrefixFold(s, m.value)
		}
		return strings.HasPrefix(s, m.value)
	case strSuffix:
		if m.ignoreCase {
			return len(s) >= len(m.value) && HasPrefixFold(s[len(s)-len(m.value):], m.value)
		}
		return strings.HasSuffix(s, m.value)
	case strContains:
		if m.ignoreCase {
			for i := 0; i+len(m.value) <= len(s); i++ {
				if HasPrefixFold(s[i:], m.value) {
					return true
				}
			}
			return false
		}
		return strings.Contains(s, m.value)
	case strRegex:
		return m.re.Match(s)
	}
	return false
}

// HasPrefixFold reports whether s starts with lower, ignoring ASCII case; lower is lower
// case. It does not allocate.
func HasPrefixFold(s, lower string) bool {
	if len(s) < len(lower) {
		return false
	}
	for i := 0; i < len(lower); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// Value returns what a matcher sees of a header whose values are vs, as Envoy's
// HeaderUtility gets it: several values joined with ","; ok is false when there are none
// (the header is absent). It allocates only to join several values.
func Value(vs []string) (v string, ok bool) {
	switch len(vs) {
	case 0:
		return "", false
	case 1:
		return vs[0], true
	}
	return strings.Join(vs, ","), true
}

// Key normalises a header name for lookups: pseudo-headers (":path",
// ":method", ":scheme", ":status") in lower case, "host" and ":authority" as
// ":authority", any other name in canonical MIME form (as net/http keys it).
func Key(name string) string {
	l := strings.ToLower(name)
	switch l {
	case ":authority", "host":
		return ":authority"
	case ":path", ":method", ":scheme", ":status":
		return l
	}
	return textproto.CanonicalMIMEHeaderKey(name)
}

// headerKind is how a HeaderMatcher compares.
type headerKind uint8

const (
	hdrPresent headerKind = iota
	hdrString
	hdrRange
	hdrExactLegacy // exact_match: an empty value matches anything
)

// Header is a compiled route.v3.HeaderMatcher (present_match, the deprecated
// exact/prefix/suffix/contains/safe_regex matches, string_match, range_match,
// invert_match and treat_missing_header_as_empty). Immutable.
type Header struct {
	key          string
	kind         headerKind
	str          String
	present      bool
	start, end   int64
	invert       bool
	missingEmpty bool
}

// CompileHeader compiles a HeaderMatcher; path names the field in errors.
// A matcher without a specifier tests presence.
func CompileHeader(h *routev3.HeaderMatcher, path string) (Header, error) {
	if h.GetName() == "" {
		return Header{}, fmt.Errorf("%s.name = \"\": must not be empty", path)
	}
	hm := Header{
		key:          Key(h.GetName()),
		invert:       h.GetInvertMatch(),
		missingEmpty: h.GetTreatMissingHeaderAsEmpty(),
	}
	str := func(kind stringKind, v, field string) (String, error) {
		if v == "" {
			return String{}, fmt.Errorf("%s.%s = \"\": must not be empty", path, field)
		}
		return String{kind: kind, value: v}, nil
	}
	var err error
	switch s := h.GetHeaderMatchSpecifier().(type) {
	case *routev3.HeaderMatcher_ExactMatch:
		hm.kind, hm.str = hdrExactLegacy, String{kind: strExact, value: s.ExactMatch}
	case *routev3.HeaderMatcher_SafeRegexMatch:
		var re *Regex
		re, err = CompileRegex(s.SafeRegexMatch, path+".safe_regex_match")
		hm.kind, hm.str = hdrString, String{kind: strRegex, re: re}
	case *routev3.HeaderMatcher_RangeMatch:
		hm.kind, hm.start, hm.end = hdrRange, s.RangeMatch.GetStart(), s.RangeMatch.GetEnd()
		if hm.start >= hm.end {
			err = fmt.Errorf("%s.range_match = [%d, %d): start must be < end", path, hm.start, hm.end)
		}
	case *routev3.HeaderMatcher_PresentMatch:
		hm.kind, hm.present = hdrPresent, s.PresentMatch
	case *routev3.HeaderMatcher_PrefixMatch:
		hm.kind = hdrString
		hm.str, err = str(strPrefix, s.PrefixMatch, "prefix_match")
	case *routev3.HeaderMatcher_SuffixMatch:
		hm.kind = hdrString
		hm.str, err = str(strSuffix, s.SuffixMatch, "suffix_match")
	case *routev3.HeaderMatcher_ContainsMatch:
		hm.kind = hdrString
		hm.str, err = str(strContains, s.ContainsMatch, "contains_match")
	case *routev3.HeaderMatcher_StringMatch:
		hm.kind = hdrString
		hm.str, err = CompileString(s.StringMatch, path+".string_match")
	default: // no specifier: presence
		hm.kind, hm.present = hdrPresent, true
	}
	return hm, err
}

// Key returns the header the matcher reads, normalised as Key does.
func (m *Header) Key() string { return m.key }

// Match applies the matcher to the header's value v; present is false when
// the request has no such header. It implements one matcher of Envoy's
// HeaderUtility::matchHeaders: a missing header matches only present_match
// false (inverted: only present_match true) unless
// treat_missing_header_as_empty compares it as "".
func (m *Header) Match(v string, present bool) bool {
	if !present && !m.missingEmpty {
		if m.invert {
			return m.kind == hdrPresent && m.present
		}
		return m.kind == hdrPresent && !m.present
	}
	var matched bool
	switch m.kind {
	case hdrPresent:
		matched = m.present
	case hdrExactLegacy:
		matched = m.str.value == "" || v == m.str.value
	case hdrString:
		matched = m.str.Match(v)
	case hdrRange:
		n, err := strconv.ParseInt(v, 10, 64)
		matched = err == nil && n >= m.start && n < m.end
	}
	return matched != m.invert
}
