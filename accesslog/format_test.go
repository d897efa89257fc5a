package accesslog

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

func testEntry() *Entry {
	return &Entry{
		StartTime: time.Date(2016, 4, 15, 20, 17, 0, 310123456, time.UTC),
		Method:    "GET",
		Path:      "/api/v1/items?limit=10",
		Authority: "example.com",
		Scheme:    "http",
		RequestHeaders: http.Header{
			"User-Agent":      {"curl/8.0"},
			"X-Request-Id":    {"a1b2"},
			"X-Forwarded-For": {"10.0.0.1"},
			"X-Multi":         {"one", "two"},
		},
		ResponseHeaders:                http.Header{"X-Envoy-Upstream-Service-Time": {"12"}, "Content-Type": {"text/plain"}},
		ResponseTrailers:               http.Header{"Grpc-Status": {"0"}},
		Protocol:                       "HTTP/1.1",
		ResponseCode:                   200,
		ResponseCodeDetails:            "via_upstream",
		ResponseFlags:                  0,
		BytesReceived:                  5,
		BytesSent:                      1024,
		Duration:                       13*time.Millisecond + 600*time.Microsecond,
		RequestDuration:                1 * time.Millisecond,
		ResponseDuration:               12 * time.Millisecond,
		ResponseTxDuration:             time.Millisecond,
		DownstreamRemoteAddress:        "192.168.1.7:51000",
		DownstreamDirectRemoteAddress:  "192.168.1.7:51000",
		DownstreamLocalAddress:         "[::1]:10000",
		UpstreamHost:                   "127.0.0.1:8080",
		UpstreamLocalAddress:           "127.0.0.1:40000",
		UpstreamCluster:                "web",
		UpstreamTransportFailureReason: "",
		UpstreamRequestAttemptCount:    1,
		RequestedServerName:            "example.com",
		RouteName:                      "default",
		ConnectionID:                   42,
	}
}

func mustText(t *testing.T, format string, opts Options) *Formatter {
	t.Helper()
	f, err := ParseText(format, opts)
	if err != nil {
		t.Fatalf("ParseText(%q) error: %v", format, err)
	}
	return f
}

