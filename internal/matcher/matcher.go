package matcher

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	xdsmatcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/internal/headermatch"
	"github.com/legateproxy/legate/internal/registry"
)

// Input reads the value a matcher compares from the data D being matched; ok is false when
// the data has no such value (no server name on a plain-text connection), which matches
// no value_match and no map key.
type Input[D any] func(d *D) (value string, ok bool)

// InputFactory builds an Input from its decoded typed_config.
type InputFactory[D any] func(cfg proto.Message) (Input[D], error)

// IPRangeMatcherName is the custom matcher of CIDR ranges (xds.type.matcher.v3.IPMatcher),
// which this package implements for every domain.
const IPRangeMatcherName = "envoy.matching.custom_matchers.ip_range_matcher"

// Domain is what one consumer matches: the registry kind of the inputs its data D offers,
// and how its actions compile into A.
type Domain[D, A any] struct {
	// Registry holds the input extensions; Inputs is the kind they are registered under.
	Registry *registry.Registry
	Inputs   registry.Kind[InputFactory[D]]
	// Action compiles an on_match action; path names it in errors. An action of a type the
	// consumer does not take must be an error.
	Action func(path string, a *xdscorev3.TypedExtensionConfig) (A, error)
}

// Matcher is a compiled xds.type.matcher.v3.Matcher. Immutable, safe for concurrent use.
type Matcher[D, A any] struct {
	list      []fieldMatcher[D, A] // matcher_list, in order
	tree      *tree[D, A]          // matcher_tree; nil for a list
	onNoMatch *onMatch[D, A]       // nil when unset
}

// onMatch is an action or a nested matcher.
type onMatch[D, A any] struct {
	action A
	nested *Matcher[D, A] // nil for an action
}

type fieldMatcher[D, A any] struct {
	pred predicate[D]
	on   onMatch[D, A]
}

// predicate is a compiled Predicate: exactly one of single, or, and, not.
type predicate[D any] struct {
	input Input[D]
	value func(string) bool // value_match or the IP custom matcher
	or    []predicate[D]
	and   []predicate[D]
	not   *predicate[D]
}

type treeKind uint8

const (
	exactMap treeKind = iota
	prefixMap
	ipRanges
)

type tree[D, A any] struct {
	input    Input[D]
	kind     treeKind
	exact    map[string]*onMatch[D, A]
	prefixes []prefixEntry[D, A] // longest first
	ranges   []ipRange[D, A]     // longest prefix first, then declaration order
}

type prefixEntry[D, A any] struct {
	prefix string
	on     *onMatch[D, A]
}

type ipRange[D, A any] struct {
	prefix    netip.Prefix
	exclusive bool
	on        *onMatch[D, A]
}

