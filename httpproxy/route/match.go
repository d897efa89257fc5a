package route

import (
	"fmt"
	"net/textproto"
	"regexp"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// regex is a compiled RE2 pattern with Envoy's full-match semantics and a literal prefix used
// to reject most paths without running the regexp.
type regex struct {
	re     *regexp.Regexp
	prefix string
}

// compileRegex compiles a RegexMatcher; path names the field in errors.
func compileRegex(m *matcherv3.RegexMatcher, path string) (*regex, error) {
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
	return &regex{re: re, prefix: prefix}, nil
}

func (r *regex) match(s string) bool {
	return strings.HasPrefix(s, r.prefix) && r.re.MatchString(s)
}

// rewrite is a compiled RegexMatchAndSubstitute: every match of the pattern is replaced,
// with \N in the substitution naming capture groups (RE2's syntax).
type rewrite struct {
	re  *regexp.Regexp
	sub string // in Go's $N syntax
}

func compileRewrite(m *matcherv3.RegexMatchAndSubstitute, path string) (*rewrite, error) {
	if m.GetPattern() == nil {
		return nil, fmt.Errorf("%s.pattern: regex is missing", path)
	}
	re, err := regexp.Compile(m.GetPattern().GetRegex())
	if err != nil {
		return nil, fmt.Errorf("%s.pattern.regex = %q: invalid RE2: %v", path, m.GetPattern().GetRegex(), err)
	}
	sub, err := goSubstitution(m.GetSubstitution(), re.NumSubexp())
	if err != nil {
		return nil, fmt.Errorf("%s.substitution = %q: %v", path, m.GetSubstitution(), err)
	}
	return &rewrite{re: re, sub: sub}, nil
}

// goSubstitution converts RE2's "\1" references to Go's "${1}" and escapes '$'.
func goSubstitution(s string, groups int) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '$':
			b.WriteString("$$")
		case c == '\\' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			n := int(s[i+1] - '0')
			if n > groups {
				return "", fmt.Errorf(`\%d refers to a capture group the pattern does not have (%d groups)`, n, groups)
			}
			fmt.Fprintf(&b, "${%d}", n)
			i++
		case c == '\\' && i+1 < len(s) && s[i+1] == '\\':
			b.WriteByte('\\')
			i++
		case c == '\\':
			return "", fmt.Errorf(`'\' must be followed by a digit or '\'`)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func (r *rewrite) apply(s string) string {
	return r.re.ReplaceAllString(s, r.sub)
}

// stringKind is the kind of a StringMatcher.
type stringKind uint8

const (
	strExact stringKind = iota
	strPrefix
	strSuffix
	strContains
	strRegex
)

// stringMatcher is a compiled envoy.type.matcher.v3.StringMatcher.
type stringMatcher struct {
	kind       stringKind
	value      string // lower-cased when ignoreCase
	ignoreCase bool
	re         *regex
}

func compileStringMatcher(m *matcherv3.StringMatcher, path string) (stringMatcher, error) {
	sm := stringMatcher{ignoreCase: m.GetIgnoreCase()}
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		sm.kind, sm.value = strExact, p.Exact
	case *matcherv3.StringMatcher_Prefix:
		sm.kind, sm.value = strPrefix, p.Prefix
		if p.Prefix == "" {
			return sm, fmt.Errorf("%s.prefix = \"\": must not be empty", path)
		}
	case *matcherv3.StringMatcher_Suffix:
		sm.kind, sm.value = strSuffix, p.Suffix
		if p.Suffix == "" {
			return sm, fmt.Errorf("%s.suffix = \"\": must not be empty", path)
		}
	case *matcherv3.StringMatcher_Contains:
		sm.kind, sm.value = strContains, p.Contains
		if p.Contains == "" {
			return sm, fmt.Errorf("%s.contains = \"\": must not be empty", path)
		}
	case *matcherv3.StringMatcher_SafeRegex:
		re, err := compileRegex(p.SafeRegex, path+".safe_regex")
		if err != nil {
			return sm, err
		}
		sm.kind, sm.re, sm.ignoreCase = strRegex, re, false
	case *matcherv3.StringMatcher_Custom:
		return sm, fmt.Errorf("%s.custom: custom string matchers are not supported", path)
	default:
		return sm, fmt.Errorf("%s: one of exact, prefix, suffix, contains or safe_regex is required", path)
	}
	if sm.ignoreCase {
		sm.value = strings.ToLower(sm.value)
	}
	return sm, nil
}

func (m *stringMatcher) match(s string) bool {
	switch m.kind {
	case strExact:
		if m.ignoreCase {
			return len(s) == len(m.value) && hasPrefixFold(s, m.value)
		}
		return s == m.value
	case strPrefix:
		if m.ignoreCase {
			return hasPrefixFold(s, m.value)
		}
		return strings.HasPrefix(s, m.value)
	case strSuffix:
		if m.ignoreCase {
			return len(s) >= len(m.value) && hasPrefixFold(s[len(s)-len(m.value):], m.value)
		}
		return strings.HasSuffix(s, m.value)
	case strContains:
		if m.ignoreCase {
			for i := 0; i+len(m.value) <= len(s); i++ {
				if hasPrefixFold(s[i:], m.value) {
					return true
				}
			}
			return false
		}
		return strings.Contains(s, m.value)
	case strRegex:
		return m.re.match(s)
	}
	return false
}

