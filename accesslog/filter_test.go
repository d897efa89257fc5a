package accesslog

import (
	"net/http"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

func filterProto(t testing.TB, y string) *accesslogv3.AccessLogFilter {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	var pb accesslogv3.AccessLogFilter
	if err := protojson.Unmarshal(js, &pb); err != nil {
		t.Fatal(err)
	}
	return &pb
}

func TestFilterMatch(t *testing.T) {
	tcpEnd := &Entry{Type: TypeTCPConnectionEnd, Duration: 1500 * time.Millisecond, ResponseFlags: UpstreamConnectionFailure | UpstreamRetryLimitExceeded}
	tcpPeriodic := &Entry{Type: TypeTCPPeriodic, Duration: 10 * time.Millisecond}
	httpOK := &Entry{ResponseCode: 200, Duration: 3 * time.Millisecond}
	health := &Entry{ResponseCode: 200, HealthCheck: true}
	debug := &Entry{ResponseCode: 200, Path: "/api/v1", Authority: "www.example.com",
		RequestHeaders: http.Header{"X-Debug": {"on"}, "X-Tenant": {"a", "b"}, "X-N": {"7"}}}
	grpcTrailer := &Entry{ResponseCode: 200, ResponseHeaders: http.Header{"Grpc-Status": {"0"}}, ResponseTrailers: http.Header{"Grpc-Status": {"5"}}}
	grpcHeader := &Entry{ResponseCode: 200, ResponseHeaders: http.Header{"Grpc-Status": {"14"}}}
	runtime := func(key string, def uint64) uint64 {
		if key == "log.min_ms" {
			return 1000
		}
		return def
	}
	tests := []struct {
		name   string
		filter string
		entry  *Entry
		want   bool
	}{
		{"status code 0 for TCP", "{status_code_filter: {comparison: {op: EQ, value: {default_value: 0, runtime_key: k}}}}", tcpEnd, true},
		{"status code GE 400", "{status_code_filter: {comparison: {op: GE, value: {default_value: 400, runtime_key: k}}}}", httpOK, false},
		{"status code NE", "{status_code_filter: {comparison: {op: NE, value: {default_value: 404, runtime_key: k}}}}", httpOK, true},
		{"duration LE", "{duration_filter: {comparison: {op: LE, value: {default_value: 5, runtime_key: k}}}}", httpOK, true},
		{"duration from runtime", "{duration_filter: {comparison: {op: GE, value: {default_value: 1, runtime_key: log.min_ms}}}}", tcpPeriodic, false},
		{"duration runtime passes", "{duration_filter: {comparison: {op: GE, value: {default_value: 1, runtime_key: log.min_ms}}}}", tcpEnd, true},
		{"duration unknown", "{duration_filter: {comparison: {op: GE, value: {default_value: 0, runtime_key: k}}}}", &Entry{}, false},
		{"not health check", "{not_health_check_filter: {}}", health, false},
		{"not health check TCP", "{not_health_check_filter: {}}", tcpEnd, true},
		{"any flag", "{response_flag_filter: {}}", tcpEnd, true},
		{"any flag none set", "{response_flag_filter: {}}", tcpPeriodic, false},
		{"named flag", "{response_flag_filter: {flags: [UO, URX]}}", tcpEnd, true},
		{"other flag", "{response_flag_filter: {flags: [UO, NC]}}", tcpEnd, false},
		{"log type", "{log_type_filter: {types: [TcpConnectionEnd]}}", tcpEnd, true},
		{"log type other", "{log_type_filter: {types: [TcpConnectionEnd]}}", tcpPeriodic, false},
		{"log type exclude", "{log_type_filter: {types: [TcpPeriodic], exclude: true}}", tcpPeriodic, false},
		{"and", "{and_filter: {filters: [{log_type_filter: {types: [TcpConnectionEnd]}}, {response_flag_filter: {flags: [UF]}}]}}", tcpEnd, true},
		{"and fails", "{and_filter: {filters: [{log_type_filter: {types: [TcpPeriodic]}}, {response_flag_filter: {flags: [UF]}}]}}", tcpEnd, false},
		{"or", "{or_filter: {filters: [{log_type_filter: {types: [TcpPeriodic]}}, {response_flag_filter: {flags: [UF]}}]}}", tcpEnd, true},
		{"or fails", "{or_filter: {filters: [{log_type_filter: {types: [TcpPeriodic]}}, {response_flag_filter: {flags: [NC]}}]}}", tcpEnd, false},
		{"header present", "{header_filter: {header: {name: x-debug}}}", debug, true},
		{"header absent", "{header_filter: {header: {name: x-debug}}}", httpOK, false},
		{"header must be absent", "{header_filter: {header: {name: x-debug, present_match: false}}}", httpOK, true},
		{"header inverted presence", "{header_filter: {header: {name: x-debug, present_match: true, invert_match: true}}}", httpOK, true},
		{"header exact", "{header_filter: {header: {name: X-Debug, string_match: {exact: 'ON', ignore_case: true}}}}", debug, true},
		{"header values joined", "{header_filter: {header: {name: x-tenant, string_match: {exact: 'a,b'}}}}", debug, true},
		{"header prefix", "{header_filter: {header: {name: x-tenant, prefix_match: b}}}", debug, false},
		{"header regex", "{header_filter: {header: {name: ':path', safe_regex_match: {regex: '/api/.*'}}}}", debug, true},
		{"header regex whole value", "{header_filter: {header: {name: ':path', safe_regex_match: {regex: 'api'}}}}", debug, false},
		{"header range", "{header_filter: {header: {name: x-n, range_match: {start: 1, end: 10}}}}", debug, true},
		{"header inverted", "{header_filter: {header: {name: x-n, range_match: {start: 1, end: 10}, invert_match: true}}}", debug, false},
		{"header missing as empty", "{header_filter: {header: {name: x-none, string_match: {exact: ''}, treat_missing_header_as_empty: true}}}", debug, true},
		{"header authority", "{header_filter: {header: {name: host, suffix_match: .example.com}}}", debug, true},
		{"grpc trailer", "{grpc_status_filter: {statuses: [NOT_FOUND]}}", grpcTrailer, true},
		{"grpc trailer over header", "{grpc_status_filter: {statuses: [OK]}}", grpcTrailer, false},
		{"grpc header", "{grpc_status_filter: {statuses: [UNAVAILABLE]}}", grpcHeader, true},
		{"grpc from http status", "{grpc_status_filter: {statuses: [UNAVAILABLE, UNIMPLEMENTED]}}", &Entry{ResponseCode: 503}, true},
		{"grpc from 404", "{grpc_status_filter: {statuses: [UNIMPLEMENTED]}}", &Entry{ResponseCode: 404}, true},
		{"grpc from 200 is unknown", "{grpc_status_filter: {statuses: [UNKNOWN]}}", httpOK, true},
		{"grpc without response is unknown", "{grpc_status_filter: {statuses: [UNKNOWN]}}", tcpEnd, true},
		{"grpc exclude", "{grpc_status_filter: {statuses: [OK], exclude: true}}", grpcTrailer, true},
		{"grpc invalid code", "{grpc_status_filter: {statuses: [UNKNOWN]}}", &Entry{ResponseTrailers: http.Header{"Grpc-Status": {"99"}}}, false},
		{"grpc invalid code excluded", "{grpc_status_filter: {statuses: [UNKNOWN], exclude: true}}", &Entry{ResponseTrailers: http.Header{"Grpc-Status": {"x"}}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := FilterFromProto("filter", filterProto(t, tt.filter), FilterOptions{Runtime: runtime})
			if err != nil {
				t.Fatalf("FilterFromProto = %v", err)
			}
			if got := f.Match(tt.entry); got != tt.want {
				t.Errorf("Match(%+v) = %v; want %v", tt.entry, got, tt.want)
			}
		})
	}
	var none *Filter
	if !none.Match(tcpEnd) {
		t.Error("nil Filter: Match = false; want true")
	}
}

func TestFilterFromProtoErrors(t *testing.T) {
	tests := []struct {
		name, filter, want string
	}{
		{"runtime without key", "{runtime_filter: {percent_sampled: {numerator: 5}}}", `f.runtime_filter.runtime_key = ""; must not be empty`},
		{"runtime bad denominator", "{runtime_filter: {runtime_key: k, percent_sampled: {numerator: 5, denominator: 7}}}", "f.runtime_filter.percent_sampled.denominator = 7; must be HUNDRED, TEN_THOUSAND or MILLION"},
		{"traceable", "{traceable_filter: {}}", "f.traceable_filter: not implemented by Legate"},
		{"grpc status", "{grpc_status_filter: {statuses: [OK, 17]}}", "f.grpc_status_filter.statuses[1] = 17; not a gRPC status"},
		{"header without matcher", "{header_filter: {}}", "f.header_filter.header: is required"},
		{"header without name", "{header_filter: {header: {exact_match: x}}}", `f.header_filter.header.name = "": must not be empty`},
		{"header bad regex", "{header_filter: {header: {name: x, safe_regex_match: {regex: '('}}}}", "f.header_filter.header.safe_regex_match.regex = \"(\": invalid RE2: error parsing regexp: missing closing ): `(`"},
		{"header empty prefix", "{header_filter: {header: {name: x, string_match: {prefix: ''}}}}", `f.header_filter.header.string_match.prefix = "": must not be empty`},
		{"header range", "{header_filter: {header: {name: x, range_match: {start: 5, end: 5}}}}", "f.header_filter.header.range_match = [5, 5): start must be < end"},
		{"metadata", "{metadata_filter: {}}", "f.metadata_filter: not implemented by Legate"},
		{"extension", "{extension_filter: {name: x}}", "f.extension_filter: not implemented by Legate"},
		{"nested", "{or_filter: {filters: [{not_health_check_filter: {}}, {and_filter: {filters: [{not_health_check_filter: {}}, {traceable_filter: {}}]}}]}}",
			"f.or_filter.filters[1].and_filter.filters[1].traceable_filter: not implemented by Legate"},
		{"unknown flag", "{response_flag_filter: {flags: [UF, XX]}}", `f.response_flag_filter.flags[1] = "XX"; not a response flag`},
		{"one child", "{and_filter: {filters: [{not_health_check_filter: {}}]}}", "f.and_filter.filters has 1 items; must have at least 2"},
		{"empty child", "{or_filter: {filters: [{not_health_check_filter: {}}, {}]}}", "f.or_filter.filters[1]: filter_specifier is unset; one filter is required"},
		{"no value", "{duration_filter: {comparison: {op: GE}}}", "f.duration_filter.comparison.value: is required"},
		{"no comparison", "{status_code_filter: {}}", "f.status_code_filter.comparison: is required"},
		{"unset", "{}", "f: filter_specifier is unset; one filter is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FilterFromProto("f", filterProto(t, tt.filter), FilterOptions{})
			if err == nil || err.Error() != tt.want {
				t.Errorf("FilterFromProto = %v; want %q", err, tt.want)
			}
		})
	}
}

