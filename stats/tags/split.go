package tags

import (
	"encoding/binary"
	"slices"
	"strings"
	"sync"
)

// Fields is the list of field names of one stats struct, whose stat names
// are prefix+field for each registered prefix ("cluster.web." +
// "upstream_rq_total"). Fields.Extract extracts the tags of all those names
// at once: it runs each extractor on the prefix once and reuses the per-field
// work across every prefix of the same shape, instead of running every
// extractor on every full name.
//
// Fields is created by Producer.NewFields and is safe for concurrent use; it
// caches one Template per prefix shape under a mutex.
type Fields struct {
	p     *Producer
	names []string

	mu        sync.Mutex
	templates map[string]*Template // guarded by mu; by shapeKey
}

// NewFields returns the field list names for p. Extract on it gives, for
// every prefix, what Extract gives on each prefix+names[i]. The caller must
// not modify names afterwards.
func (p *Producer) NewFields(names []string) *Fields {
	return &Fields{p: p, names: names}
}

// Template is the part of the extraction of prefix+field that is the same
// for every prefix of one shape: the tag-extracted name of each field and
// which of the prefix's distinct tag sets each field has. Immutable.
type Template struct {
	names []string    // tag-extracted name per field
	set   []uint8     // tag set per field
	sets  [][]slotTag // the distinct tag sets
	ntags int         // total tags in sets
}

// Name returns the tag-extracted name of field i.
func (t *Template) Name(i int) string { return t.names[i] }

// Names returns the tag-extracted names of every field, in field order. The
// caller must not modify the result.
func (t *Template) Names() []string { return t.names }

// SetIndexes returns, per field, the index of its tag set in the sets that
// Fields.Extract returned with the template. The caller must not modify it.
func (t *Template) SetIndexes() []uint8 { return t.set }

// slotTag is one tag of a template tag set: its value is the prefix value of
// extractor slot, or value when slot < 0.
type slotTag struct {
	name  string
	value string
	slot  int
}

// Extract returns the extraction of prefix+f for every field f: the shared
// template (tag-extracted names and tag set of each field) and the distinct
// tag sets for this prefix, which Template.SetIndexes indexes. Tag values
// share memory with prefix and the field names.
//
// ok is false when this prefix cannot be split from the field names safely
// (an extractor's match could span the boundary or depends on both parts in
// a way the split does not model, such as a custom regex that may match);
// the caller then uses Producer.Extract on each full name. When ok is true
// the result equals Producer.Extract on each full name.
func (f *Fields) Extract(prefix string) (t *Template, sets [][]Tag, ok bool) {
	p := f.p
	if p == nil || len(f.names) == 0 || !strings.HasSuffix(prefix, ".") {
		return nil, nil, false
	}
	for _, n := range f.names {
		// Names starting with '.' would join tokens differently.
		if n == "" || n[0] == '.' {
			return nil, nil, false
		}
	}
	dot := strings.IndexByte(prefix, '.')
	first := prefix[:dot]
	list := p.list(first)
	if len(list) > maxSplitExtractors {
		return nil, nil, false
	}
	var tokBuf [maxStackTokens]span
	ptoks := splitTokens(prefix, tokBuf[:0])
	ptoks = ptoks[:len(ptoks)-1] // the empty token after the final dot
	var outBuf [maxSplitExtractors]prefixOutcome
	outs := outBuf[:0]
	for _, e := range list {
		o := e.splitPrefix(prefix, ptoks)
		if o.state == stateUnknown {
			return nil, nil, false
		}
		outs = append(outs, o)
	}
	cutP, ok := cutPrefix(prefix, outs)
	if !ok {
		return nil, nil, false
	}
	key := shapeKey(first, len(ptoks), cutP, outs)
	f.mu.Lock()
	t, found := f.templates[string(key)]
	f.mu.Unlock()
	if !found {
		t = f.build(list, len(ptoks), cutP, outs)
		f.mu.Lock()
		if f.templates == nil {
			f.templates = make(map[string]*Template)
		}
		if old, dup := f.templates[string(key)]; dup {
			t = old
		} else {
			f.templates[string(key)] = t
		}
		f.mu.Unlock()
	}
	if t == nil {
		return nil, nil, false
	}
	return t, t.instantiate(outs), true
}

// maxSplitExtractors bounds the extractors one name can run for Fields.Extract
// to keep its per-prefix state on the stack; longer lists fall back.
const maxSplitExtractors = 64