func TestOperators(t *testing.T) {
	full := testEntry()
	empty := &Entry{}
	flagged := &Entry{ResponseFlags: NoHealthyUpstream | UpstreamConnectionFailure | UpstreamRetryLimitExceeded}
	tests := []struct {
		format string
		entry  *Entry
		want   string
	}{
		{"%START_TIME%", full, "2016-04-15T20:17:00.310Z"},
		{"%START_TIME(%Y/%m/%dT%H:%M:%S%z %s)%", full, "2016/04/15T20:17:00+0000 1460751420"},
		{"%START_TIME(%s.%3f)%", full, "1460751420.310"},
		{"%START_TIME(%s.%6f)%", full, "1460751420.310123"},
		{"%START_TIME(%s.%9f)%", full, "1460751420.310123456"},
		{"%START_TIME(%f)%", full, "310123456"},
		{"%START_TIME(%E*S|%E6S|%Ez|%Z)%", full, "00.310123456|00.310123|+00:00|UTC"},
		{"%START_TIME(%a %b %e %T %Y %j %p %I %%)%", full, "Fri Apr 15 20:17:00 2016 106 PM 08 %"},
		{"%START_TIME(%F %D %R)%", full, "2016-04-15 04/15/16 20:17"},
		{"%START_TIME%", empty, "-"},
		{"%REQ(:METHOD)% %REQ(:PATH)% %REQ(:AUTHORITY)% %REQ(HOST)% %REQ(:SCHEME)%", full, "GET /api/v1/items?limit=10 example.com example.com http"},
		{"%REQ(user-agent)%", full, "curl/8.0"},
		{"%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%", full, "/api/v1/items?limit=10"},
		{"%REQ(X-NOPE?X-REQUEST-ID)%", full, "a1b2"},
		{"%REQ(X-MULTI)%", full, "one"},
		{"%REQ(USER-AGENT):4%", full, "curl"},
		{"%REQ(X-NOPE)%", full, "-"},
		{"%REQ_WITHOUT_QUERY(:PATH)%", full, "/api/v1/items"},
		{"%REQ_WITHOUT_QUERY(:PATH):7%", full, "/api/v1"},
		{"%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%", full, "12"},
		{"%RESP(CONTENT-TYPE)%", empty, "-"},
		{"%TRAILER(GRPC-STATUS)%", full, "0"},
		{"%PROTOCOL%", full, "HTTP/1.1"},
		{"%PROTOCOL%", empty, "-"},
		{"%RESPONSE_CODE%", full, "200"},
		{"%RESPONSE_CODE%", empty, "0"},
		{"%RESPONSE_CODE_DETAILS%", full, "via_upstream"},
		{"%RESPONSE_FLAGS%", full, "-"},
		{"%RESPONSE_FLAGS%", flagged, "UH,UF,URX"},
		{"%RESPONSE_FLAGS_LONG%", flagged, "NoHealthyUpstream,UpstreamConnectionFailure,UpstreamRetryLimitExceeded"},
		{"%RESPONSE_FLAGS_LONG%", empty, "-"},
		{"%BYTES_RECEIVED% %BYTES_SENT%", full, "5 1024"},
		{"%BYTES_RECEIVED% %BYTES_SENT%", empty, "0 0"},
		{"%DURATION% %REQUEST_DURATION% %RESPONSE_DURATION% %RESPONSE_TX_DURATION%", full, "13 1 12 1"},
		{"%DURATION% %REQUEST_DURATION%", empty, "- -"},
		{"%UPSTREAM_HOST% %UPSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%", full, "127.0.0.1:8080 127.0.0.1"},
		{"%UPSTREAM_CLUSTER%", full, "web"},
		{"%UPSTREAM_LOCAL_ADDRESS% %UPSTREAM_LOCAL_ADDRESS_WITHOUT_PORT%", full, "127.0.0.1:40000 127.0.0.1"},
		{"%UPSTREAM_TRANSPORT_FAILURE_REASON%", full, "-"},
		{"%UPSTREAM_TRANSPORT_FAILURE_REASON%", &Entry{UpstreamTransportFailureReason: "TLS_error"}, "TLS_error"},
		{"%UPSTREAM_REQUEST_ATTEMPT_COUNT%", full, "1"},
		{"%DOWNSTREAM_REMOTE_ADDRESS%", full, "192.168.1.7:51000"},
		{"%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT% %DOWNSTREAM_REMOTE_PORT%", full, "192.168.1.7 51000"},
		{"%DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT%", full, "192.168.1.7"},
		{"%DOWNSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT% %DOWNSTREAM_LOCAL_PORT%", full, "[::1]:10000 ::1 10000"},
		{"%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%", empty, "-"},
		{"%REQUESTED_SERVER_NAME%", full, "example.com"},
		{"%ROUTE_NAME%", full, "default"},
		{"%VIRTUAL_CLUSTER_NAME%", full, "-"},
		{"%CONNECTION_ID%", full, "42"},
		{"%CONNECTION_ID%", empty, "0"},
		{"%HOSTNAME%", empty, "node-1"},
		{"%ENVIRONMENT(ZONE)% %ENVIRONMENT(NOPE)% %ENVIRONMENT(ZONE):3%", empty, "us-east-1 - us-"},
		{"100%% of %PROTOCOL%", full, "100% of HTTP/1.1"},
		{"plain text", empty, "plain text"},
	}
	env := func(k string) (string, bool) {
		if k == "ZONE" {
			return "us-east-1", true
		}
		return "", false
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			f := mustText(t, tt.format, Options{Hostname: "node-1", LookupEnv: env})
			if got := string(f.Format(nil, tt.entry)); got != tt.want {
				t.Errorf("Format() = %q; want %q", got, tt.want)
			}
		})
	}
}

func TestDefaultFormat(t *testing.T) {
	f := mustText(t, DefaultFormat, Options{})
	e := testEntry()
	want := `[2016-04-15T20:17:00.310Z] "GET /api/v1/items?limit=10 HTTP/1.1" 200 - 5 1024 13 12 "10.0.0.1" "curl/8.0" "a1b2" "example.com" "127.0.0.1:8080"` + "\n"
	if got := string(f.Format(nil, e)); got != want {
		t.Errorf("Format() = %q; want %q", got, want)
	}
	e.RequestHeaders["X-Envoy-Original-Path"] = []string{"/orig"}
	if got := string(f.Format(nil, e)); !strings.Contains(got, `"GET /orig HTTP/1.1"`) {
		t.Errorf("Format() = %q; want the x-envoy-original-path", got)
	}
	want = `[-] "- - -" 0 - 0 0 - - "-" "-" "-" "-" "-"` + "\n"
	if got := string(f.Format(nil, &Entry{})); got != want {
		t.Errorf("Format(empty) = %q; want %q", got, want)
	}
}

