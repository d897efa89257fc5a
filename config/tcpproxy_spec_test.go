package config

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"

	"github.com/legateproxy/legate/accesslog"

	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
)

func tcpProxyProto(t testing.TB, y string) *tcpproxyv3.TcpProxy {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	var p tcpproxyv3.TcpProxy
	if err := protojson.Unmarshal(js, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func TestTCPProxyFromProto(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want TCPProxy
	}{
		{
			name: "defaults",
			yaml: "{stat_prefix: tcp, cluster: up}",
			want: TCPProxy{StatPrefix: "tcp", Cluster: "up", IdleTimeout: time.Hour, MaxConnectAttempts: 1},
		},
		{
			name: "weighted clusters and timeouts",
			yaml: `{stat_prefix: w, weighted_clusters: {clusters: [{name: a, weight: 1}, {name: b, weight: 3}]},
idle_timeout: 0s, max_connect_attempts: 3, max_downstream_connection_duration: 2s}`,
			want: TCPProxy{StatPrefix: "w", WeightedClusters: []TCPClusterWeight{{"a", 1}, {"b", 3}}, TotalWeight: 4,
				MaxConnectAttempts: 3, MaxDownstreamConnectionDuration: 2 * time.Second},
		},
		{
			name: "access log options",
			yaml: `{stat_prefix: t, cluster: up, access_log_options: {access_log_flush_interval: 0.5s, flush_access_log_on_connected: true, flush_access_log_on_start: true}}`,
			want: TCPProxy{StatPrefix: "t", Cluster: "up", IdleTimeout: time.Hour, MaxConnectAttempts: 1,
				AccessLogFlushInterval: 500 * time.Millisecond, FlushAccessLogOnConnected: true, FlushAccessLogOnStart: true},
		},
		{
			name: "deprecated access log fields",
			yaml: `{stat_prefix: t, cluster: up, access_log_flush_interval: 2s, flush_access_log_on_connected: true}`,
			want: TCPProxy{StatPrefix: "t", Cluster: "up", IdleTimeout: time.Hour, MaxConnectAttempts: 1,
				AccessLogFlushInterval: 2 * time.Second, FlushAccessLogOnConnected: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := TCPProxyFromProto(tcpProxyProto(t, tt.yaml))
			if err != nil {
				t.Fatalf("TCPProxyFromProto = %v; want nil", err)
			}
			if d := cmp.Diff(&tt.want, got, cmpopts.IgnoreFields(TCPProxy{}, "Proto")); d != "" {
				t.Errorf("TCPProxyFromProto (-want +got):\n%s", d)
			}
		})
	}
}

func TestTCPProxyFromProtoErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"no stat prefix", "{cluster: up}", `stat_prefix = ""; must not be empty`},
		{"no cluster", "{stat_prefix: t}", "one of cluster or weighted_clusters is required"},
		{"empty weighted", "{stat_prefix: t, weighted_clusters: {}}", "must have at least 1 item"},
		{"zero weights", "{stat_prefix: t, weighted_clusters: {clusters: [{name: a}]}}", "total weight = 0"},
		{"unnamed weighted", "{stat_prefix: t, weighted_clusters: {clusters: [{weight: 1}]}}", `clusters[0].name = ""`},
		{"zero attempts", "{stat_prefix: t, cluster: a, max_connect_attempts: 0}", "max_connect_attempts = 0; must be >= 1"},
		{"tunnel without hostname", "{stat_prefix: t, cluster: a, tunneling_config: {use_post: true}}", `tunneling_config.hostname = ""`},
		{"tunnel request id", "{stat_prefix: t, cluster: a, tunneling_config: {hostname: x, request_id_extension: {}}}",
			"tunneling_config.request_id_extension is set; not implemented by Legate"},
		{"tunnel post path without post", "{stat_prefix: t, cluster: a, tunneling_config: {hostname: x, post_path: /p}}",
			`tunneling_config.post_path = "/p" without use_post`},
		{"tunnel relative post path", "{stat_prefix: t, cluster: a, tunneling_config: {hostname: x, use_post: true, post_path: p}}",
			`tunneling_config.post_path = "p"; must be an absolute path`},
		{"tunnel bad hostname format", "{stat_prefix: t, cluster: a, tunneling_config: {hostname: '%NOPE%'}}", "tunneling_config.hostname: access log format"},
		{"tunnel host header", "{stat_prefix: t, cluster: a, tunneling_config: {hostname: x, headers_to_add: [{header: {key: host, value: v}}]}}",
			"tunneling_config.headers_to_add[0].header.key = \"host\"; pseudo-headers and host may not be modified"},
		{"access log without typed_config", "{stat_prefix: t, cluster: a, access_log: [{name: envoy.access_loggers.file}]}",
			`tcp_proxy "t": access_log[0].typed_config is unset`},
		{"nested refused filter", `{stat_prefix: t, cluster: a, access_log: [{name: f, typed_config: {"@type": "` + fileLogType + `", path: /dev/null},
filter: {and_filter: {filters: [{not_health_check_filter: {}}, {metadata_filter: {}}]}}}]}`,
			`tcp_proxy "t": access_log[0].filter.and_filter.filters[1].metadata_filter: not implemented by Legate`},
		{"traceable filter", `{stat_prefix: t, cluster: a, access_log: [{name: f, typed_config: {"@type": "` + fileLogType + `", path: /dev/null},
filter: {traceable_filter: {}}}]}`,
			`access_log[0].filter.traceable_filter: not implemented by Legate`},
		{"bad header filter", `{stat_prefix: t, cluster: a, access_log: [{name: f, typed_config: {"@type": "` + fileLogType + `", path: /dev/null},
filter: {header_filter: {header: {name: x, range_match: {start: 2, end: 1}}}}}]}`,
			`access_log[0].filter.header_filter.header.range_match = [2, 1): start must be < end`},
		{"options and deprecated interval", "{stat_prefix: t, cluster: a, access_log_flush_interval: 1s, access_log_options: {}}",
			"access_log_flush_interval and access_log_options are both set"},
		{"options and deprecated on connected", "{stat_prefix: t, cluster: a, flush_access_log_on_connected: true, access_log_options: {}}",
			"flush_access_log_on_connected and access_log_options are both set"},
		{"interval too short", "{stat_prefix: t, cluster: a, access_log_options: {access_log_flush_interval: 0.0001s}}",
			"access_log_options.access_log_flush_interval = 100µs; must be >= 1ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := TCPProxyFromProto(tcpProxyProto(t, tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("TCPProxyFromProto = %v; want an error containing %q", err, tt.want)
			}
		})
	}
}

