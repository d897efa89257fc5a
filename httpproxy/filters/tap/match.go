package tap

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"

	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/matcher/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/legateproxy/legate/httpproxy/route"
)

// nodeKind is the rule of one match predicate node.
type nodeKind uint8

const (
	nodeAny nodeKind = iota
	nodeAnd
	nodeOr
	nodeNot
	nodeRequestHeaders
	nodeRequestTrailers
	nodeResponseHeaders
	nodeResponseTrailers
	nodeRequestBody
	nodeResponseBody
)

// node is one compiled MatchPredicate. Nodes live in a Matcher's slice in preorder; children
// refer to each other by index, so a stream's match state is one status per node.
type node struct {
	kind     nodeKind
	children []int        // and, or: the rules; not: the one negated rule
	headers  *route.Table // header and trailer matches: a one-route table matching all headers
	body     *bodyRule    // generic body matches
	bodyIdx  int          // index of the body's state in a stream's body states
}

// bodyRule is a compiled HttpGenericBodyMatch: every pattern must occur within the first
// limit bytes of the body (0: anywhere).
type bodyRule struct {
	patterns [][]byte
	limit    uint64
	longest  int
}

// Matcher is a compiled envoy.config.common.matcher.v3.MatchPredicate (the tap's match, or
// the deprecated match_config): a tree evaluated as the stream's parts arrive, as Envoy's
// streaming matcher does. A node's status says whether it matches now and whether it still
// might change; a header matcher decides when its headers arrive, a body matcher when every
// pattern is found or its bytes_limit is reached, and and/or/not combine their rules'
// statuses. Immutable after compileMatcher; safe for concurrent use.
type Matcher struct {
	nodes  []node
	bodies int // body nodes, for sizing a stream's state
}

// status is one node's match status in one stream.
type status struct {
	matches     bool
	mightChange bool
}

// bodyState is a body node's progress in one stream.
type bodyState struct {
	found     []bool
	remaining int
	processed uint64
	tail      []byte // the last bytes seen, longest pattern - 1 at most, for patterns across chunks
}

// matchState is a stream's evaluation of a Matcher. It belongs to the stream.
type matchState struct {
	m        *Matcher
	statuses []status
	bodies   []bodyState
	scratch  []byte
}

// compileMatcher builds a Matcher; path names the predicate in errors.
func compileMatcher(p *matcherv3.MatchPredicate, path string) (*Matcher, error) {
	m := &Matcher{}
	if _, err := m.add(p, path, 0); err != nil {
		return nil, err
	}
	return m, nil
}

// maxDepth bounds predicate nesting so that a hostile /tap body cannot exhaust the stack.
const maxDepth = 64

func (m *Matcher) add(p *matcherv3.MatchPredicate, path string, depth int) (int, error) {
	if depth > maxDepth {
		return 0, fmt.Errorf("%s: predicates nested deeper than %d", path, maxDepth)
	}
	idx := len(m.nodes)
	m.nodes = append(m.nodes, node{})
	var n node
	switch r := p.GetRule().(type) {
	case *matcherv3.MatchPredicate_AnyMatch:
		if !r.AnyMatch {
			return 0, fmt.Errorf("%s.any_match = false; must be true", path)
		}
		n.kind = nodeAny
	case *matcherv3.MatchPredicate_AndMatch, *matcherv3.MatchPredicate_OrMatch:
		name, rules := "and_match", p.GetAndMatch().GetRules()
		n.kind = nodeAnd
		if or, ok := r.(*matcherv3.MatchPredicate_OrMatch); ok {
			name, rules, n.kind = "or_match", or.OrMatch.GetRules(), nodeOr
		}
		if len(rules) < 2 {
			return 0, fmt.Errorf("%s.%s.rules: %d rules; must have at least 2", path, name, len(rules))
		}
		for i, c := range rules {
			ci, err := m.add(c, fmt.Sprintf("%s.%s.rules[%d]", path, name, i), depth+1)
			if err != nil {
				return 0, err
			}
			n.children = append(n.children, ci)
		}
	case *matcherv3.MatchPredicate_NotMatch:
		if r.NotMatch == nil {
			return 0, fmt.Errorf("%s.not_match: unset; a predicate is required", path)
		}
		ci, err := m.add(r.NotMatch, path+".not_match", depth+1)
		if err != nil {
			return 0, err
		}
		n.kind, n.children = nodeNot, []int{ci}
	case *matcherv3.MatchPredicate_HttpRequestHeadersMatch:
		return idx, m.headerNode(idx, nodeRequestHeaders, r.HttpRequestHeadersMatch, path+".http_request_headers_match")
	case *matcherv3.MatchPredicate_HttpRequestTrailersMatch:
		return idx, m.headerNode(idx, nodeRequestTrailers, r.HttpRequestTrailersMatch, path+".http_request_trailers_match")
	case *matcherv3.MatchPredicate_HttpResponseHeadersMatch:
		return idx, m.headerNode(idx, nodeResponseHeaders, r.HttpResponseHeadersMatch, path+".http_response_headers_match")
	case *matcherv3.MatchPredicate_HttpResponseTrailersMatch:
		return idx, m.headerNode(idx, nodeResponseTrailers, r.HttpResponseTrailersMatch, path+".http_response_trailers_match")
	case *matcherv3.MatchPredicate_HttpRequestGenericBodyMatch:
		return idx, m.bodyNode(idx, nodeRequestBody, r.HttpRequestGenericBodyMatch, path+".http_request_generic_body_match")
	case *matcherv3.MatchPredicate_HttpResponseGenericBodyMatch:
		return idx, m.bodyNode(idx, nodeResponseBody, r.HttpResponseGenericBodyMatch, path+".http_response_generic_body_match")
	default:
		return 0, fmt.Errorf("%s: no rule; one of any_match, and_match, or_match, not_match or an http_* match is required", path)
	}
	m.nodes[idx] = n
	return idx, nil
}

