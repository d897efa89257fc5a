package stats

import (
	"strings"
	"testing"

	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestFromProto(t *testing.T) {
	pb := &metricsv3.StatsConfig{
		UseAllDefaultTags: wrapperspb.Bool(false),
		StatsTags:         []*metricsv3.TagSpecifier{{TagName: "t", TagValue: &metricsv3.TagSpecifier_FixedValue{FixedValue: "v"}}},
		StatsMatcher: &metricsv3.StatsMatcher{StatsMatcher: &metricsv3.StatsMatcher_ExclusionList{ExclusionList: &matcherv3.ListStringMatcher{
			Patterns: []*matcherv3.StringMatcher{
				{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "cluster."}},
				{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "server\\..*"}}},
			},
		}}},
		HistogramBucketSettings: []*metricsv3.HistogramBucketSettings{{
			Match:   &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: "_ms"}},
			Buckets: []float64{10, 1, 5},
		}},
	}
	cfg, err := FromProto(pb)
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(t, cfg)
	var srv ServerStats
	s.Register("server.", &srv)
	s.Counter("cluster.a.x")
	s.Counter("http.y")
	if got := listNames(s, allKinds); len(got) != 1 || got[0] != "http.y" {
		t.Errorf("listed = %v; want [http.y]", got)
	}
	if got := s.BucketBounds("a_ms"); len(got) != 3 || got[0] != 1 || got[2] != 10 {
		t.Errorf("BucketBounds(a_ms) = %v; want [1 5 10]", got)
	}
	if got := s.BucketBounds("a"); len(got) != 19 {
		t.Errorf("BucketBounds(a) = %v; want the 19 defaults", got)
	}
	h := s.Histogram("x_ms", Milliseconds)
	if got := h.Bounds(); len(got) != 3 {
		t.Errorf("histogram bounds = %v; want 3", got)
	}
	_, tg := s.Tagger().Extract("cluster.a.upstream_rq_200", nil)
	if len(tg) != 1 || tg[0].Name != "t" {
		t.Errorf("tags = %v; want only the fixed tag", tg)
	}

	bad := []struct {
		name string
		pb   *metricsv3.StatsConfig
		want string
	}{
		{"regex", &metricsv3.StatsConfig{StatsMatcher: &metricsv3.StatsMatcher{StatsMatcher: &metricsv3.StatsMatcher_InclusionList{InclusionList: &matcherv3.ListStringMatcher{
			Patterns: []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "("}}}},
		}}}}, "stats_config.stats_matcher.inclusion_list.patterns[0].safe_regex.regex"},
		{"empty_buckets", &metricsv3.StatsConfig{HistogramBucketSettings: []*metricsv3.HistogramBucketSettings{{
			Match: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "x"}},
		}}}, "histogram_bucket_settings[0].buckets"},
		{"no_match", &metricsv3.StatsConfig{HistogramBucketSettings: []*metricsv3.HistogramBucketSettings{{Buckets: []float64{1}}}}, "histogram_bucket_settings[0].match"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := FromProto(tc.pb); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("FromProto() error = %v; want one naming %s", err, tc.want)
			}
		})
	}
}
