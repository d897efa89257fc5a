package route

import (
	"strings"
)

// pathKind is the RouteMatch path specifier.
type pathKind uint8

const (
	pathPrefix pathKind = iota
	pathExact
	pathRegex
	pathSeparatedPrefix
	pathConnect
)

// runtimeFraction is a compiled RouteMatch.runtime_fraction.
type runtimeFraction struct {
	key                    string
	numerator, denominator uint64
}

// routeMatch is a compiled RouteMatch.
type routeMatch struct {
	kind          pathKind
	value         string // prefix or path; lower-cased when !caseSensitive
	caseSensitive bool
	re            *regex
	grpc          bool
	headers       []headerMatcher
	query         []queryMatcher
	fraction      *runtimeFraction
	featureOn     func(key string, numerator, denominator, random uint64) bool
}

// matches reports whether r matches; p is r.Path without its query and fragment.
func (m *routeMatch) matches(r *Request, p string) bool {
	if !m.matchPath(r, p) {
		return false
	}
	if m.fraction != nil && !m.fractionOn(r.random()) {
		return false
	}
	if m.grpc && !isGRPC(r) {
		return false
	}
	for i := range m.headers {
		if !m.headers[i].match(r) {
			return false
		}
	}
	for i := range m.query {
		if !m.query[i].match(r) {
			return false
		}
	}
	return true
}

func (m *routeMatch) fractionOn(random uint64) bool {
	f := m.fraction
	if m.featureOn != nil {
		return m.featureOn(f.key, f.numerator, f.denominator, random)
	}
	return random%f.denominator < f.numerator
}

func isGRPC(r *Request) bool {
	vs := r.Headers()["Content-Type"]
	return len(vs) > 0 && strings.HasPrefix(vs[0], "application/grpc")
}

func (m *routeMatch) matchPath(r *Request, p string) bool {
	switch m.kind {
	case pathConnect:
		return r.Method == "CONNECT"
	case pathPrefix:
		if m.caseSensitive {
			return strings.HasPrefix(p, m.value)
		}
		return hasPrefixFold(p, m.value)
	case pathExact:
		if m.caseSensitive {
			return p == m.value
		}
		return len(p) == len(m.value) && hasPrefixFold(p, m.value)
	case pathRegex:
		return m.re.Match(p)
	case pathSeparatedPrefix:
		var ok bool
		if m.caseSensitive {
			ok = strings.HasPrefix(p, m.value)
		} else {
			ok = hasPrefixFold(p, m.value)
		}
		return ok && (len(p) == len(m.value) || p[len(m.value)] == '/')
	}
	return false
}

// rewriteLen is how much of the path prefix_rewrite replaces: the matched prefix, or the whole
// path for exact and regex matches.
func (m *routeMatch) rewriteLen(p string) int {
	switch m.kind {
	case pathPrefix, pathSeparatedPrefix:
		return len(m.value)
	}
	return len(p)
}
