package accesslog

import (
	"net/http"
	"testing"
)

func TestRuntimeFilter(t *testing.T) {
	runtime := func(key string, def uint64) uint64 {
		if key == "log.sample" {
			return 30
		}
		return def
	}
	// x-request-id 0000001e...: its first 8 hex digits are 30.
	id := func(v string) *Entry { return &Entry{RequestHeaders: http.Header{"X-Request-Id": {v}}} }
	tests := []struct {
		name   string
		filter string
		random uint64
		entry  *Entry
		want   bool
	}{
		{"unset percent logs nothing", "{runtime_filter: {runtime_key: other}}", 0, &Entry{}, false},
		{"default numerator, random below", "{runtime_filter: {runtime_key: other, percent_sampled: {numerator: 10}}}", 109, &Entry{}, true},
		{"default numerator, random above", "{runtime_filter: {runtime_key: other, percent_sampled: {numerator: 10}}}", 110, &Entry{}, false},
		{"runtime overrides numerator", "{runtime_filter: {runtime_key: log.sample, percent_sampled: {numerator: 10}}}", 29, &Entry{}, true},
		{"runtime value above random", "{runtime_filter: {runtime_key: log.sample, percent_sampled: {numerator: 10}}}", 30, &Entry{}, false},
		{"request id below", "{runtime_filter: {runtime_key: other, percent_sampled: {numerator: 31}}}", 99, id("0000001e-0000-4000-8000-000000000000"), true},
		{"request id at numerator", "{runtime_filter: {runtime_key: other, percent_sampled: {numerator: 30}}}", 0, id("0000001e-0000-4000-8000-000000000000"), false},
		{"request id modulo denominator", "{runtime_filter: {runtime_key: other, percent_sampled: {numerator: 31, denominator: TEN_THOUSAND}}}", 9999, id("0000271e"), true},
		{"independent randomness ignores request id", "{runtime_filter: {runtime_key: other, percent_sampled: {numerator: 31}, use_independent_randomness: true}}", 99, id("0000001e"), false},
		{"short request id uses random", "{runtime_filter: {runtime_key: other, percent_sampled: {numerator: 31}}}", 99, id("1e"), false},
		{"request id not hex uses random", "{runtime_filter: {runtime_key: other, percent_sampled: {numerator: 31}}}", 5, id("zzzzzzzz"), true},
		{"numerator capped at denominator", "{runtime_filter: {runtime_key: other, percent_sampled: {numerator: 500}}}", 99, &Entry{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := FilterFromProto("f", filterProto(t, tt.filter), FilterOptions{Runtime: runtime, Random: func() uint64 { return tt.random }})
			if err != nil {
				t.Fatalf("FilterFromProto = %v", err)
			}
			if got := f.Match(tt.entry); got != tt.want {
				t.Errorf("Match = %v; want %v", got, tt.want)
			}
		})
	}
}
