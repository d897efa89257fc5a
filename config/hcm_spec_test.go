package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/testing/protocmp"
	"sigs.k8s.io/yaml"

	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/health_check/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"

	"github.com/legateproxy/legate/accesslog"
)

func hcmFromYAML(t *testing.T, y string) *hcmv3.HttpConnectionManager {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	var pb hcmv3.HttpConnectionManager
	if err := protojson.Unmarshal(j, &pb); err != nil {
		t.Fatal(err)
	}
	return &pb
}

// accessLogFilterYAML is an access log filter with the HTTP-only header and grpc_status
// filters.
const accessLogFilterYAML = "{and_filter: {filters: [{header_filter: {header: {name: x-debug}}}, {grpc_status_filter: {statuses: [UNAVAILABLE]}}]}}"

// accessLogFilter compiles the access-log filter in YAML y, as the config path does.
func accessLogFilter(t *testing.T, y string) *accesslog.Filter {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	var pb accesslogv3.AccessLogFilter
	if err := protojson.Unmarshal(j, &pb); err != nil {
		t.Fatal(err)
	}
	f, err := accesslog.FilterFromProto("access_log[0].filter", &pb, accesslog.FilterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// defaultsWith is the configuration of a connection manager with stat_prefix "ingress" and
// every default, changed by change.
func defaultsWith(change func(h *HTTPConnectionManager)) *HTTPConnectionManager {
	h := &HTTPConnectionManager{
		StatPrefix: "ingress", Codec: CodecAuto, ServerName: "envoy", GenerateRequestID: true,
		HTTPFilters: []HTTPFilter{{Name: routerFilterName}}, IdleTimeout: time.Hour,
		MaxHeadersCount: 100, MaxRequestHeadersKB: 60, StreamIdleTimeout: 5 * time.Minute,
		DrainTimeout: 5 * time.Second, HTTP2MaxConcurrentStreams: 2147483647,
		HTTP2InitialStreamWindowSize: 256 << 20, HTTP2InitialConnectionWindowSize: 256 << 20,
	}
	change(h)
	return h
}

func TestHTTPConnectionManagerFromProto(t *testing.T) {
	const routes = "route_config: {virtual_hosts: [{name: a, domains: ['*']}]}\n"
	tests := []struct {
		name string
		yaml string
		want *HTTPConnectionManager
		err  string
	}{
		{
			name: "defaults",
			yaml: "stat_prefix: ingress\n" + routes,
			want: defaultsWith(func(*HTTPConnectionManager) {}),
		},
		{
			name: "explicit",
			yaml: `stat_prefix: s
codec_type: HTTP2
server_name: me
server_header_transformation: APPEND_IF_ABSENT
use_remote_address: true
generate_request_id: false
common_http_protocol_options: {idle_timeout: 2s, max_requests_per_connection: 3, max_headers_count: 10}
stream_idle_timeout: 0s
max_request_headers_kb: 8
http2_protocol_options: {max_concurrent_streams: 7}
http_filters:
- name: envoy.filters.http.health_check
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.health_check.v3.HealthCheck, pass_through_mode: false}
- name: envoy.filters.http.router
` + routes,
			want: &HTTPConnectionManager{
				StatPrefix: "s", Codec: CodecHTTP2, ServerName: "me", ServerHeader: ServerHeaderAppendIfAbsent,
				UseRemoteAddress: true, IdleTimeout: 2 * time.Second, MaxRequestsPerConnection: 3,
				MaxHeadersCount: 10, MaxRequestHeadersKB: 8, DrainTimeout: 5 * time.Second,
				HTTP2MaxConcurrentStreams: 7, HTTP2InitialStreamWindowSize: 256 << 20, HTTP2InitialConnectionWindowSize: 256 << 20,
				HTTPFilters: []HTTPFilter{{Name: "envoy.filters.http.health_check"}, {Name: routerFilterName}},
			},
		},
		{name: "no stat prefix", yaml: routes, err: `stat_prefix = ""`},
		{name: "rds", yaml: "stat_prefix: s\nrds: {route_config_name: r}\n", err: "rds: not implemented"},
		{name: "no routes", yaml: "stat_prefix: s\n", err: "route_config is required"},
		{name: "router not last", yaml: "stat_prefix: s\n" + routes + "http_filters: [{name: envoy.filters.http.router}, {name: x}]\n", err: "the router must be the last filter"},
		{name: "last not router", yaml: "stat_prefix: s\n" + routes + "http_filters: [{name: x}]\n", err: "the last filter must be envoy.filters.http.router"},
		{name: "headers kb", yaml: "stat_prefix: s\nmax_request_headers_kb: 9000\n" + routes, err: "max_request_headers_kb = 9000"},
		{
			name: "access log filter",
			yaml: "stat_prefix: s\n" + routes + "access_log: [{name: envoy.access_loggers.file, filter: " + accessLogFilterYAML + "}]\n",
			want: defaultsWith(func(h *HTTPConnectionManager) {
				h.StatPrefix = "s"
				h.AccessLogs = []AccessLog{{Name: "envoy.access_loggers.file", Filter: accessLogFilter(t, accessLogFilterYAML)}}
			}),
		},
		{
			name: "upgrade configs",
			yaml: "stat_prefix: s\n" + routes + "upgrade_configs: [{upgrade_type: websocket}, {upgrade_type: CONNECT, enabled: false}]\nhttp2_protocol_options: {allow_connect: true}\n",
			want: defaultsWith(func(h *HTTPConnectionManager) {
				h.StatPrefix = "s"
				h.HTTP2AllowConnect = true
				h.UpgradeConfigs = []UpgradeConfig{{Type: "websocket", Enabled: true}, {Type: "CONNECT", Enabled: false}}
			}),
		},
		{name: "upgrade filters", yaml: "stat_prefix: s\n" + routes + "upgrade_configs: [{upgrade_type: websocket, filters: [{name: envoy.filters.http.router}]}]\n",
			err: "upgrade_configs[0].filters: not implemented by Legate"},
		{name: "upgrade twice", yaml: "stat_prefix: s\n" + routes + "upgrade_configs: [{upgrade_type: websocket}, {upgrade_type: WebSocket}]\n",
			err: `upgrade_configs[1].upgrade_type = "WebSocket": multiple upgrade configs with the same name`},
		{name: "upgrade without type", yaml: "stat_prefix: s\n" + routes + "upgrade_configs: [{enabled: true}]\n",
			err: `upgrade_configs[0].upgrade_type = "": must not be empty`},
		{name: "access log traceable filter", yaml: "stat_prefix: s\n" + routes + "access_log: [{name: f, filter: {traceable_filter: {}}}]\n",
			err: "access_log[0].filter.traceable_filter: not implemented by Legate"},
		{name: "access log grpc status", yaml: "stat_prefix: s\n" + routes + "access_log: [{name: f}, {name: g, filter: {or_filter: {filters: [{not_health_check_filter: {}}, {grpc_status_filter: {statuses: [20]}}]}}}]\n",
			err: "access_log[1].filter.or_filter.filters[1].grpc_status_filter.statuses[0] = 20; not a gRPC status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := HTTPConnectionManagerFromProto(hcmFromYAML(t, tt.yaml))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("HTTPConnectionManagerFromProto() error = %v; want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("HTTPConnectionManagerFromProto() error = %v", err)
			}
			opts := cmp.Options{
				cmpopts.IgnoreFields(HTTPConnectionManager{}, "Proto", "RouteConfig"),
				cmpopts.IgnoreFields(HTTPFilter{}, "TypedConfig"),
				protocmp.Transform(),
				// A compiled filter has no exported fields: the same compiled structure.
				cmp.Comparer(func(a, b *accesslog.Filter) bool { return reflect.DeepEqual(a, b) }),
			}
			if diff := cmp.Diff(tt.want, got, opts); diff != "" {
				t.Errorf("HTTPConnectionManagerFromProto() (-want +got):\n%s", diff)
			}
		})
	}
}
