package config

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"
)

func healthCheckYAML(t testing.TB, y string) *corev3.HealthCheck {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatalf("YAMLToJSON: %v", err)
	}
	var hc corev3.HealthCheck
	if err := protojson.Unmarshal(j, &hc); err != nil {
		t.Fatalf("decode HealthCheck: %v", err)
	}
	return &hc
}

const hcBase = "timeout: 1s\ninterval: 5s\nunhealthy_threshold: 3\nhealthy_threshold: 2\n"

func TestHealthCheckDefaults(t *testing.T) {
	got, err := HealthCheckFromProto(healthCheckYAML(t, hcBase+"http_health_check: {path: /hc}"))
	if err != nil {
		t.Fatalf("HealthCheckFromProto: %v", err)
	}
	want := &HealthCheck{
		Timeout:                  time.Second,
		Interval:                 5 * time.Second,
		UnhealthyThreshold:       3,
		HealthyThreshold:         2,
		ReuseConnection:          true,
		NoTrafficInterval:        60 * time.Second,
		NoTrafficHealthyInterval: 60 * time.Second,
		UnhealthyInterval:        5 * time.Second,
		UnhealthyEdgeInterval:    5 * time.Second,
		HealthyEdgeInterval:      5 * time.Second,
		Kind:                     HTTPHealthCheckKind,
		HTTP: &HTTPHealthCheck{
			Path:               "/hc",
			Method:             "GET",
			ResponseBufferSize: 1024,
			ExpectedStatuses:   []StatusRange{{200, 201}},
		},
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(HealthCheck{}, "Proto")); diff != "" {
		t.Errorf("HealthCheckFromProto (-want +got):\n%s", diff)
	}
}

func TestHealthCheckFields(t *testing.T) {
	got, err := HealthCheckFromProto(healthCheckYAML(t, hcBase+`
initial_jitter: 2s
interval_jitter: 0.5s
interval_jitter_percent: 10
reuse_connection: false
no_traffic_interval: 30s
no_traffic_healthy_interval: 40s
unhealthy_interval: 7s
healthy_edge_interval: 1s
event_log_path: /tmp/hc.log
always_log_health_check_failures: true
tls_options: {alpn_protocols: [h2]}
http_health_check:
  host: svc.local
  path: /healthz
  method: POST
  send: {text: "7069"}
  receive: [{text: "6f6b"}, {binary: "IQ=="}]
  response_buffer_size: 0
  request_headers_to_add:
  - header: {key: X-A, value: "1"}
  - header: {key: x-b, value: "2"}
    append: false
  - header: {key: x-c, value: ""}
    append_action: ADD_IF_ABSENT
    keep_empty_value: true
  request_headers_to_remove: [x-drop]
  expected_statuses: [{start: 200, end: 300}]
  retriable_statuses: [{start: 503, end: 504}]
  codec_client_type: HTTP2
  service_name_matcher: {prefix: web}
`))
	if err != nil {
		t.Fatalf("HealthCheckFromProto: %v", err)
	}
	if got.InitialJitter != 2*time.Second || got.IntervalJitter != 500*time.Millisecond || got.IntervalJitterPercent != 10 {
		t.Errorf("jitter = %v, %v, %d%%; want 2s, 500ms, 10%%", got.InitialJitter, got.IntervalJitter, got.IntervalJitterPercent)
	}
	if got.ReuseConnection || got.NoTrafficInterval != 30*time.Second || got.NoTrafficHealthyInterval != 40*time.Second {
		t.Errorf("reuse/no-traffic = %v, %v, %v; want false, 30s, 40s", got.ReuseConnection, got.NoTrafficInterval, got.NoTrafficHealthyInterval)
	}
	if got.UnhealthyInterval != 7*time.Second || got.UnhealthyEdgeInterval != 7*time.Second || got.HealthyEdgeInterval != time.Second {
		t.Errorf("edge intervals = %v, %v, %v; want 7s, 7s (unhealthy_interval), 1s", got.UnhealthyInterval, got.UnhealthyEdgeInterval, got.HealthyEdgeInterval)
	}
	if got.EventLogPath != "/tmp/hc.log" || !got.AlwaysLogHealthCheckFailures || !cmp.Equal(got.TLSALPN, []string{"h2"}) {
		t.Errorf("logging/tls = %q, %v, %v", got.EventLogPath, got.AlwaysLogHealthCheckFailures, got.TLSALPN)
	}
	wantHTTP := &HTTPHealthCheck{
		Host:               "svc.local",
		Path:               "/healthz",
		Method:             "POST",
		Send:               []byte("pi"),
		Receive:            [][]byte{[]byte("ok"), []byte("!")},
		ResponseBufferSize: 0,
		RequestHeadersToAdd: []HeaderToAdd{
			{Key: "x-a", Value: "1", Action: AppendIfExistsOrAdd},
			{Key: "x-b", Value: "2", Action: OverwriteIfExistsOrAdd},
			{Key: "x-c", Value: "", Action: AddIfAbsent, KeepEmptyValue: true},
		},
		RequestHeadersToRemove: []string{"x-drop"},
		ExpectedStatuses:       []StatusRange{{200, 300}},
		RetriableStatuses:      []StatusRange{{503, 504}},
		HTTP2:                  true,
	}
	if diff := cmp.Diff(wantHTTP, got.HTTP, cmpopts.IgnoreFields(HTTPHealthCheck{}, "ServiceNameMatcher")); diff != "" {
		t.Errorf("HTTP (-want +got):\n%s", diff)
	}
	if m := got.HTTP.ServiceNameMatcher; m == nil || !m.Match("web-prod") || m.Match("api") {
		t.Errorf("service_name_matcher prefix web: want match web-prod and not api")
	}
}