const fileLogType = "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog"

func TestTCPProxyAccessLogs(t *testing.T) {
	got, err := TCPProxyFromProto(tcpProxyProto(t, `{stat_prefix: t, cluster: a, access_log: [
{name: f, typed_config: {"@type": "`+fileLogType+`", path: /tmp/x}, filter: {response_flag_filter: {flags: [UF]}}},
{name: g, typed_config: {"@type": "`+fileLogType+`", path: /tmp/y}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, al := range got.AccessLogs {
		names = append(names, fmt.Sprintf("%s %s filter=%v", al.Name, al.TypedConfig.GetTypeUrl(), al.Filter != nil))
	}
	want := []string{"f " + fileLogType + " filter=true", "g " + fileLogType + " filter=false"}
	if d := cmp.Diff(want, names); d != "" {
		t.Errorf("AccessLogs (-want +got):\n%s", d)
	}
}

// TestTCPProxyFilterDecodes: on the configuration path a tcp_proxy network filter's
// typed_config becomes a *TCPProxy; a missing one is refused for its empty stat_prefix, and
// one of another type is refused naming both types.
func TestTCPProxyFilterDecodes(t *testing.T) {
	ext := Limits{}.extensions()
	a, err := anypb.New(tcpProxyProto(t, "{stat_prefix: s, cluster: c}"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeNetworkFilter(ext, TCPProxyFilter, a)
	if p, ok := got.(*TCPProxy); err != nil || !ok || p.Cluster != "c" {
		t.Fatalf("decodeNetworkFilter = %+v, %v; want a *TCPProxy with cluster c", got, err)
	}
	if _, err := decodeNetworkFilter(ext, TCPProxyFilter, nil); err == nil || !strings.Contains(err.Error(), "stat_prefix") {
		t.Errorf("decodeNetworkFilter(nil) = %v; want the stat_prefix check's error", err)
	}
	other, _ := anypb.New(a) // an Any holding an Any: wrong type
	if _, err := decodeNetworkFilter(ext, TCPProxyFilter, other); err == nil || !strings.Contains(err.Error(), "google.protobuf.Any") {
		t.Errorf("decodeNetworkFilter(wrong type) = %v; want an error naming the type", err)
	}
}

// FuzzTCPProxyFilter checks that no input panics the network filter's decoding.
func FuzzTCPProxyFilter(f *testing.F) {
	a, _ := anypb.New(&tcpproxyv3.TcpProxy{StatPrefix: "s", ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: "c"}})
	f.Add(a.GetValue())
	logged, _ := anypb.New(tcpProxyProto(f, `{stat_prefix: s, cluster: c, access_log_options: {access_log_flush_interval: 1s}, access_log: [
{name: f, typed_config: {"@type": "`+fileLogType+`", path: /tmp/x}, filter: {or_filter: {filters: [{response_flag_filter: {flags: [UF]}}, {runtime_filter: {runtime_key: k}}]}}}]}`))
	f.Add(logged.GetValue())
	ext := Limits{}.extensions()
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeNetworkFilter(ext, TCPProxyFilter, &anypb.Any{TypeUrl: TCPProxyTypeURL, Value: b})
	})
}

func TestTCPProxyTunnelingConfig(t *testing.T) {
	got, err := TCPProxyFromProto(tcpProxyProto(t, `{stat_prefix: t, cluster: up, tunneling_config: {
hostname: "host-%DOWNSTREAM_LOCAL_PORT%:443", use_post: true,
headers_to_add: [{header: {key: X-Port, value: "%DOWNSTREAM_LOCAL_PORT%"}}, {header: {key: x-e, value: ""}, keep_empty_value: true, append_action: OVERWRITE_IF_EXISTS_OR_ADD}]}}`))
	if err != nil {
		t.Fatalf("TCPProxyFromProto = %v; want nil", err)
	}
	tun := got.Tunnel
	if tun == nil || !tun.UsePost || tun.PostPath != "/" || len(tun.Headers) != 2 {
		t.Fatalf("Tunnel = %+v; want use_post with post_path / and 2 headers", tun)
	}
	e := accesslog.Entry{DownstreamLocalAddress: "127.0.0.1:8443"}
	if h := string(tun.Hostname.Format(nil, &e)); h != "host-8443:443" {
		t.Errorf("hostname formats to %q; want host-8443:443", h)
	}
	h0, h1 := tun.Headers[0], tun.Headers[1]
	if h0.Key != "x-port" || string(h0.Value.Format(nil, &e)) != "8443" || h0.Action != AppendIfExistsOrAdd {
		t.Errorf("headers_to_add[0] = %+v; want x-port: 8443, appended", h0)
	}
	if h1.Key != "x-e" || !h1.KeepEmptyValue || h1.Action != OverwriteIfExistsOrAdd {
		t.Errorf("headers_to_add[1] = %+v; want x-e kept empty, overwriting", h1)
	}
}
