package headermatch

import (
	"fmt"
	"regexp"
	"strings"

	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// Rewrite is a compiled RegexMatchAndSubstitute: every match of the pattern is replaced,
// with \N in the substitution naming capture groups (RE2's syntax). Immutable.
type Rewrite struct {
	re  *regexp.Regexp
	sub string // in Go's $N syntax
}

// CompileRewrite compiles a RegexMatchAndSubstitute; path names the field in errors.
func CompileRewrite(m *matcherv3.RegexMatchAndSubstitute, path string) (*Rewrite, error) {
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
	return &Rewrite{re: re, sub: sub}, nil
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

// Apply returns s with every match of the pattern substituted.
func (r *Rewrite) Apply(s string) string {
	return r.re.ReplaceAllString(s, r.sub)
}