func TestOmitEmptyText(t *testing.T) {
	f := mustText(t, "[%PROTOCOL%][%UPSTREAM_HOST%]", Options{OmitEmptyValues: true})
	if got := string(f.Format(nil, &Entry{Protocol: "HTTP/2"})); got != "[HTTP/2][]" {
		t.Errorf("Format() = %q; want %q", got, "[HTTP/2][]")
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		format, want string
	}{
		{"%FOO%", "unknown or unsupported operator FOO"},
		{"%PROTOCOL", "missing closing '%'"},
		{"100%", "must start an operator"},
		{"%REQ%", "needs a header name"},
		{"%REQ()%", "needs a header name"},
		{"%REQ(A?B?C)%", "more than 1 alternative header"},
		{"%REQ(A?)%", "empty header name"},
		{"%REQ(A", "missing ')'"},
		{"%REQ(A):x%", "length after ':' must be a positive integer"},
		{"%REQ(A):0%", "length after ':' must be a positive integer"},
		{"%PROTOCOL(x)%", "takes no arguments"},
		{"%ENVIRONMENT%", "needs a variable name"},
		{"%%%a", "must start an operator"},
		{"%DYNAMIC_METADATA%", "needs a namespace"},
		{"%DYNAMIC_METADATA(ns::k)%", "empty namespace or key"},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			_, err := ParseText(tt.format, Options{})
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("ParseText(%q) error = %v; want a *ParseError", tt.format, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseText(%q) error = %q; want it to contain %q", tt.format, err, tt.want)
			}
		})
	}
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestJSON(t *testing.T) {
	s := mustStruct(t, map[string]any{
		"code":     "%RESPONSE_CODE%",
		"method":   "%REQ(:METHOD)%",
		"missing":  "%REQ(X-NOPE)%",
		"dur":      "%DURATION%",
		"no_dur":   "%RESPONSE_TX_DURATION%",
		"mixed":    "%PROTOCOL% to %UPSTREAM_CLUSTER% via %REQ(X-NOPE)%",
		"quote":    "%REQ(X-QUOTE)%",
		"constant": "literal",
		"num":      1.5,
		"flag":     true,
		"nested":   map[string]any{"host": "%UPSTREAM_HOST%", "bytes": "%BYTES_SENT%"},
		"list":     []any{"%RESPONSE_CODE%", "%REQ(X-NOPE)%", 2.0},
	})
	e := testEntry()
	e.RequestHeaders["X-Quote"] = []string{"a\"b\\c\nd\x01é"}
	e.ResponseTxDuration = 0
	f, err := ParseJSON(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"code":200,"constant":"literal","dur":13,"flag":true,"list":[200,null,2],"method":"GET","missing":null,"mixed":"HTTP/1.1 to web via -","nested":{"bytes":1024,"host":"127.0.0.1:8080"},"no_dur":null,"num":1.5,"quote":"a\"b\\c\nd\u0001é"}` + "\n"
	if got := string(f.Format(nil, e)); got != want {
		t.Errorf("Format() =\n%s\nwant\n%s", got, want)
	}

	t.Run("omit_empty_values", func(t *testing.T) {
		for _, strs := range []bool{false, true} {
			f, err := ParseJSON(mustStruct(t, map[string]any{"a": "%REQ(X-NOPE)%", "b": "%PROTOCOL%", "c": "%DURATION%", "l": []any{"%DURATION%"}}), Options{OmitEmptyValues: true, JSONStrings: strs})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := string(f.Format(nil, &Entry{Protocol: "HTTP/2"})), `{"b":"HTTP/2","l":[]}`+"\n"; got != want {
				t.Errorf("Format(JSONStrings %v) = %q; want %q", strs, got, want)
			}
		}
	})
	t.Run("errors", func(t *testing.T) {
		for name, m := range map[string]map[string]any{
			"json_format.bad: access log format": {"bad": "%NOPE%"},
			"json_format.list[1].n: access log":  {"list": []any{"%PROTOCOL%", map[string]any{"n": "%X%"}}},
			"json_format.n.null: only strings":   {"n": map[string]any{"null": nil}},
		} {
			_, err := ParseJSON(mustStruct(t, m), Options{})
			if err == nil || !strings.HasPrefix(err.Error(), name) {
				t.Errorf("ParseJSON(%v) error = %v; want prefix %q", m, err, name)
			}
		}
	})
}

func TestFromProtos(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/fmt.txt"
	if err := writeFile(path, "%PROTOCOL% from file\n"); err != nil {
		t.Fatal(err)
	}
	e := &Entry{Protocol: "HTTP/2", ResponseCode: 204}
	tests := []struct {
		name string
		p    *filev3.FileAccessLog
		want string
	}{
		{"default", &filev3.FileAccessLog{}, `[-] "- - HTTP/2" 204 - 0 0 - - "-" "-" "-" "-" "-"` + "\n"},
		{"format", &filev3.FileAccessLog{AccessLogFormat: &filev3.FileAccessLog_Format{Format: "%RESPONSE_CODE%\n"}}, "204\n"},
		{"json_format renders strings", &filev3.FileAccessLog{AccessLogFormat: &filev3.FileAccessLog_JsonFormat{JsonFormat: mustStruct(t, map[string]any{"c": "%RESPONSE_CODE%", "h": "%UPSTREAM_HOST%"})}}, `{"c":"204","h":"-"}` + "\n"},
		{"typed_json_format", &filev3.FileAccessLog{AccessLogFormat: &filev3.FileAccessLog_TypedJsonFormat{TypedJsonFormat: mustStruct(t, map[string]any{"c": "%RESPONSE_CODE%", "h": "%UPSTREAM_HOST%"})}}, `{"c":204,"h":null}` + "\n"},
		{"log_format text", &filev3.FileAccessLog{AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
			Format: &corev3.SubstitutionFormatString_TextFormat{TextFormat: "[%UPSTREAM_HOST%]"}, OmitEmptyValues: true}}}, "[]"},
		{"log_format inline source", &filev3.FileAccessLog{AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
			Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "%PROTOCOL%"}}}}}}, "HTTP/2"},
		{"log_format file source", &filev3.FileAccessLog{AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
			Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: path}}}}}}, "HTTP/2 from file\n"},
		{"log_format json", &filev3.FileAccessLog{AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
			Format: &corev3.SubstitutionFormatString_JsonFormat{JsonFormat: mustStruct(t, map[string]any{"p": "%PROTOCOL%"})}}}}, `{"p":"HTTP/2"}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := FromFileAccessLog(tt.p, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := string(f.Format(nil, e)); got != tt.want {
				t.Errorf("Format() = %q; want %q", got, tt.want)
			}
		})
	}
	t.Run("error names the field", func(t *testing.T) {
		_, err := FromFileAccessLog(&filev3.FileAccessLog{AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
			Format: &corev3.SubstitutionFormatString_TextFormat{TextFormat: "%BAD%"}}}}, Options{})
		if err == nil || !strings.HasPrefix(err.Error(), "log_format.text_format: ") {
			t.Errorf("error = %v; want prefix log_format.text_format", err)
		}
		_, err = FromFileAccessLog(&filev3.FileAccessLog{AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
			Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: dir + "/none"}}}}}}, Options{})
		if err == nil || !strings.HasPrefix(err.Error(), "log_format.text_format_source.filename = ") {
			t.Errorf("error = %v; want prefix log_format.text_format_source.filename", err)
		}
	})
}