// list returns the extractors Extract runs on a name whose first token is
// first, in evaluation order.
func (p *Producer) list(first string) []*Extractor {
	if l, ok := p.combined[first]; ok {
		return l
	}
	return p.unprefixed
}

// instantiate fills the template's tag sets with this prefix's values.
func (t *Template) instantiate(outs []prefixOutcome) [][]Tag {
	if len(t.sets) == 0 {
		return nil
	}
	sets := make([][]Tag, len(t.sets))
	all := make([]Tag, t.ntags)
	at := 0
	for i, st := range t.sets {
		s := all[at : at+len(st) : at+len(st)]
		at += len(st)
		for j, tg := range st {
			v := tg.value
			if tg.slot >= 0 {
				v = outs[tg.slot].value
			}
			s[j] = Tag{Name: tg.name, Value: v}
		}
		sets[i] = s
	}
	return sets
}

// Outcome states of one extractor on one part of a name.
const (
	stateNo      uint8 = iota // cannot match
	stateYes                  // matches as far as this part is concerned
	stateCond                 // a regex that matches only if all its literals occur
	stateUnknown              // the split cannot tell
)

// prefixOutcome is what an extractor's result on prefix+field depends on in
// the prefix.
type prefixOutcome struct {
	state    uint8
	lo, hi   int    // range of the prefix to remove when the tag is added
	always   bool   // the field side always matches (the range is always cut)
	clo, chi int    // !always: the range in the prefix left after the always-cut ranges
	value    string // tag value when it lies in the prefix
	hasValue bool
	// stateCond, per required literal: absent is set when the prefix does
	// not contain it, and then tails has bit c set when the prefix ends with
	// literal[:c] (the literal could span the boundary).
	absent [2]bool
	tails  [2]uint64
}

// literals returns the literals a regex extractor's match requires to occur
// in the name: Envoy's substring hint and the derived one.
func (e *Extractor) literals() [2]string { return [2]string{e.substr, e.mustContain} }

// tokenSplit is a tokenized pattern split at the prefix's k tokens.
type tokenSplit struct {
	pre     []string // matched position by position against the prefix tokens
	postAt  int      // pattern index the field's tokens are matched from
	anyPost bool     // any field matches (the pattern ends in "**" inside pre)
	never   bool     // no name with this prefix matches
}

// splitTokensPattern splits e's pattern at k prefix tokens. ok is false when
// a "**" other than a final one falls in the prefix, or the pattern has no
// "$" (Extract then treats its first token as the value).
func (e *Extractor) splitTokensPattern(k int) (s tokenSplit, ok bool) {
	if e.pattern[e.dollar] != "$" {
		return s, false
	}
	for i, t := range e.pattern {
		if t != "**" {
			continue
		}
		if i >= k {
			break
		}
		if i == len(e.pattern)-1 { // i < k
			// A final "**" matches one or more tokens; the field has at
			// least one.
			return tokenSplit{pre: e.pattern[:i], anyPost: true}, true
		}
		return s, false
	}
	if len(e.pattern) <= k {
		// No "**": the pattern needs exactly len(pattern) tokens and the
		// name has more.
		return tokenSplit{never: true}, true
	}
	// A final "**" right after the prefix matches any field.
	anyPost := k == len(e.pattern)-1 && e.pattern[k] == "**"
	return tokenSplit{pre: e.pattern[:k], postAt: k, anyPost: anyPost}, true
}