func TestHealthCheckTCPAndGRPC(t *testing.T) {
	tcp, err := HealthCheckFromProto(healthCheckYAML(t, hcBase+`tcp_health_check: {send: {text: "50494e47"}, receive: [{text: "504f4e47"}]}`))
	if err != nil {
		t.Fatalf("tcp: %v", err)
	}
	if diff := cmp.Diff(&TCPHealthCheck{Send: []byte("PING"), Receive: [][]byte{[]byte("PONG")}}, tcp.TCP); diff != "" {
		t.Errorf("TCP (-want +got):\n%s", diff)
	}
	// Envoy writes only a hex text send; a binary one is ignored.
	bin, err := HealthCheckFromProto(healthCheckYAML(t, hcBase+`tcp_health_check: {send: {binary: "UElORw=="}}`))
	if err != nil {
		t.Fatalf("tcp binary: %v", err)
	}
	if bin.TCP.Send != nil {
		t.Errorf("TCP.Send = %q for a binary send; want nil", bin.TCP.Send)
	}
	g, err := HealthCheckFromProto(healthCheckYAML(t, hcBase+`grpc_health_check: {service_name: svc, authority: a.example, initial_metadata: [{header: {key: x-md, value: v}}]}`))
	if err != nil {
		t.Fatalf("grpc: %v", err)
	}
	want := &GRPCHealthCheck{ServiceName: "svc", Authority: "a.example", InitialMetadata: []HeaderToAdd{{Key: "x-md", Value: "v"}}}
	if diff := cmp.Diff(want, g.GRPC); diff != "" || g.Kind != GRPCHealthCheckKind || g.Kind.String() != "GRPC" {
		t.Errorf("GRPC kind %v (-want +got):\n%s", g.Kind, diff)
	}
}

func TestHealthCheckErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"no timeout", "interval: 1s\nunhealthy_threshold: 1\nhealthy_threshold: 1\ntcp_health_check: {}", "timeout = 0s; must be set and > 0"},
		{"no interval", "timeout: 1s\nunhealthy_threshold: 1\nhealthy_threshold: 1\ntcp_health_check: {}", "interval = 0s; must be set and > 0"},
		{"no unhealthy threshold", "timeout: 1s\ninterval: 1s\nhealthy_threshold: 1\ntcp_health_check: {}", "unhealthy_threshold is unset"},
		{"no healthy threshold", "timeout: 1s\ninterval: 1s\nunhealthy_threshold: 1\ntcp_health_check: {}", "healthy_threshold is unset"},
		{"zero edge interval", hcBase + "healthy_edge_interval: 0s\ntcp_health_check: {}", "healthy_edge_interval = 0s; must be > 0"},
		{"no checker", hcBase, "health_checker is unset"},
		{"custom", hcBase + "custom_health_check: {name: envoy.health_checkers.redis}", `custom_health_check.name = "envoy.health_checkers.redis"; custom health checkers are not supported`},
		{"empty path", hcBase + "http_health_check: {host: a}", "http_health_check.path is empty"},
		{"bad hex", hcBase + "tcp_health_check: {send: {text: zz}, receive: [{text: '01'}]}", `tcp_health_check.send[0].text = "zz"; not a non-empty hex string`},
		{"odd hex", hcBase + "tcp_health_check: {receive: [{text: '012'}]}", `tcp_health_check.receive[0].text = "012"`},
		{"range order", hcBase + "http_health_check: {path: /, expected_statuses: [{start: 300, end: 200}]}", "expected_statuses[0] = [300, 200); start must be < end"},
		{"range low", hcBase + "http_health_check: {path: /, expected_statuses: [{start: 99, end: 200}]}", "expected_statuses[0].start = 99; must be >= 100"},
		{"range high", hcBase + "http_health_check: {path: /, retriable_statuses: [{start: 500, end: 601}]}", "retriable_statuses[0].end = 601; must be <= 600"},
		{"send with GET", hcBase + "http_health_check: {path: /, send: {text: '00'}}", "send is set with method GET"},
		{"connect", hcBase + "http_health_check: {path: /, method: CONNECT}", "method = CONNECT; not allowed"},
		{"http3", hcBase + "http_health_check: {path: /, codec_client_type: HTTP3}", "codec_client_type = HTTP3; only HTTP1 and HTTP2"},
		{"receive too big", hcBase + "http_health_check: {path: /, response_buffer_size: 1, receive: [{text: '0102'}]}", "receive totals 2 bytes; must be <= response_buffer_size (1)"},
		{"host header", hcBase + "http_health_check: {path: /, request_headers_to_add: [{header: {key: Host, value: x}}]}", `request_headers_to_add[0].header.key = "host"; pseudo-headers and host may not be modified`},
		{"bad regex", hcBase + "http_health_check: {path: /, service_name_matcher: {safe_regex: {regex: '('}}}", "service_name_matcher.safe_regex.regex"},
		{"proxy protocol", hcBase + "tcp_health_check: {proxy_protocol_config: {}}", "proxy_protocol_config is set; not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := HealthCheckFromProto(healthCheckYAML(t, tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("HealthCheckFromProto error = %v; want one containing %q", err, tc.want)
			}
			if !errors.Is(err, ErrHealthCheck) {
				t.Errorf("error %v does not wrap ErrHealthCheck", err)
			}
		})
	}
	if _, err := HealthCheckFromProto(nil); err == nil {
		t.Errorf("HealthCheckFromProto(nil) = nil error; want one")
	}
}

func TestStringMatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    StringMatch
		in   string
		want bool
	}{
		{"exact", StringMatch{Exact: "Web", kind: matchExact}, "Web", true},
		{"exact case", StringMatch{Exact: "Web", kind: matchExact}, "web", false},
		{"exact ignore case", StringMatch{Exact: "Web", kind: matchExact, IgnoreCase: true}, "wEB", true},
		{"prefix", StringMatch{Prefix: "we", kind: matchPrefix}, "web", true},
		{"suffix ignore case", StringMatch{Suffix: "EB", kind: matchSuffix, IgnoreCase: true}, "web", true},
		{"contains", StringMatch{Contains: "e", kind: matchContains}, "web", true},
		{"regex whole", StringMatch{Regex: regexp.MustCompile("^(?:w.)$"), kind: matchRegex}, "web", false},
		{"regex", StringMatch{Regex: regexp.MustCompile("^(?:w.b)$"), kind: matchRegex}, "web", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.m.Match(tc.in); got != tc.want {
				t.Errorf("Match(%q) = %v; want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestDecodeHex(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    string
		wantErr bool
	}{
		{"", "", false},
		{"00ff7F", "\x00\xff\x7f", false},
		{"0", "", true},
		{"0g", "", true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := DecodeHex(tc.in)
			if (err != nil) != tc.wantErr || string(got) != tc.want {
				t.Errorf("DecodeHex(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func FuzzHealthCheckFromProto(f *testing.F) {
	f.Add([]byte(`{"timeout":"1s","interval":"1s","unhealthyThreshold":1,"healthyThreshold":1,"httpHealthCheck":{"path":"/","expectedStatuses":[{"start":200,"end":300}]}}`))
	f.Add([]byte(`{"timeout":"1s","interval":"1s","unhealthyThreshold":1,"healthyThreshold":1,"tcpHealthCheck":{"send":{"text":"00"},"receive":[{"binary":"AA=="}]}}`))
	f.Add([]byte(`{"timeout":"1s","interval":"1s","unhealthyThreshold":1,"healthyThreshold":1,"grpcHealthCheck":{"serviceName":"s"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var hc corev3.HealthCheck
		if protojson.Unmarshal(data, &hc) != nil {
			return
		}
		s, err := HealthCheckFromProto(&hc)
		if err != nil {
			return
		}
		if s.Timeout <= 0 || s.Interval <= 0 {
			t.Errorf("accepted timeout %v interval %v", s.Timeout, s.Interval)
		}
		if s.HTTP != nil && len(s.HTTP.ExpectedStatuses) == 0 {
			t.Errorf("HTTP check without expected statuses")
		}
	})
}

func FuzzDecodeHex(f *testing.F) {
	f.Add("00ff")
	f.Add("zz")
	f.Fuzz(func(t *testing.T, s string) {
		b, err := DecodeHex(s)
		if err == nil && len(b)*2 != len(s) {
			t.Errorf("DecodeHex(%q) = %d bytes; want %d", s, len(b), len(s)/2)
		}
	})
}
