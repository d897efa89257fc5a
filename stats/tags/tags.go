package tags

import (
	"fmt"
	"strings"
)

// Tag is one name=value pair attached to a stat (Envoy's Stats::Tag).
type Tag struct{ Name, Value string }

// Spec is one bootstrap stats_config.stats_tags entry
// (envoy.config.metrics.v3.TagSpecifier).
type Spec struct {
	// TagName is the tag's name. With neither Regex nor FixedValue set it
	// selects the default extractors of that name (an error if there are
	// none), even when UseAllDefaultTags is false.
	//
	// A regex entry named like a default tag does not remove the default:
	// as in Envoy, both are registered and only the first of them that
	// matches a name, in evaluation order, contributes the tag. A custom
	// regex with a prefix token (such as `^cluster\.`) therefore runs after
	// the default with that prefix and only applies where the default does
	// not match; one without a prefix runs before all prefixed defaults.
	TagName string
	// Regex extracts the tag: capture group 1 is removed from the name, and
	// the value is group 2 if the regex has one, else group 1; a regex
	// without capture groups never matches. The search is unanchored and
	// sees the full name, not what other extractors left. It is compiled
	// with Go's RE2 engine; Envoy uses std::regex (ECMAScript) here, so
	// lookaheads and backreferences are rejected.
	Regex string
	// FixedValue, when not empty, adds TagName=FixedValue to every stat.
	FixedValue string
}

// Config configures a Producer.
type Config struct {
	// UseAllDefaultTags is stats_config.use_all_default_tags. nil means true:
	// Envoy's default extractors run before the custom ones.
	UseAllDefaultTags *bool
	// Custom is stats_config.stats_tags, in order.
	Custom []Spec
	// Fixed are the --stats-tag name:value command-line tags, added to every
	// stat. They are registered after the defaults and before Custom.
	Fixed []Tag
}

// Producer turns stat names into tag-extracted names and tags, as Envoy's
// TagProducerImpl does. It is immutable after New and safe for concurrent
// use. The zero value and a nil *Producer extract nothing.
type Producer struct {
	// unprefixed run on every name, in registration order.
	unprefixed []*Extractor
	// byPrefix run, after unprefixed, on names whose first dot-separated
	// token is the key, in registration order.
	byPrefix map[string][]*Extractor
	// combined is unprefixed followed by byPrefix[key], for every key.
	combined map[string][]*Extractor
	// fixed holds the fixed tags (command line first, then fixed_value
	// entries), which Envoy also adds to stats created with explicit tags.
	fixed []Tag
}

// New builds a Producer. Extractors are registered in Envoy's order: the
// default regex extractors, the default tokenized extractors (both unless
// UseAllDefaultTags is false), the command-line fixed tags, then the
// stats_tags entries. Errors name the stats_tags entry at fault.
func New(cfg Config) (*Producer, error) {
	p := &Producer{byPrefix: make(map[string][]*Extractor)}
	count := make(map[string]int)
	var all []*Extractor
	add := func(e *Extractor) {
		all = append(all, e)
		count[e.name]++
		if e.prefix == "" {
			p.unprefixed = append(p.unprefixed, e)
		} else {
			p.byPrefix[e.prefix] = append(p.byPrefix[e.prefix], e)
		}
	}
	if cfg.UseAllDefaultTags == nil || *cfg.UseAllDefaultTags {
		addDefaults(add, func(string) bool { return true })
	}
	for _, t := range cfg.Fixed {
		add(newFixedExtractor(t.Name, t.Value))
		p.fixed = append(p.fixed, t)
	}
	for i, s := range cfg.Custom {
		field := fmt.Sprintf("stats_config.stats_tags[%d]", i)
		switch {
		case s.Regex != "" && s.FixedValue != "":
			return nil, fmt.Errorf("%s: regex %q and fixed_value %q are both set; only one may be set", field, s.Regex, s.FixedValue)
		case s.FixedValue != "":
			add(newFixedExtractor(s.TagName, s.FixedValue))
			p.fixed = append(p.fixed, Tag{Name: s.TagName, Value: s.FixedValue})
		case s.TagName == "":
			return nil, fmt.Errorf("%s.tag_name is empty; tag_name cannot be empty", field)
		case s.Regex == "":
			if addDefaults(add, func(name string) bool { return name == s.TagName }) == 0 {
				return nil, fmt.Errorf("%s.tag_name = %q: no regex specified for tag specifier and no default regex for that name", field, s.TagName)
			}
		default:
			re, ecma, err := compileCustom(s.Regex)
			if err != nil {
				return nil, fmt.Errorf("%s.regex = %q: must be a valid ECMAScript regular expression: %w", field, s.Regex, err)
			}
			add(newCustomExtractor(s.TagName, s.Regex, re, ecma))
		}
	}
	for _, e := range all {
		e.shared = count[e.name] > 1
	}
	p.combined = make(map[string][]*Extractor, len(p.byPrefix))
	for first, list := range p.byPrefix {
		p.combined[first] = append(append([]*Extractor(nil), p.unprefixed...), list...)
	}
	return p, nil
}

