package fault

import (
	"net/http"
	"strings"
	"testing"
	"time"

	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
	"github.com/legateproxy/legate/httpproxy/route"
)

// fromYAML makes the filter's typed_config from YAML.
func fromYAML(t testing.TB, y string) *anypb.Any {
	t.Helper()
	return filtertest.AnyFromYAML(t, y, &faultv3.HTTPFault{})
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name, yaml, wantErr string
		check               func(t *testing.T, s *Settings)
	}{
		{name: "empty", yaml: "{}", check: func(t *testing.T, s *Settings) {
			if s.delay != none || s.abort != none || s.rateLimit != none || s.hasMaxActive || !s.clusterStats ||
				s.delayDurationKey != keyDelayDuration || s.maxActiveKey != keyMaxActive {
				t.Errorf("settings = %+v; want no faults, no limit, Envoy's runtime keys", s)
			}
		}},
		{name: "fixed faults", yaml: `delay: {fixed_delay: 0.25s, percentage: {numerator: 10}}
abort: {http_status: 503, percentage: {numerator: 20, denominator: TEN_THOUSAND}}
response_rate_limit: {fixed_limit: {limit_kbps: 4}, percentage: {numerator: 100}}
max_active_faults: 3
upstream_cluster: web
downstream_nodes: [a]
delay_percent_runtime: my.delay
disable_downstream_cluster_stats: true
`, check: func(t *testing.T, s *Settings) {
			if s.delay != fixed || s.delayDuration != 250*time.Millisecond || s.delayPercent != (filter.Fraction{Key: "my.delay", Numerator: 10, Denominator: 100}) ||
				s.abort != fixed || s.abortStatus != 503 || s.abortPercent.Denominator != 10_000 || s.abortBody != "fault filter abort" ||
				s.rateLimit != fixed || s.rateLimitKbps != 4 || !s.hasMaxActive || s.maxActive != 3 || s.upstreamCluster != "web" || s.clusterStats {
				t.Errorf("settings = %+v; want every field read", s)
			}
		}},
		{name: "header faults", yaml: "delay: {header_delay: {}}\nabort: {header_abort: {}, response_body: nope}\nresponse_rate_limit: {header_limit: {}}\n", check: func(t *testing.T, s *Settings) {
			if s.delay != fromHeader || s.abort != fromHeader || s.rateLimit != fromHeader || s.abortBody != "nope" {
				t.Errorf("settings = %+v; want header-controlled faults", s)
			}
		}},
		{name: "grpc abort", yaml: "abort: {grpc_status: 14}\n", check: func(t *testing.T, s *Settings) {
			if s.abortGRPC != 15 || s.abortStatus != 0 {
				t.Errorf("abortGRPC, abortStatus = %d, %d; want 15, 0", s.abortGRPC, s.abortStatus)
			}
		}},
		{name: "abort status out of range", yaml: "abort: {http_status: 700}\n", wantErr: "HttpStatus"},
		{name: "abort without type", yaml: "abort: {percentage: {numerator: 1}}\n", wantErr: "ErrorType"},
		{name: "bad header matcher", yaml: "headers: [{name: x, safe_regex_match: {regex: '('}}]\n", wantErr: "headers[0]"},
		{name: "filter metadata", yaml: "filter_metadata: {k: v}\n", wantErr: "filter_metadata: not implemented by Legate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := FromAny(fromYAML(t, tt.yaml), &filter.Context{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("FromAny error = %v; want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, f.settings)
		})
	}
}