// headerNode compiles a header matcher list into a one-route table, the way the health check
// filter does, so tap matches headers exactly as routes do (Envoy's HeaderUtility::matchHeaders).
func (m *Matcher) headerNode(idx int, kind nodeKind, h *matcherv3.HttpHeadersMatch, path string) error {
	rc := &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{{
		Name: "tap", Domains: []string{"*"},
		Routes: []*routev3.Route{{
			Match: &routev3.RouteMatch{
				PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
				Headers:       h.GetHeaders(),
			},
			Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 200}},
		}},
	}}}
	table, err := route.Compile(rc, route.Options{})
	if err != nil {
		return fmt.Errorf("%s.headers: %w", path, err)
	}
	m.nodes[idx] = node{kind: kind, headers: table}
	return nil
}

func (m *Matcher) bodyNode(idx int, kind nodeKind, b *matcherv3.HttpGenericBodyMatch, path string) error {
	rule := &bodyRule{limit: uint64(b.GetBytesLimit())}
	if len(b.GetPatterns()) == 0 {
		return fmt.Errorf("%s.patterns: empty; at least one pattern is required", path)
	}
	for i, p := range b.GetPatterns() {
		var pat []byte
		switch r := p.GetRule().(type) {
		case *matcherv3.HttpGenericBodyMatch_GenericTextMatch_StringMatch:
			pat = []byte(r.StringMatch)
		case *matcherv3.HttpGenericBodyMatch_GenericTextMatch_BinaryMatch:
			pat = r.BinaryMatch
		}
		if len(pat) == 0 {
			return fmt.Errorf("%s.patterns[%d]: empty; a non-empty string_match or binary_match is required", path, i)
		}
		rule.patterns = append(rule.patterns, pat)
		rule.longest = max(rule.longest, len(pat))
	}
	m.nodes[idx] = node{kind: kind, body: rule, bodyIdx: m.bodies}
	m.bodies++
	return nil
}

// newState starts a stream: every node might still change, then Envoy's onNewStream sets
// any_match (and the logic above it).
func (m *Matcher) newState() *matchState {
	s := &matchState{m: m, statuses: make([]status, len(m.nodes))}
	for i := range s.statuses {
		s.statuses[i].mightChange = true
	}
	if m.bodies > 0 {
		s.bodies = make([]bodyState, m.bodies)
		for i := range m.nodes {
			if b := m.nodes[i].body; b != nil {
				s.bodies[m.nodes[i].bodyIdx] = bodyState{found: make([]bool, len(b.patterns)), remaining: len(b.patterns)}
			}
		}
	}
	s.update(0, event{kind: evNewStream})
	return s
}

// eventKind is a part of the stream arriving.
type eventKind uint8