func TestFormatNoAllocs(t *testing.T) {
	f := mustText(t, DefaultFormat, Options{})
	js, err := ParseJSON(mustStruct(t, map[string]any{"a": "%REQ(:PATH)%", "b": "%RESPONSE_CODE%", "c": "x %PROTOCOL%"}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := testEntry()
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { buf = f.Format(buf[:0], e) }); n != 0 {
		t.Errorf("text Format allocations = %v; want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { buf = js.Format(buf[:0], e) }); n != 0 {
		t.Errorf("JSON Format allocations = %v; want 0", n)
	}
}

func benchFormat(b *testing.B, f *Formatter, err error) {
	if err != nil {
		b.Fatal(err)
	}
	e := testEntry()
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = f.Format(buf[:0], e)
	}
}

func BenchmarkFormatDefault(b *testing.B) {
	f, err := ParseText(DefaultFormat, Options{})
	benchFormat(b, f, err)
}

func BenchmarkFormatJSON(b *testing.B) {
	s, _ := structpb.NewStruct(map[string]any{
		"start": "%START_TIME%", "method": "%REQ(:METHOD)%", "path": "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%",
		"code": "%RESPONSE_CODE%", "flags": "%RESPONSE_FLAGS%", "dur": "%DURATION%", "ua": "%REQ(USER-AGENT)%",
		"upstream": "%UPSTREAM_HOST%",
	})
	f, err := ParseJSON(s, Options{})
	benchFormat(b, f, err)
}

func FuzzParseText(f *testing.F) {
	for _, s := range []string{DefaultFormat, "%START_TIME(%s.%3f)%", "%REQ(A?B):3%", "100%%", "%", "%REQ(", "%E%", "%START_TIME(%E*S%Ez%9f)%",
		"%FILTER_STATE(acme.tier)%", "%FILTER_STATE(acme.headers:FIELD:x-tunnel):3%", "%FILTER_STATE(k:PLAIN)%"} {
		f.Add(s)
	}
	e := testEntry()
	e.FilterState = filterStateEntry(f).FilterState
	f.Fuzz(func(t *testing.T, format string) {
		fm, err := ParseText(format, Options{Hostname: "h", LookupEnv: func(string) (string, bool) { return "", false }})
		if err != nil {
			return
		}
		fm.Format(nil, e)
		fm.Format(nil, &Entry{})
	})
}