// Compile checks and compiles m; path names it in errors. Unknown inputs, actions and custom
// matchers, and keep_matching, are refused with their field path.
func Compile[D, A any](m *xdsmatcherv3.Matcher, path string, d Domain[D, A]) (*Matcher[D, A], error) {
	if m == nil {
		return nil, fmt.Errorf("%s: missing", path)
	}
	out := &Matcher[D, A]{}
	var err error
	switch {
	case m.GetMatcherList() != nil:
		out.list, err = compileList(m.GetMatcherList(), path+".matcher_list", d)
	case m.GetMatcherTree() != nil:
		out.tree, err = compileTree(m.GetMatcherTree(), path+".matcher_tree", d)
	case m.GetOnNoMatch() == nil:
		return nil, fmt.Errorf("%s: one of matcher_list, matcher_tree or on_no_match is required", path)
	}
	if err != nil {
		return nil, err
	}
	if m.GetOnNoMatch() != nil {
		if out.onNoMatch, err = compileOnMatch(m.GetOnNoMatch(), path+".on_no_match", d); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func compileOnMatch[D, A any](o *xdsmatcherv3.Matcher_OnMatch, path string, d Domain[D, A]) (*onMatch[D, A], error) {
	if o.GetKeepMatching() {
		return nil, fmt.Errorf("%s.keep_matching: set; not implemented by Legate", path)
	}
	switch {
	case o.GetMatcher() != nil:
		n, err := Compile(o.GetMatcher(), path+".matcher", d)
		if err != nil {
			return nil, err
		}
		return &onMatch[D, A]{nested: n}, nil
	case o.GetAction() != nil:
		a, err := d.Action(path+".action", o.GetAction())
		if err != nil {
			return nil, err
		}
		return &onMatch[D, A]{action: a}, nil
	}
	return nil, fmt.Errorf("%s: one of matcher or action is required", path)
}

func compileList[D, A any](l *xdsmatcherv3.Matcher_MatcherList, path string, d Domain[D, A]) ([]fieldMatcher[D, A], error) {
	if len(l.GetMatchers()) == 0 {
		return nil, fmt.Errorf("%s.matchers: empty; a matcher_list needs at least one", path)
	}
	var out []fieldMatcher[D, A]
	for i, fm := range l.GetMatchers() {
		at := fmt.Sprintf("%s.matchers[%d]", path, i)
		p, err := compilePredicate(fm.GetPredicate(), at+".predicate", d)
		if err != nil {
			return nil, err
		}
		if fm.GetOnMatch() == nil {
			return nil, fmt.Errorf("%s.on_match: missing", at)
		}
		on, err := compileOnMatch(fm.GetOnMatch(), at+".on_match", d)
		if err != nil {
			return nil, err
		}
		out = append(out, fieldMatcher[D, A]{pred: p, on: *on})
	}
	return out, nil
}

func compilePredicate[D, A any](p *xdsmatcherv3.Matcher_MatcherList_Predicate, path string, d Domain[D, A]) (predicate[D], error) {
	var out predicate[D]
	switch {
	case p.GetSinglePredicate() != nil:
		sp := p.GetSinglePredicate()
		at := path + ".single_predicate"
		in, err := compileInput(sp.GetInput(), at+".input", d)
		if err != nil {
			return out, err
		}
		out.input = in
		switch {
		case sp.GetValueMatch() != nil:
			sm, err := compileString(sp.GetValueMatch(), at+".value_match")
			if err != nil {
				return out, err
			}
			out.value = sm.Match
		case sp.GetCustomMatch() != nil:
			return out, fmt.Errorf("%s.custom_match: name = %q: not implemented by Legate (custom matchers serve matcher_tree only)", at, sp.GetCustomMatch().GetName())
		default:
			return out, fmt.Errorf("%s: one of value_match or custom_match is required", at)
		}
	case p.GetOrMatcher() != nil:
		ps, err := compilePredicates(p.GetOrMatcher(), path+".or_matcher", d)
		out.or = ps
		return out, err
	case p.GetAndMatcher() != nil:
		ps, err := compilePredicates(p.GetAndMatcher(), path+".and_matcher", d)
		out.and = ps
		return out, err
	case p.GetNotMatcher() != nil:
		n, err := compilePredicate(p.GetNotMatcher(), path+".not_matcher", d)
		out.not = &n
		return out, err
	default:
		return out, fmt.Errorf("%s: one of single_predicate, or_matcher, and_matcher or not_matcher is required", path)
	}
	return out, nil
}

func compilePredicates[D, A any](l *xdsmatcherv3.Matcher_MatcherList_Predicate_PredicateList, path string, d Domain[D, A]) ([]predicate[D], error) {
	if len(l.GetPredicate()) < 2 {
		return nil, fmt.Errorf("%s.predicate: %d entries; must have at least 2", path, len(l.GetPredicate()))
	}
	var out []predicate[D]
	for i, p := range l.GetPredicate() {
		c, err := compilePredicate(p, fmt.Sprintf("%s.predicate[%d]", path, i), d)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// compileInput finds an input extension by its typed_config's type, as Envoy does.
func compileInput[D, A any](in *xdscorev3.TypedExtensionConfig, path string, d Domain[D, A]) (Input[D], error) {
	if in == nil || in.GetTypedConfig() == nil {
		return nil, fmt.Errorf("%s.typed_config: missing; an input needs its type", path)
	}
	url := in.GetTypedConfig().GetTypeUrl()
	f, e, ok := registry.Lookup(d.Registry, d.Inputs, "", url)
	if !ok {
		return nil, fmt.Errorf("%s.typed_config: type %q (name %q): not implemented by Legate as a %s", path, url, in.GetName(), d.Inputs.Category)
	}
	cfg, err := e.Decode(path+".typed_config", in.GetTypedConfig())
	if err != nil {
		return nil, err
	}
	input, err := f(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return input, nil
}

func compileTree[D, A any](t *xdsmatcherv3.Matcher_MatcherTree, path string, d Domain[D, A]) (*tree[D, A], error) {
	in, err := compileInput(t.GetInput(), path+".input", d)
	if err != nil {
		return nil, err
	}
	out := &tree[D, A]{input: in}
	switch {
	case t.GetExactMatchMap() != nil:
		out.kind, out.exact = exactMap, map[string]*onMatch[D, A]{}
		for _, k := range slices.Sorted(maps.Keys(t.GetExactMatchMap().GetMap())) {
			on, err := compileOnMatch(t.GetExactMatchMap().GetMap()[k], fmt.Sprintf("%s.exact_match_map.map[%q]", path, k), d)
			if err != nil {
				return nil, err
			}
			out.exact[k] = on
		}
	case t.GetPrefixMatchMap() != nil:
		out.kind = prefixMap
		for _, k := range slices.Sorted(maps.Keys(t.GetPrefixMatchMap().GetMap())) {
			on, err := compileOnMatch(t.GetPrefixMatchMap().GetMap()[k], fmt.Sprintf("%s.prefix_match_map.map[%q]", path, k), d)
			if err != nil {
				return nil, err
			}
			out.prefixes = append(out.prefixes, prefixEntry[D, A]{prefix: k, on: on})
		}
		sort.SliceStable(out.prefixes, func(i, j int) bool { return len(out.prefixes[i].prefix) > len(out.prefixes[j].prefix) })
	case t.GetCustomMatch() != nil:
		out.kind = ipRanges
		if out.ranges, err = compileIPMatcher(t.GetCustomMatch(), path+".custom_match", d); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%s: one of exact_match_map, prefix_match_map or custom_match is required", path)
	}
	return out, nil
}

// compileIPMatcher compiles the IP range custom matcher: its ranges ordered longest prefix
// first, then by declaration.
func compileIPMatcher[D, A any](c *xdscorev3.TypedExtensionConfig, path string, d Domain[D, A]) ([]ipRange[D, A], error) {
	var ipm xdsmatcherv3.IPMatcher
	if c.GetTypedConfig() == nil || !c.GetTypedConfig().MessageIs(&ipm) {
		return nil, fmt.Errorf("%s.typed_config: type %q (name %q): not implemented by Legate; only %s (xds.type.matcher.v3.IPMatcher) is", path, c.GetTypedConfig().GetTypeUrl(), c.GetName(), IPRangeMatcherName)
	}
	if err := c.GetTypedConfig().UnmarshalTo(&ipm); err != nil {
		return nil, fmt.Errorf("%s.typed_config: %w", path, err)
	}
	var out []ipRange[D, A]
	for i, rm := range ipm.GetRangeMatchers() {
		at := fmt.Sprintf("%s.typed_config.range_matchers[%d]", path, i)
		if rm.GetOnMatch() == nil {
			return nil, fmt.Errorf("%s.on_match: missing", at)
		}
		on, err := compileOnMatch(rm.GetOnMatch(), at+".on_match", d)
		if err != nil {
			return nil, err
		}
		for j, r := range rm.GetRanges() {
			addr, err := netip.ParseAddr(r.GetAddressPrefix())
			if err != nil {
				return nil, fmt.Errorf("%s.ranges[%d].address_prefix = %q: not an IP address", at, j, r.GetAddressPrefix())
			}
			bits := int(r.GetPrefixLen().GetValue())
			if bits > addr.BitLen() {
				return nil, fmt.Errorf("%s.ranges[%d].prefix_len = %d: more than the %d bits of %s", at, j, bits, addr.BitLen(), addr)
			}
			out = append(out, ipRange[D, A]{prefix: netip.PrefixFrom(addr.Unmap(), bits).Masked(), exclusive: rm.GetExclusive(), on: on})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].prefix.Bits() > out[j].prefix.Bits() })
	return out, nil
}

// compileString compiles an xds StringMatcher through the envoy one, whose fields it mirrors.
func compileString(m *xdsmatcherv3.StringMatcher, path string) (headermatch.String, error) {
	e := &matcherv3.StringMatcher{IgnoreCase: m.GetIgnoreCase()}
	switch p := m.GetMatchPattern().(type) {
	case *xdsmatcherv3.StringMatcher_Exact:
		e.MatchPattern = &matcherv3.StringMatcher_Exact{Exact: p.Exact}
	case *xdsmatcherv3.StringMatcher_Prefix:
		e.MatchPattern = &matcherv3.StringMatcher_Prefix{Prefix: p.Prefix}
	case *xdsmatcherv3.StringMatcher_Suffix:
		e.MatchPattern = &matcherv3.StringMatcher_Suffix{Suffix: p.Suffix}
	case *xdsmatcherv3.StringMatcher_Contains:
		e.MatchPattern = &matcherv3.StringMatcher_Contains{Contains: p.Contains}
	case *xdsmatcherv3.StringMatcher_SafeRegex:
		e.MatchPattern = &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: p.SafeRegex.GetRegex()}}
	case *xdsmatcherv3.StringMatcher_Custom:
		return headermatch.String{}, fmt.Errorf("%s.custom: not implemented by Legate", path)
	}
	return headermatch.CompileString(e, path)
}

// Match evaluates the matcher on d: the action of the first match, as Envoy evaluates it
// (a list's matchers in order, a map's entry for the input's value, a prefix map's longest
// prefixes first, each falling through to the next candidate when a nested matcher does not
// match, then on_no_match). ok is false when nothing matched.
func (m *Matcher[D, A]) Match(d *D) (a A, ok bool) {
	if m.list != nil {
		for i := range m.list {
			if m.list[i].pred.eval(d) {
				if a, ok = m.list[i].on.run(d); ok {
					return a, true
				}
			}
		}
	} else if m.tree != nil {
		if a, ok = m.tree.match(d); ok {
			return a, true
		}
	}
	if m.onNoMatch != nil {
		return m.onNoMatch.run(d)
	}
	return a, false
}

func (o *onMatch[D, A]) run(d *D) (A, bool) {
	if o.nested != nil {
		return o.nested.Match(d)
	}
	return o.action, true
}

func (p *predicate[D]) eval(d *D) bool {
	switch {
	case p.input != nil:
		v, ok := p.input(d)
		return ok && p.value(v)
	case p.or != nil:
		for i := range p.or {
			if p.or[i].eval(d) {
				return true
			}
		}
		return false
	case p.and != nil:
		for i := range p.and {
			if !p.and[i].eval(d) {
				return false
			}
		}
		return true
	case p.not != nil:
		return !p.not.eval(d)
	}
	return false
}

func (t *tree[D, A]) match(d *D) (a A, ok bool) {
	v, has := t.input(d)
	if !has {
		return a, false
	}
	switch t.kind {
	case exactMap:
		if on := t.exact[v]; on != nil {
			return on.run(d)
		}
	case prefixMap:
		for i := range t.prefixes {
			if strings.HasPrefix(v, t.prefixes[i].prefix) {
				if a, ok = t.prefixes[i].on.run(d); ok {
					return a, true
				}
			}
		}
	case ipRanges:
		ip, err := netip.ParseAddr(v)
		if err != nil {
			return a, false
		}
		ip = ip.Unmap()
		first := true
		for i := range t.ranges {
			r := &t.ranges[i]
			if !r.prefix.Contains(ip) || (!first && r.exclusive) {
				continue
			}
			if a, ok = r.on.run(d); ok {
				return a, true
			}
			first = false
		}
	}
	return a, false
}
