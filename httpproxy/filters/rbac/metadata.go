package rbac

import (
	"fmt"

	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/internal/headermatch"
)

// metadataMatcher is a MetadataMatcher over the stream's dynamic metadata: the value at path
// in the filter's namespace, tested by value; invert negates the result.
type metadataMatcher struct {
	filter string
	path   []string
	value  valueMatcher
	invert bool
}

func (m *metadataMatcher) match(x *filter.Exchange, _ *conn) bool {
	return m.value.match(lookup(x.Metadata[m.filter], m.path)) != m.invert
}

// lookup walks path through nested structs; nil when a step is missing or not a struct.
func lookup(st *structpb.Struct, path []string) *structpb.Value {
	if st == nil {
		return nil
	}
	var v *structpb.Value
	for i, k := range path {
		v = st.GetFields()[k]
		if v == nil {
			return nil
		}
		if i < len(path)-1 {
			if st = v.GetStructValue(); st == nil {
				return nil
			}
		}
	}
	return v
}

// valueKind is the test a valueMatcher makes.
type valueKind uint8

const (
	valNull valueKind = iota
	valDoubleExact
	valDoubleRange
	valString
	valBool
	valPresent
	valList
	valOr
)

// valueMatcher is a compiled ValueMatcher. A missing value (nil) matches only
// present_match false, as Envoy's value with no kind.
type valueMatcher struct {
	kind   valueKind
	num    float64 // exact
	lo, hi float64 // range [lo, hi)
	str    headermatch.String
	flag   bool // bool_match, present_match
	subs   []valueMatcher
	oneOf  *valueMatcher
}

func (m *valueMatcher) match(v *structpb.Value) bool {
	if m.kind == valPresent {
		return m.flag == (v != nil && v.GetKind() != nil)
	}
	if v == nil {
		return false
	}
	switch m.kind {
	case valNull:
		_, ok := v.GetKind().(*structpb.Value_NullValue)
		return ok
	case valDoubleExact:
		n, ok := v.GetKind().(*structpb.Value_NumberValue)
		return ok && n.NumberValue == m.num
	case valDoubleRange:
		n, ok := v.GetKind().(*structpb.Value_NumberValue)
		return ok && n.NumberValue >= m.lo && n.NumberValue < m.hi
	case valString:
		s, ok := v.GetKind().(*structpb.Value_StringValue)
		return ok && m.str.Match(s.StringValue)
	case valBool:
		b, ok := v.GetKind().(*structpb.Value_BoolValue)
		return ok && b.BoolValue == m.flag
	case valList:
		for _, e := range v.GetListValue().GetValues() {
			if m.oneOf.match(e) {
				return true
			}
		}
		return false
	case valOr:
		for i := range m.subs {
			if m.subs[i].match(v) {
				return true
			}
		}
	}
	return false
}

func compileMetadata(mm *matcherv3.MetadataMatcher, path string) (matcher, error) {
	if mm.GetFilter() == "" {
		return nil, fmt.Errorf("%s.filter = \"\": must not be empty", path)
	}
	if len(mm.GetPath()) == 0 {
		return nil, fmt.Errorf("%s.path: empty; at least one segment is required", path)
	}
	m := &metadataMatcher{filter: mm.GetFilter(), invert: mm.GetInvert()}
	for i, seg := range mm.GetPath() {
		if seg.GetKey() == "" {
			return nil, fmt.Errorf("%s.path[%d].key = \"\": must not be empty", path, i)
		}
		m.path = append(m.path, seg.GetKey())
	}
	v, err := compileValue(mm.GetValue(), path+".value")
	if err != nil {
		return nil, err
	}
	m.value = v
	return m, nil
}

// compileSourced compiles sourced_metadata; only the stream's dynamic metadata is a source
// Legate has.
func compileSourced(sm *rbacv3.SourcedMetadata, path string) (matcher, error) {
	if sm.GetMetadataSource() != rbacv3.MetadataSource_DYNAMIC {
		return nil, fmt.Errorf("%s.metadata_source = %s: only DYNAMIC is implemented by Legate", path, sm.GetMetadataSource())
	}
	return compileMetadata(sm.GetMetadataMatcher(), path+".metadata_matcher")
}

func compileValue(vm *matcherv3.ValueMatcher, path string) (valueMatcher, error) {
	switch p := vm.GetMatchPattern().(type) {
	case *matcherv3.ValueMatcher_NullMatch_:
		return valueMatcher{kind: valNull}, nil
	case *matcherv3.ValueMatcher_DoubleMatch:
		switch d := p.DoubleMatch.GetMatchPattern().(type) {
		case *matcherv3.DoubleMatcher_Exact:
			return valueMatcher{kind: valDoubleExact, num: d.Exact}, nil
		case *matcherv3.DoubleMatcher_Range:
			lo, hi := d.Range.GetStart(), d.Range.GetEnd()
			if lo >= hi {
				return valueMatcher{}, fmt.Errorf("%s.double_match.range = [%v, %v): start must be < end", path, lo, hi)
			}
			return valueMatcher{kind: valDoubleRange, lo: lo, hi: hi}, nil
		}
		return valueMatcher{}, fmt.Errorf("%s.double_match: no match pattern set", path)
	case *matcherv3.ValueMatcher_StringMatch:
		s, err := headermatch.CompileString(p.StringMatch, path+".string_match")
		return valueMatcher{kind: valString, str: s}, err
	case *matcherv3.ValueMatcher_BoolMatch:
		return valueMatcher{kind: valBool, flag: p.BoolMatch}, nil
	case *matcherv3.ValueMatcher_PresentMatch:
		return valueMatcher{kind: valPresent, flag: p.PresentMatch}, nil
	case *matcherv3.ValueMatcher_ListMatch:
		sub, err := compileValue(p.ListMatch.GetOneOf(), path+".list_match.one_of")
		return valueMatcher{kind: valList, oneOf: &sub}, err
	case *matcherv3.ValueMatcher_OrMatch:
		vs := p.OrMatch.GetValueMatchers()
		if len(vs) < 2 {
			return valueMatcher{}, fmt.Errorf("%s.or_match.value_matchers: %d given; at least 2 are required", path, len(vs))
		}
		out := valueMatcher{kind: valOr, subs: make([]valueMatcher, len(vs))}
		for i, v := range vs {
			sub, err := compileValue(v, fmt.Sprintf("%s.or_match.value_matchers[%d]", path, i))
			if err != nil {
				return valueMatcher{}, err
			}
			out.subs[i] = sub
		}
		return out, nil
	}
	return valueMatcher{}, fmt.Errorf("%s: no match pattern set; one is required", path)
}
