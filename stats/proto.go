package stats

import (
	"fmt"

	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/legateproxy/legate/stats/tags"
)

// FromProto converts a bootstrap stats_config into the Tags, Matcher and
// Buckets of a Config; the caller adds the flush settings, --stats-tag fixed
// tags (Tags.Fixed) and the symbol-table flag. A nil message gives the
// defaults. Errors name the field path, the value and the rule.
func FromProto(pb *metricsv3.StatsConfig) (Config, error) {
	var cfg Config
	if pb == nil {
		return cfg, nil
	}
	if b := pb.GetUseAllDefaultTags(); b != nil {
		v := b.GetValue()
		cfg.Tags.UseAllDefaultTags = &v
	}
	for _, t := range pb.GetStatsTags() {
		cfg.Tags.Custom = append(cfg.Tags.Custom, tags.Spec{TagName: t.GetTagName(), Regex: t.GetRegex(), FixedValue: t.GetFixedValue()})
	}
	if m := pb.GetStatsMatcher(); m != nil {
		cfg.Matcher = &Matcher{}
		switch x := m.GetStatsMatcher().(type) {
		case *metricsv3.StatsMatcher_RejectAll:
			cfg.Matcher.RejectAll = x.RejectAll
			if !x.RejectAll {
				cfg.Matcher = nil // reject_all: false accepts everything
			}
		case *metricsv3.StatsMatcher_InclusionList:
			list, err := stringMatchers("stats_config.stats_matcher.inclusion_list", x.InclusionList.GetPatterns())
			if err != nil {
				return cfg, err
			}
			cfg.Matcher.Inclusion = append([]StringMatcher{}, list...)
		case *metricsv3.StatsMatcher_ExclusionList:
			list, err := stringMatchers("stats_config.stats_matcher.exclusion_list", x.ExclusionList.GetPatterns())
			if err != nil {
				return cfg, err
			}
			cfg.Matcher.Exclusion = list
		default:
			cfg.Matcher = nil
		}
	}
	for i, b := range pb.GetHistogramBucketSettings() {
		path := fmt.Sprintf("stats_config.histogram_bucket_settings[%d]", i)
		m, err := stringMatcher(path+".match", b.GetMatch())
		if err != nil {
			return cfg, err
		}
		if len(b.GetBuckets()) == 0 {
			return cfg, fmt.Errorf("%s.buckets: empty; must have at least one bound", path)
		}
		for j, v := range b.GetBuckets() {
			if !(v > 0) {
				return cfg, fmt.Errorf("%s.buckets[%d] = %v; must be > 0", path, j, v)
			}
		}
		cfg.Buckets = append(cfg.Buckets, BucketSetting{Match: m, Bounds: append([]float64(nil), b.GetBuckets()...)})
	}
	return cfg, nil
}

func stringMatchers(path string, pbs []*matcherv3.StringMatcher) ([]StringMatcher, error) {
	out := make([]StringMatcher, 0, len(pbs))
	for i, p := range pbs {
		m, err := stringMatcher(fmt.Sprintf("%s.patterns[%d]", path, i), p)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func stringMatcher(path string, p *matcherv3.StringMatcher) (StringMatcher, error) {
	var m StringMatcher
	switch x := p.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		m = ExactMatcher(x.Exact)
	case *matcherv3.StringMatcher_Prefix:
		m = PrefixMatcher(x.Prefix)
	case *matcherv3.StringMatcher_Suffix:
		m = SuffixMatcher(x.Suffix)
	case *matcherv3.StringMatcher_Contains:
		m = ContainsMatcher(x.Contains)
	case *matcherv3.StringMatcher_SafeRegex:
		var err error
		if m, err = RegexMatcher(path+".safe_regex.regex", x.SafeRegex.GetRegex()); err != nil {
			return m, err
		}
	default:
		return m, fmt.Errorf("%s: no supported match_pattern set; must be one of exact, prefix, suffix, contains, safe_regex", path)
	}
	m.IgnoreCase = p.GetIgnoreCase()
	return m, nil
}