// splitPrefix evaluates the prefix side of e on prefix (which ends with '.'
// and has the complete tokens ptoks).
func (e *Extractor) splitPrefix(prefix string, ptoks []span) prefixOutcome {
	switch e.kind {
	case kindFixed:
		return prefixOutcome{state: stateYes}
	case kindTokens:
		ts, ok := e.splitTokensPattern(len(ptoks))
		switch {
		case !ok:
			return prefixOutcome{state: stateUnknown}
		case ts.never:
			return prefixOutcome{state: stateNo}
		}
		o := prefixOutcome{state: stateYes, always: ts.anyPost}
		for i, want := range ts.pre {
			tok := prefix[ptoks[i].lo:ptoks[i].hi]
			switch {
			case i == e.dollar:
				// Never the last token of the name: the field follows.
				o.value, o.hasValue = tok, true
				o.lo, o.hi = ptoks[i].lo, ptoks[i].hi+1
			case want != "*" && want != tok:
				return prefixOutcome{state: stateNo}
			}
		}
		return o
	}
	// Regex kinds.
	if (e.kind == kindRE2 && e.groups < 2) || e.groups < 1 {
		return prefixOutcome{state: stateNo}
	}
	if e.window > 0 {
		return prefixOutcome{state: stateYes} // decided by the field
	}
	if len(e.mustStart) <= len(prefix) && !strings.HasPrefix(prefix, e.mustStart) {
		return prefixOutcome{state: stateNo}
	}
	o := prefixOutcome{state: stateCond}
	decisive := false
	for i, lit := range e.literals() {
		if lit == "" || len(lit) > 64 || strings.Contains(prefix, lit) {
			continue
		}
		decisive = true
		o.absent[i] = true
		for c := 1; c < len(lit); c++ {
			if strings.HasSuffix(prefix, lit[:c]) {
				o.tails[i] |= 1 << c
			}
		}
	}
	if !decisive {
		// Every literal is in the prefix (or there is none): only the
		// regex on the full name can tell.
		return prefixOutcome{state: stateUnknown}
	}
	return o
}

// fieldOutcome is e's result on prefix+field as far as the field decides it.
type fieldOutcome struct {
	state    uint8
	lo, hi   int // range of the field to remove
	value    string
	hasValue bool
}

// splitField evaluates the field side of e on field, given the prefix side
// o and the prefix's token count k.
func (e *Extractor) splitField(field string, k int, o *prefixOutcome) fieldOutcome {
	switch e.kind {
	case kindFixed:
		return fieldOutcome{state: stateYes, value: e.value, hasValue: true}
	case kindTokens:
		ts, _ := e.splitTokensPattern(k)
		if ts.anyPost {
			return fieldOutcome{state: stateYes}
		}
		var tokBuf [maxStackTokens]span
		ftoks := splitTokens(field, tokBuf[:0])
		at, ok := e.searchTokens(field, ftoks, 0, ts.postAt)
		switch {
		case !ok, at < 0 && !o.hasValue:
			return fieldOutcome{state: stateNo}
		case at < 0:
			return fieldOutcome{state: stateYes} // the value is in the prefix
		}
		t := ftoks[at]
		lo, hi := t.lo, t.hi
		if at < len(ftoks)-1 {
			hi++
		} else if lo > 0 {
			lo--
		} else {
			// The value is the whole field and the last token: Extract
			// would also remove the prefix's final dot.
			return fieldOutcome{state: stateUnknown}
		}
		return fieldOutcome{state: stateYes, lo: lo, hi: hi, value: field[t.lo:t.hi], hasValue: true}
	}
	if e.window > 0 {
		if len(field) < e.window {
			// The last window bytes would hold the prefix's final '.',
			// which no window match contains.
			return fieldOutcome{state: stateNo}
		}
		v, lo, hi, ok := e.matchRegex(field)
		if !ok {
			return fieldOutcome{state: stateNo}
		}
		return fieldOutcome{state: stateYes, lo: lo, hi: hi, value: v, hasValue: true}
	}
	// stateCond: the regex cannot match when one of its literals occurs
	// nowhere in prefix+field: not in the prefix, not in the field and not
	// across the boundary.
	for i, lit := range e.literals() {
		if !o.absent[i] || strings.Contains(field, lit) {
			continue
		}
		spans := false
		for c := 1; c < len(lit); c++ {
			if o.tails[i]&(1<<c) != 0 && strings.HasPrefix(field, lit[c:]) {
				spans = true
				break
			}
		}
		if !spans {
			return fieldOutcome{state: stateNo}
		}
	}
	return fieldOutcome{state: stateUnknown}
}

// cutPrefix returns prefix without the ranges of the extractors whose prefix
// side matched with a range and whose field side always matches, and sets
// clo, chi of the other ranges (cut only for the fields that match) to their
// place in the result. ok is false when an always-cut range overlaps another
// range (ranges cut only for some fields may overlap each other).
func cutPrefix(prefix string, outs []prefixOutcome) (string, bool) {
	var cutBuf [maxStackCuts]span
	cuts := cutBuf[:0]
	for i := range outs {
		if o := &outs[i]; o.state == stateYes && o.lo < o.hi {
			for j := range outs[:i] {
				if q := &outs[j]; q.state == stateYes && q.lo < q.hi && o.lo < q.hi && q.lo < o.hi && (o.always || q.always) {
					return "", false
				}
			}
			if o.always {
				cuts = append(cuts, span{o.lo, o.hi})
			}
		}
	}
	for i := range outs {
		if o := &outs[i]; o.state == stateYes && o.lo < o.hi && !o.always {
			shift := 0
			for _, c := range cuts {
				if c.hi <= o.lo {
					shift += c.hi - c.lo
				}
			}
			o.clo, o.chi = o.lo-shift, o.hi-shift
		}
	}
	return cutName(prefix, cuts), true
}