const (
	evNewStream eventKind = iota
	evRequestHeaders
	evRequestTrailers
	evResponseHeaders
	evResponseTrailers
	evRequestBody
	evResponseBody
)

type event struct {
	kind eventKind
	req  *route.Request // header and trailer events: what the header matchers read
	data []byte         // body events
}

// result is the root's status.
func (s *matchState) result() status { return s.statuses[0] }

// onRequestHeaders, … feed one part of the stream to the tree.
func (s *matchState) onRequestHeaders(r *route.Request) {
	s.update(0, event{kind: evRequestHeaders, req: r})
}

func (s *matchState) onHeaders(kind eventKind, h http.Header, status int) {
	s.update(0, event{kind: kind, req: headerRequest(h, status)})
}

func (s *matchState) onBody(kind eventKind, p []byte) {
	s.update(0, event{kind: kind, data: p})
}

// headerRequest presents response headers or trailers to a route table: a request for "/"
// whose headers are h, with :status added when status is set (response headers).
func headerRequest(h http.Header, status int) *route.Request {
	if status != 0 {
		c := make(http.Header, len(h)+1)
		for k, v := range h {
			c[k] = v
		}
		c[":status"] = []string{strconv.Itoa(status)}
		h = c
	}
	return &route.Request{Path: "/", Header: h}
}

// leafEvent is the event each leaf kind listens to.
var leafEvent = [...]eventKind{
	nodeRequestHeaders:   evRequestHeaders,
	nodeRequestTrailers:  evRequestTrailers,
	nodeResponseHeaders:  evResponseHeaders,
	nodeResponseTrailers: evResponseTrailers,
	nodeRequestBody:      evRequestBody,
	nodeResponseBody:     evResponseBody,
}

func (s *matchState) update(i int, e event) {
	st := &s.statuses[i]
	if !st.mightChange {
		return
	}
	n := &s.m.nodes[i]
	switch n.kind {
	case nodeAny:
		if e.kind == evNewStream {
			*st = status{matches: true}
		}
	case nodeAnd, nodeOr:
		all, anyMatch, might := true, false, false
		for _, c := range n.children {
			s.update(c, e)
			cs := s.statuses[c]
			all = all && cs.matches
			anyMatch = anyMatch || cs.matches
			might = might || cs.mightChange
		}
		st.matches = all
		if n.kind == nodeOr {
			st.matches = anyMatch
		}
		st.mightChange = might
	case nodeNot:
		c := n.children[0]
		s.update(c, e)
		*st = status{matches: !s.statuses[c].matches, mightChange: s.statuses[c].mightChange}
	default:
		if e.kind != leafEvent[n.kind] {
			return
		}
		if n.body != nil {
			s.bodyChunk(n, st, e.data)
			return
		}
		*st = status{matches: n.headers.Route(e.req) != nil}
	}
}

// bodyChunk searches one body chunk for the patterns not found yet, including patterns that
// start in earlier chunks, within the node's bytes_limit.
func (s *matchState) bodyChunk(n *node, st *status, data []byte) {
	b, bs := n.body, &s.bodies[n.bodyIdx]
	if b.limit != 0 {
		data = data[:min(uint64(len(data)), b.limit-bs.processed)]
	}
	// Patterns that cross from earlier chunks into this one, or lie in its first bytes: search
	// the kept tail joined with the chunk's first longest-1 bytes.
	s.scratch = append(append(s.scratch[:0], bs.tail...), data[:min(len(data), b.longest-1)]...)
	for j, p := range b.patterns {
		if bs.found[j] {
			continue
		}
		if bytes.Contains(s.scratch, p) || bytes.Contains(data, p) {
			bs.found[j] = true
			bs.remaining--
		}
	}
	if bs.remaining == 0 {
		*st = status{matches: true}
		return
	}
	bs.processed += uint64(len(data))
	if b.limit != 0 && bs.processed >= b.limit {
		*st = status{}
		return
	}
	keep := 0
	for j, p := range b.patterns {
		if !bs.found[j] {
			keep = max(keep, len(p)-1)
		}
	}
	if len(data) >= keep {
		bs.tail = append(bs.tail[:0], data[len(data)-keep:]...)
	} else {
		t := append(bs.tail, data...)
		bs.tail = append(bs.tail[:0], t[max(len(t)-keep, 0):]...)
	}
	s.scratch = s.scratch[:0]
}