func TestAccessLogTypeOperator(t *testing.T) {
	f, err := ParseText("%ACCESS_LOG_TYPE% %RESPONSE_CODE% %PROTOCOL%", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		typ  Type
		want string
	}{
		{TypeNotSet, "NotSet 0 -"},
		{TypeTCPConnectionEnd, "TcpConnectionEnd 0 -"},
		{TypeTCPPeriodic, "TcpPeriodic 0 -"},
		{TypeTCPConnectionStart, "TcpConnectionStart 0 -"},
		{Type(200), "NotSet 0 -"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := string(f.Format(nil, &Entry{Type: tc.typ})); got != tc.want {
				t.Errorf("Format(type %d) = %q; want %q", tc.typ, got, tc.want)
			}
		})
	}
}

// FuzzFilterFromProto: any AccessLogFilter is compiled or refused with an error, never a panic,
// and a compiled one evaluates any entry.
func FuzzFilterFromProto(f *testing.F) {
	for _, y := range []string{
		"{and_filter: {filters: [{log_type_filter: {types: [TcpConnectionEnd]}}, {response_flag_filter: {flags: [UF]}}]}}",
		"{duration_filter: {comparison: {op: GE, value: {default_value: 5, runtime_key: k}}}}",
		"{runtime_filter: {runtime_key: k}}",
		"{header_filter: {header: {name: x-a, string_match: {prefix: a, ignore_case: true}, invert_match: true}}}",
		"{grpc_status_filter: {statuses: [OK, UNAVAILABLE], exclude: true}}",
	} {
		b, err := proto.Marshal(filterProto(f, y))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(3), uint64(1))
	}
	f.Fuzz(func(t *testing.T, b []byte, typ uint8, flags uint64) {
		var pb accesslogv3.AccessLogFilter
		if proto.Unmarshal(b, &pb) != nil {
			return
		}
		flt, err := FilterFromProto("f", &pb, FilterOptions{})
		if err != nil {
			return
		}
		flt.Match(&Entry{Type: Type(typ), ResponseFlags: ResponseFlags(flags), Duration: time.Second, ResponseCode: 200})
	})
}