// addDefaults registers the default extractors whose names keep accepts and
// returns how many it registered.
func addDefaults(add func(*Extractor), keep func(name string) bool) int {
	n := 0
	for _, d := range defaultRegexes {
		if keep(d.name) {
			add(newRE2Extractor(d))
			n++
		}
	}
	for _, d := range defaultTokens {
		if keep(d.name) {
			add(newTokenExtractor(d))
			n++
		}
	}
	return n
}

// FixedTags returns the fixed tags (--stats-tag, then stats_tags entries with
// a fixed_value). Envoy adds them to stats created with explicit tags, which
// skip extraction. The caller must not modify the returned slice.
func (p *Producer) FixedTags() []Tag {
	if p == nil {
		return nil
	}
	return p.fixed[:len(p.fixed):len(p.fixed)]
}

// maxStackTokens and maxStackCuts size the buffers Extract keeps on the
// stack; longer names still work, with one allocation more.
const (
	maxStackTokens = 32
	maxStackCuts   = 8
)

// Extract returns the tag-extracted name of the stat name and appends its
// tags to tags, in the order Envoy produces them: first the extractors that
// run on every name, then those whose prefix is the name's first token, each
// group in registration order. Every extractor sees the original name, at
// most once; of several extractors with one tag name only the first that
// matches contributes. The extracted name is the name without the union of
// the matched ranges. Tag values share memory with name.
//
// Extract allocates the returned name only when something was removed, the
// tags slice only when it has to grow, and one small slice for each regex
// extractor that matches.
func (p *Producer) Extract(name string, tags []Tag) (string, []Tag) {
	if p == nil {
		return name, tags
	}
	first := len(tags)
	var tokenBuf [maxStackTokens]span
	var toks []span
	var cutBuf [maxStackCuts]span
	cuts := cutBuf[:0]

	var prefixed []*Extractor
	if dot := strings.IndexByte(name, '.'); dot >= 0 {
		prefixed = p.byPrefix[name[:dot]]
	}
	for _, list := range [2][]*Extractor{p.unprefixed, prefixed} {
		for _, e := range list {
			if e.shared && hasTag(tags[first:], e.name) {
				continue
			}
			var value string
			var lo, hi int
			var ok bool
			switch e.kind {
			case kindFixed:
				value, ok = e.value, true
			case kindTokens:
				if toks == nil {
					toks = splitTokens(name, tokenBuf[:0])
				}
				value, lo, hi, ok = e.matchTokens(name, toks)
			default:
				value, lo, hi, ok = e.matchRegex(name)
			}
			if !ok {
				continue
			}
			tags = append(tags, Tag{Name: e.name, Value: value})
			if lo < hi {
				cuts = append(cuts, span{lo, hi})
			}
		}
	}
	return cutName(name, cuts), tags
}

func hasTag(tags []Tag, name string) bool {
	for _, t := range tags {
		if t.Name == name {
			return true
		}
	}
	return false
}

// cutName returns name without the union of the byte ranges in cuts.
func cutName(name string, cuts []span) string {
	if len(cuts) == 0 {
		return name
	}
	// Insertion sort by start: there are only a few ranges.
	for i := 1; i < len(cuts); i++ {
		for j := i; j > 0 && cuts[j].lo < cuts[j-1].lo; j-- {
			cuts[j], cuts[j-1] = cuts[j-1], cuts[j]
		}
	}
	var b strings.Builder
	b.Grow(len(name))
	at := 0 // everything before at has been copied or cut
	for _, c := range cuts {
		if c.lo > at {
			b.WriteString(name[at:c.lo])
		}
		at = max(at, c.hi)
	}
	b.WriteString(name[at:])
	return b.String()
}
