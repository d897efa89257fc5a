package stats

import (
	"fmt"
	"regexp"
	"strings"
)

// StringMatcher is Envoy's type.matcher.v3.StringMatcher restricted to what
// stats_matcher and histogram_bucket_settings use. Exactly one of Exact,
// Prefix, Suffix, Contains or Regex is meant to be set (Exact may be "" and
// then matches only the empty string). The zero value matches only "".
// Immutable after construction; safe for concurrent use.
type StringMatcher struct {
	Exact, Prefix, Suffix, Contains string
	Regex                           *regexp.Regexp // safe_regex, matched against the whole name
	IgnoreCase                      bool
	kind                            matchKind
}

type matchKind uint8

const (
	matchExact matchKind = iota
	matchPrefix
	matchSuffix
	matchContains
	matchRegex
)

// ExactMatcher, PrefixMatcher, SuffixMatcher and ContainsMatcher build the
// corresponding StringMatcher.
func ExactMatcher(s string) StringMatcher { return StringMatcher{Exact: s, kind: matchExact} }

// PrefixMatcher matches names starting with s.
func PrefixMatcher(s string) StringMatcher { return StringMatcher{Prefix: s, kind: matchPrefix} }

// SuffixMatcher matches names ending with s.
func SuffixMatcher(s string) StringMatcher { return StringMatcher{Suffix: s, kind: matchSuffix} }

// ContainsMatcher matches names containing s.
func ContainsMatcher(s string) StringMatcher { return StringMatcher{Contains: s, kind: matchContains} }

// RegexMatcher compiles a safe_regex; like Envoy's RE2 matcher it must match
// the whole name. The error names field, the value and the rule.
func RegexMatcher(field, re string) (StringMatcher, error) {
	c, err := regexp.Compile(`^(?:` + re + `)$`)
	if err != nil {
		return StringMatcher{}, fmt.Errorf("%s = %q: invalid regex: %w", field, re, err)
	}
	return StringMatcher{Regex: c, kind: matchRegex}, nil
}

// Match reports whether name matches.
func (m *StringMatcher) Match(name string) bool {
	if m.IgnoreCase && m.kind != matchRegex {
		name = strings.ToLower(name)
	}
	lower := func(s string) string {
		if m.IgnoreCase {
			return strings.ToLower(s)
		}
		return s
	}
	switch m.kind {
	case matchPrefix:
		return strings.HasPrefix(name, lower(m.Prefix))
	case matchSuffix:
		return strings.HasSuffix(name, lower(m.Suffix))
	case matchContains:
		return strings.Contains(name, lower(m.Contains))
	case matchRegex:
		return m.Regex.MatchString(name)
	}
	return name == lower(m.Exact)
}

// Matcher is Envoy's stats_config.stats_matcher: either reject_all, an
// inclusion list or an exclusion list. A nil *Matcher accepts every stat.
// Rejected stats still work as struct fields; they are just never listed.
type Matcher struct {
	RejectAll bool
	// Inclusion, when non-nil, accepts only names matching one of its entries.
	Inclusion []StringMatcher
	// Exclusion rejects names matching one of its entries.
	Exclusion []StringMatcher
}

// Rejects reports whether the stat called name is rejected.
func (m *Matcher) Rejects(name string) bool {
	if m == nil {
		return false
	}
	if m.RejectAll {
		return true
	}
	if m.Inclusion != nil {
		for i := range m.Inclusion {
			if m.Inclusion[i].Match(name) {
				return false
			}
		}
		return true
	}
	for i := range m.Exclusion {
		if m.Exclusion[i].Match(name) {
			return true
		}
	}
	return false
}

// BucketSetting is one stats_config.histogram_bucket_settings entry: the
// first entry whose Match matches a histogram's name gives its bounds.
type BucketSetting struct {
	Match  StringMatcher
	Bounds []float64 // sorted ascending by New
}