// TestFilterBind: a filter compiled without runtime (as the config path compiles it) takes the
// runtime and randomness each logger binds, in nested filters too, and is itself unchanged.
func TestFilterBind(t *testing.T) {
	compiled, err := FilterFromProto("filter", filterProto(t, `{and_filter: {filters: [
		{duration_filter: {comparison: {op: GE, value: {default_value: 1, runtime_key: log.min_ms}}}},
		{runtime_filter: {runtime_key: log.sample, percent_sampled: {numerator: 100}, use_independent_randomness: true}}]}}`), FilterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	runtime := func(key string, def uint64) uint64 {
		switch key {
		case "log.min_ms":
			return 1000
		case "log.sample":
			return 50
		}
		return def
	}
	draw := uint64(70) // above the runtime's 50 %, below the configured 100 %
	bound := compiled.Bind(FilterOptions{Runtime: runtime, Random: func() uint64 { return draw }})
	long := &Entry{ResponseCode: 200, Duration: 2 * time.Second}
	short := &Entry{ResponseCode: 200, Duration: 3 * time.Millisecond}
	if bound.Match(short) {
		t.Errorf("bound Match(3ms) = true; want false: the runtime raises the minimum to 1000 ms")
	}
	if bound.Match(long) {
		t.Errorf("bound Match(2s) with draw 70 = true; want false: the runtime samples 50 %%")
	}
	draw = 30
	if !bound.Match(long) {
		t.Errorf("bound Match(2s) with draw 30 = false; want true")
	}
	if !compiled.Match(short) {
		t.Errorf("unbound Match(3ms) = false; want true: Bind must not change the compiled filter")
	}
	if (*Filter)(nil).Bind(FilterOptions{Runtime: runtime}) != nil {
		t.Errorf("nil.Bind() != nil")
	}
}