// hasPrefixFold reports whether s starts with lower, ignoring ASCII case; lower is lower case.
func hasPrefixFold(s, lower string) bool {
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

// headerKind is how a HeaderMatcher compares.
type headerKind uint8

const (
	hdrPresent headerKind = iota
	hdrString
	hdrRange
	hdrExactLegacy // exact_match: an empty value matches anything
)

// headerMatcher is a compiled route.v3.HeaderMatcher.
type headerMatcher struct {
	key          string // canonical MIME key or lower-case pseudo-header
	kind         headerKind
	str          stringMatcher
	present      bool
	start, end   int64
	invert       bool
	missingEmpty bool
}

// headerKey normalises a header name for lookups in a Request.
func headerKey(name string) string {
	l := strings.ToLower(name)
	switch l {
	case ":authority", "host":
		return ":authority"
	case ":path", ":method", ":scheme":
		return l
	}
	return textproto.CanonicalMIMEHeaderKey(name)
}

func compileHeaderMatcher(h *routev3.HeaderMatcher, path string) (headerMatcher, error) {
	if h.GetName() == "" {
		return headerMatcher{}, fmt.Errorf("%s.name = \"\": must not be empty", path)
	}
	hm := headerMatcher{
		key:          headerKey(h.GetName()),
		invert:       h.GetInvertMatch(),
		missingEmpty: h.GetTreatMissingHeaderAsEmpty(),
	}
	var err error
	switch s := h.GetHeaderMatchSpecifier().(type) {
	case *routev3.HeaderMatcher_ExactMatch:
		hm.kind, hm.str = hdrExactLegacy, stringMatcher{kind: strExact, value: s.ExactMatch}
	case *routev3.HeaderMatcher_SafeRegexMatch:
		var re *regex
		re, err = compileRegex(s.SafeRegexMatch, path+".safe_regex_match")
		hm.kind, hm.str = hdrString, stringMatcher{kind: strRegex, re: re}
	case *routev3.HeaderMatcher_RangeMatch:
		hm.kind, hm.start, hm.end = hdrRange, s.RangeMatch.GetStart(), s.RangeMatch.GetEnd()
		if hm.start >= hm.end {
			err = fmt.Errorf("%s.range_match = [%d, %d): start must be < end", path, hm.start, hm.end)
		}
	case *routev3.HeaderMatcher_PresentMatch:
		hm.kind, hm.present = hdrPresent, s.PresentMatch
	case *routev3.HeaderMatcher_PrefixMatch:
		hm.kind, hm.str = hdrString, stringMatcher{kind: strPrefix, value: s.PrefixMatch}
	case *routev3.HeaderMatcher_SuffixMatch:
		hm.kind, hm.str = hdrString, stringMatcher{kind: strSuffix, value: s.SuffixMatch}
	case *routev3.HeaderMatcher_ContainsMatch:
		hm.kind, hm.str = hdrString, stringMatcher{kind: strContains, value: s.ContainsMatch}
	case *routev3.HeaderMatcher_StringMatch:
		hm.kind = hdrString
		hm.str, err = compileStringMatcher(s.StringMatch, path+".string_match")
	default: // no specifier: presence
		hm.kind, hm.present = hdrPresent, true
	}
	return hm, err
}

// match implements Envoy's HeaderUtility::matchHeaders for one matcher.
func (m *headerMatcher) match(r *Request) bool {
	v, ok := r.header(m.key)
	if !ok && !m.missingEmpty {
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
		matched = m.str.match(v)
	case hdrRange:
		n, err := strconv.ParseInt(v, 10, 64)
		matched = err == nil && n >= m.start && n < m.end
	}
	return matched != m.invert
}

// queryMatcher is a compiled route.v3.QueryParameterMatcher.
type queryMatcher struct {
	name    string
	present bool // present_match
	str     *stringMatcher
}

func compileQueryMatcher(q *routev3.QueryParameterMatcher, path string) (queryMatcher, error) {
	if q.GetName() == "" {
		return queryMatcher{}, fmt.Errorf("%s.name = \"\": must not be empty", path)
	}
	qm := queryMatcher{name: q.GetName()}
	switch s := q.GetQueryParameterMatchSpecifier().(type) {
	case *routev3.QueryParameterMatcher_StringMatch:
		sm, err := compileStringMatcher(s.StringMatch, path+".string_match")
		if err != nil {
			return qm, err
		}
		qm.str = &sm
	case *routev3.QueryParameterMatcher_PresentMatch:
		// Envoy treats present_match false like true: the parameter must be present.
		qm.present = true
	default:
		return qm, fmt.Errorf("%s: one of string_match or present_match is required", path)
	}
	return qm, nil
}

func (m *queryMatcher) match(r *Request) bool {
	v, ok := queryParam(r.Path, m.name)
	if !ok {
		return false
	}
	if m.str == nil {
		return true
	}
	return m.str.match(v)
}
