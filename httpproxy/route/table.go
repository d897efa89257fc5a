package route

import "strings"

// findVirtualHost implements Envoy's domain precedence: exact, then the longest suffix
// wildcard ("*.example.com"), then the longest prefix wildcard ("example.*"), then "*".
// A wildcard must match at least one character. Host matching ignores case; the port is
// part of the host unless ignore_port_in_host_matching (or Options.StripAnyHostPort) is set.
func (t *Table) findVirtualHost(authority string) *VirtualHost {
	if len(t.exact) == 0 && len(t.suffixes) == 0 && len(t.prefixes) == 0 {
		return t.catchAll
	}
	host := authority
	if t.ignorePort {
		if i := portStart(host); i >= 0 {
			host = host[:i]
		}
	}
	host = lowerASCII(host)
	if vh, ok := t.exact[host]; ok {
		return vh
	}
	for _, l := range t.suffixes {
		if l.n >= len(host) {
			continue
		}
		if vh, ok := l.hosts[host[len(host)-l.n:]]; ok {
			return vh
		}
	}
	for _, l := range t.prefixes {
		if l.n >= len(host) {
			continue
		}
		if vh, ok := l.hosts[host[:l.n]]; ok {
			return vh
		}
	}
	return t.catchAll
}

// lowerASCII lower-cases ASCII letters, allocating only when there is an upper-case letter.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}

// segmentKey is the part of a path that selects candidate routes: up to and including the
// second '/', or the whole path when it has only one.
func segmentKey(p string) string {
	if len(p) < 2 {
		return p
	}
	if j := strings.IndexByte(p[1:], '/'); j >= 0 {
		return p[:j+2]
	}
	return p
}

// routeKey is the segment key every path matched by r must have, or "" when r may match
// paths of several segments (short or case-insensitive prefixes, regexes without a literal
// first segment, CONNECT).
func routeKey(m *routeMatch) string {
	if !m.caseSensitive && m.kind != pathRegex {
		return ""
	}
	var lit string
	switch m.kind {
	case pathPrefix, pathSeparatedPrefix:
		lit = m.value
	case pathExact:
		if strings.HasPrefix(m.value, "/") {
			return segmentKey(m.value) // a path equal to the value has this key
		}
		return ""
	case pathRegex:
		lit = m.re.Prefix()
	default:
		return ""
	}
	if len(lit) < 2 || lit[0] != '/' {
		return ""
	}
	if j := strings.IndexByte(lit[1:], '/'); j >= 0 {
		return lit[:j+2]
	}
	return ""
}

// indexRoutes builds the per-segment candidate lists: for each key, the routes with that key
// and the routes without one, in configuration order, so that first-match semantics hold.
func (vh *VirtualHost) indexRoutes() {
	keys := make([]string, len(vh.Routes))
	distinct := map[string]bool{}
	for i, r := range vh.Routes {
		keys[i] = routeKey(&r.match)
		if keys[i] == "" {
			vh.generic = append(vh.generic, r)
		} else {
			distinct[keys[i]] = true
		}
	}
	if len(distinct) == 0 {
		return
	}
	vh.bySegment = make(map[string][]*Route, len(distinct))
	for k := range distinct {
		var list []*Route
		for i, r := range vh.Routes {
			if keys[i] == k || keys[i] == "" {
				list = append(list, r)
			}
		}
		vh.bySegment[k] = list
	}
}

// candidates returns the routes that may match path p (without query), in order.
func (vh *VirtualHost) candidates(p string) []*Route {
	if vh.bySegment != nil {
		if list, ok := vh.bySegment[segmentKey(p)]; ok {
			return list
		}
	}
	return vh.generic
}