// TestPlan: the headers of a request decide header-controlled faults, a percentage header
// only lowers the configured one, and the node and header filters select requests.
func TestPlan(t *testing.T) {
	f, err := FromAny(fromYAML(t, `delay: {header_delay: {}, percentage: {numerator: 100}}
abort: {header_abort: {}, percentage: {numerator: 100}}
response_rate_limit: {header_limit: {}, percentage: {numerator: 100}}
downstream_nodes: [edge]
headers: [{name: x-chaos, present_match: true}]
`), &filter.Context{})
	if err != nil {
		t.Fatal(err)
	}
	base := []string{"X-Chaos", "1", hdrDownstreamNode, "edge"}
	tests := []struct {
		name string
		hdr  []string
		want *plan // nil: no stream
	}{
		{"delay", []string{hdrDelay, "150"}, &plan{delay: 150 * time.Millisecond}},
		{"abort", []string{hdrAbort, "429"}, &plan{abortStatus: 429}},
		{"abort out of range", []string{hdrAbort, "99"}, nil},
		{"grpc abort", []string{hdrAbortGRPC, "0"}, &plan{abortGRPC: 1}},
		{"throughput", []string{hdrThroughput, "8"}, &plan{kbps: 8}},
		{"percentage zero", []string{hdrAbort, "503", hdrAbortPercent, "0"}, nil},
		{"percentage above configured", []string{hdrAbort, "503", hdrAbortPercent, "1000"}, &plan{abortStatus: 503}},
		{"no fault headers", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, kv := range [][]string{base, tt.hdr} {
				for i := 0; i+1 < len(kv); i += 2 {
					h.Set(kv[i], kv[i+1])
				}
			}
			x := &filter.Exchange{Request: &route.Request{Path: "/", Method: "GET", Header: h}, Downstream: filtertest.Routed{}}
			st := f.NewStream(x)
			if tt.want == nil {
				if st != nil {
					t.Fatalf("NewStream = %+v; want none", st.(*stream).plan)
				}
				return
			}
			if st == nil {
				t.Fatalf("NewStream = nil; want %+v", *tt.want)
			}
			if got := st.(*stream).plan; got != *tt.want {
				t.Errorf("plan = %+v; want %+v", got, *tt.want)
			}
			st.End()
		})
	}
	for _, hdr := range [][]string{{"X-Chaos", "1", hdrDownstreamNode, "other"}, {hdrDownstreamNode, "edge"}} {
		h := http.Header{hdrAbort: {"503"}}
		for i := 0; i+1 < len(hdr); i += 2 {
			h.Set(hdr[i], hdr[i+1])
		}
		if st := f.NewStream(&filter.Exchange{Request: &route.Request{Header: h}}); st != nil {
			t.Errorf("NewStream with %v = a fault; want none (node or header not matched)", hdr)
		}
	}
	if v := f.stats.ActiveFaults.Value(); v != 0 {
		t.Errorf("active_faults = %d after every stream ended; want 0", v)
	}
}

// TestResponsePacing: a 4 KiB/s limit holds 8 KiB of body back for two seconds in all, chunk
// by chunk.
func TestResponsePacing(t *testing.T) {
	f := New(&Settings{}, &filter.Context{})
	clock := time.Unix(100, 0)
	f.ctx.Now = func() time.Time { return clock }
	var slept time.Duration
	f.sleep = func(d time.Duration) { slept += d; clock = clock.Add(d) }
	s := &stream{f: f, kbps: 4}
	chunk := make([]byte, 1024)
	for range 8 {
		s.ResponseBody(chunk)
	}
	if slept != 2*time.Second {
		t.Errorf("slept %v for 8 KiB at 4 KiB/s; want 2s", slept)
	}
}

// BenchmarkFaultNoFault is the filter's cost for a request it does not fault (an abort
// configured for 0% of requests): the decision only.
func BenchmarkFaultNoFault(b *testing.B) {
	f, err := FromAny(fromYAML(b, "abort: {http_status: 503, percentage: {numerator: 0}}\n"), &filter.Context{})
	if err != nil {
		b.Fatal(err)
	}
	req := &route.Request{Path: "/", Method: "GET", Header: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		x := filter.Exchange{Request: req, Downstream: filtertest.Routed{}}
		if f.NewStream(&x) != nil || f.OnRequest(&x) != nil {
			b.Fatal("faulted")
		}
	}
}
