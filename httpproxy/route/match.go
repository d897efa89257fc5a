package route

import (
	"fmt"

	"github.com/legateproxy/legate/internal/headermatch"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// regex is a compiled safe_regex (a whole-value RE2 match), shared with the access log's
// header_filter.
type regex = headermatch.Regex

func compileRegex(m *matcherv3.RegexMatcher, path string) (*regex, error) {
	return headermatch.CompileRegex(m, path)
}

// rewrite is a compiled RegexMatchAndSubstitute (shared with header_to_metadata).
type rewrite = headermatch.Rewrite

func compileRewrite(m *matcherv3.RegexMatchAndSubstitute, path string) (*rewrite, error) {
	return headermatch.CompileRewrite(m, path)
}

// stringMatcher is a compiled envoy.type.matcher.v3.StringMatcher.
type stringMatcher = headermatch.String

func compileStringMatcher(m *matcherv3.StringMatcher, path string) (stringMatcher, error) {
	return headermatch.CompileString(m, path)
}

// headerMatcher is a compiled route.v3.HeaderMatcher.
type headerMatcher struct{ h headermatch.Header }

// headerKey normalises a header name for lookups in a Request.
func headerKey(name string) string { return headermatch.Key(name) }

// hasPrefixFold reports whether s starts with lower, ignoring ASCII case.
func hasPrefixFold(s, lower string) bool { return headermatch.HasPrefixFold(s, lower) }

func compileHeaderMatcher(h *routev3.HeaderMatcher, path string) (headerMatcher, error) {
	hm, err := headermatch.CompileHeader(h, path)
	return headerMatcher{hm}, err
}

// match implements Envoy's HeaderUtility::matchHeaders for one matcher.
func (m *headerMatcher) match(r *Request) bool {
	v, ok := r.header(m.h.Key())
	return m.h.Match(v, ok)
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
	return m.str.Match(v)
}