// shapeKey identifies the prefixes whose extraction shares a template: the
// same extractor list (first token), token count, prefix left after cutting,
// and per extractor the same prefix-side state.
func shapeKey(first string, k int, cutP string, outs []prefixOutcome) []byte {
	key := make([]byte, 0, len(first)+len(cutP)+8+len(outs)*3)
	key = binary.AppendUvarint(key, uint64(len(first)))
	key = append(key, first...)
	key = binary.AppendUvarint(key, uint64(k))
	key = binary.AppendUvarint(key, uint64(len(cutP)))
	key = append(key, cutP...)
	for i := range outs {
		o := &outs[i]
		flags := o.state
		if o.lo < o.hi {
			flags |= 1 << 4
		}
		if o.hasValue {
			flags |= 1 << 5
		}
		if o.always {
			flags |= 1 << 6
		}
		key = append(key, flags)
		if o.lo < o.hi && !o.always {
			key = binary.AppendUvarint(key, uint64(o.clo))
			key = binary.AppendUvarint(key, uint64(o.chi))
		}
		if o.state == stateCond {
			key = append(key, boolByte(o.absent[0]), boolByte(o.absent[1]))
			key = binary.LittleEndian.AppendUint64(key, o.tails[0])
			key = binary.LittleEndian.AppendUint64(key, o.tails[1])
		}
	}
	return key
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// build computes the template of one prefix shape, or nil when some field
// cannot be split (then every prefix of the shape falls back to per-name
// extraction).
func (f *Fields) build(list []*Extractor, k int, cutP string, outs []prefixOutcome) *Template {
	t := &Template{names: make([]string, len(f.names)), set: make([]uint8, len(f.names))}
	var cur []slotTag
	var cutBuf, pcutBuf [maxStackCuts]span
	for fi, field := range f.names {
		cur = cur[:0]
		cuts, pcuts := cutBuf[:0], pcutBuf[:0]
		for ei, e := range list {
			o := &outs[ei]
			if o.state == stateNo {
				continue
			}
			if e.shared && hasSlotTag(cur, e.name) {
				if o.always && o.lo < o.hi {
					return nil // cutPrefix cut a range Extract keeps
				}
				continue
			}
			fo := e.splitField(field, k, o)
			switch fo.state {
			case stateUnknown:
				return nil
			case stateNo:
				if o.always && o.lo < o.hi {
					return nil
				}
				continue
			}
			if o.lo < o.hi && !o.always {
				pcuts = append(pcuts, span{o.clo, o.chi})
			}
			tg := slotTag{name: e.name, slot: -1}
			switch {
			case o.hasValue:
				tg.slot = ei
			case fo.hasValue:
				tg.value = fo.value
			}
			cur = append(cur, tg)
			if fo.lo < fo.hi {
				cuts = append(cuts, span{fo.lo, fo.hi})
			}
		}
		t.names[fi] = cutName(cutP, pcuts) + cutName(field, cuts)
		set := -1
		for j, s := range t.sets {
			if slices.Equal(s, cur) {
				set = j
				break
			}
		}
		if set < 0 {
			if len(t.sets) == 256 {
				return nil
			}
			set = len(t.sets)
			t.sets = append(t.sets, append([]slotTag(nil), cur...))
			t.ntags += len(cur)
		}
		t.set[fi] = uint8(set)
	}
	t.names = internNames(t.names)
	return t
}

// internNames makes equal names share one string.
func internNames(names []string) []string {
	seen := make(map[string]string, len(names))
	for i, n := range names {
		if s, ok := seen[n]; ok {
			names[i] = s
		} else {
			seen[n] = n
		}
	}
	return names
}

func hasSlotTag(tags []slotTag, name string) bool {
	for _, t := range tags {
		if t.name == name {
			return true
		}
	}
	return false
}
