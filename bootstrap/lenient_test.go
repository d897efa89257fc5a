package bootstrap

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

// listenerFilter returns a bootstrap with one listener whose one network filter has the
// typed_config given (YAML lines indented by ten spaces).
func listenerFilter(typedConfig string) string {
	return `static_resources:
  listeners:
  - name: l
    address: {socket_address: {address: 127.0.0.1, port_value: 10000}}
    filter_chains:
    - filters:
      - name: any name at all
        typed_config:
` + typedConfig
}

// hcm wraps an HttpConnectionManager body (YAML lines) into a bootstrap with one listener, so
// that the rules below can be tried inside typed_configs.
func hcm(body string) string {
	return listenerFilter(`          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: in
` + body)
}

const routeConfig = `          route_config: {virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: /}, direct_response: {status: 200}}]}]}
`

const routerFilter = `          http_filters: [{name: r, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
`

// TestLoaderRules checks that every form Envoy's loader accepts beyond canonical proto3 JSON
// loads to the same Bootstrap as its canonical spelling (proto.Equal).
func TestLoaderRules(t *testing.T) {
	tests := []struct {
		name             string
		lenient, canonic string
		format           Format // FormatYAML when zero
	}{
		{name: "single cluster for the clusters list",
			lenient: `static_resources: {clusters: {name: a, connect_timeout: 1s}}`,
			canonic: `static_resources: {clusters: [{name: a, connect_timeout: 1s}]}`},
		{name: "single grpc_service for the list",
			lenient: `dynamic_resources: {ads_config: {api_type: GRPC, transport_api_version: V3, grpc_services: {envoy_grpc: {cluster_name: xds}}}}`,
			canonic: `dynamic_resources: {ads_config: {api_type: GRPC, transport_api_version: V3, grpc_services: [{envoy_grpc: {cluster_name: xds}}]}}`},
		{name: "single domain string inside a typed_config",
			lenient: hcm(`          route_config: {virtual_hosts: [{name: v, domains: "*", routes: [{match: {prefix: /}, direct_response: {status: 200}}]}]}
` + routerFilter),
			canonic: hcm(routeConfig + routerFilter)},
		{name: "nested lists are spliced",
			lenient: `static_resources: {clusters: [[{name: a}], [[{name: b}]]]}`,
			canonic: `static_resources: {clusters: [{name: a}, {name: b}]}`},
		{name: "null list element is a default element",
			lenient: `node: {client_features: [a, null]}`,
			canonic: `node: {client_features: [a, ""]}`},
		{name: "duration as seconds object",
			lenient: `stats_flush_interval: {seconds: 5}`,
			canonic: `stats_flush_interval: 5s`},
		{name: "duration as nanos object",
			lenient: `dynamic_resources: {ads_config: {api_type: REST, transport_api_version: V3, cluster_names: [x], refresh_delay: {nanos: 500000000}}}`,
			canonic: `dynamic_resources: {ads_config: {api_type: REST, transport_api_version: V3, cluster_names: [x], refresh_delay: 0.5s}}`},
		{name: "duration fields as strings",
			lenient: `stats_flush_interval: {seconds: "2", nanos: "1000"}`,
			canonic: `stats_flush_interval: 2.000001s`},
		{name: "timestamp as object inside an Any",
			lenient: `static_resources: {clusters: [{name: a, metadata: {typed_filter_metadata: {t: {"@type": type.googleapis.com/google.protobuf.Timestamp, value: {seconds: 1}}}}}]}`,
			canonic: `static_resources: {clusters: [{name: a, metadata: {typed_filter_metadata: {t: {"@type": type.googleapis.com/google.protobuf.Timestamp, value: "1970-01-01T00:00:01Z"}}}}]}`},
		{name: "wrapper as value object",
			lenient: `static_resources: {clusters: [{name: a, per_connection_buffer_limit_bytes: {value: 1024}}]}`,
			canonic: `static_resources: {clusters: [{name: a, per_connection_buffer_limit_bytes: 1024}]}`},
		{name: "empty wrapper object is the default value",
			lenient: `stats_config: {use_all_default_tags: {}}`,
			canonic: `stats_config: {use_all_default_tags: false}`},
		{name: "bool wrapper as a string",
			lenient: `stats_config: {use_all_default_tags: "false"}`,
			canonic: `stats_config: {use_all_default_tags: false}`},
		{name: "bool as yes string",
			lenient: `admin: {ignore_global_conn_limit: "yes"}`,
			canonic: `admin: {ignore_global_conn_limit: true}`},
		{name: "enum name in lower case",
			lenient: `static_resources: {clusters: [{name: a, lb_policy: least_request, type: strict_dns}]}`,
			canonic: `static_resources: {clusters: [{name: a, lb_policy: LEAST_REQUEST, type: STRICT_DNS}]}`},
		{name: "enum number as a string",
			lenient: `static_resources: {clusters: [{name: a, lb_policy: "1"}]}`,
			canonic: `static_resources: {clusters: [{name: a, lb_policy: LEAST_REQUEST}]}`},
		{name: "enum number with a zero fraction",
			lenient: `{"static_resources": {"clusters": [{"name": "a", "lb_policy": 1.0}]}}`,
			canonic: `static_resources: {clusters: [{name: a, lb_policy: LEAST_REQUEST}]}`, format: FormatJSON},
		{name: "codec_type auto inside a typed_config",
			lenient: hcm("          codec_type: auto\n" + routeConfig + routerFilter),
			canonic: hcm("          codec_type: AUTO\n" + routeConfig + routerFilter)},
		{name: "integer as a string and as a float",
			lenient: `{"admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": "9901"}}}, "static_resources": {"clusters": [{"name": "a", "per_connection_buffer_limit_bytes": 1e3}]}}`,
			canonic: `{admin: {address: {socket_address: {address: 127.0.0.1, port_value: 9901}}}, static_resources: {clusters: [{name: a, per_connection_buffer_limit_bytes: 1000}]}}`, format: FormatJSON},
		{name: "yaml hexadecimal and octal integers",
			lenient: `admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0x50}}}
static_resources: {clusters: [{name: a, per_connection_buffer_limit_bytes: 010}]}`,
			canonic: `admin: {address: {socket_address: {address: 127.0.0.1, port_value: 80}}}
static_resources: {clusters: [{name: a, per_connection_buffer_limit_bytes: 8}]}`},
		{name: "udpa TypedStruct around the router",
			lenient: hcm(routeConfig + `          http_filters: [{name: r, typed_config: {"@type": type.googleapis.com/udpa.type.v1.TypedStruct, type_url: type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
`),
			canonic: hcm(routeConfig + routerFilter)},
		{name: "xds TypedStruct around the connection manager, lenient inside",
			lenient: listenerFilter(`          "@type": type.googleapis.com/xds.type.v3.TypedStruct
          type_url: type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          value:
            stat_prefix: in
            codec_type: http1
            stream_idle_timeout: {seconds: 30}
            route_config: {virtual_hosts: {name: v, domains: "*", routes: {match: {prefix: /}, direct_response: {status: 200}}}}
            http_filters: {name: r, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
`),
			canonic: hcm("          codec_type: HTTP1\n          stream_idle_timeout: 30s\n" + routeConfig + routerFilter)},
		{name: "tls inspector by type",
			lenient: `static_resources: {listeners: [{name: l, address: {socket_address: {address: 127.0.0.1, port_value: 1}}, listener_filters: [{name: tls, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector}}], filter_chains: [{filters: [{name: t, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: t, cluster: c}}]}]}]}`,
			canonic: `static_resources: {listeners: [{name: l, address: {socket_address: {address: 127.0.0.1, port_value: 1}}, listener_filters: [{name: tls, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector}}], filter_chains: [{filters: [{name: t, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: t, cluster: c}}]}]}]}`},
		{name: "google_re2 regex engine",
			lenient: `default_regex_engine: {name: envoy.regex_engines.google_re2, typed_config: {"@type": type.googleapis.com/envoy.extensions.regex_engines.v3.GoogleRE2}}`,
			canonic: `{"default_regex_engine": {"name": "envoy.regex_engines.google_re2", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.regex_engines.v3.GoogleRE2"}}}`},
		{name: "yaml repeated key, the last wins",
			lenient: "admin: {profile_path: a}\nadmin: {profile_path: b}",
			canonic: "admin: {profile_path: b}"},
		{name: "yaml !ignore key holding an anchor",
			lenient: "!ignore defs: &addr {socket_address: {address: 127.0.0.1, port_value: 9901}}\nadmin: {address: *addr}",
			canonic: "admin: {address: {socket_address: {address: 127.0.0.1, port_value: 9901}}}"},
		{name: "json repeated scalar key, the last wins",
			lenient: `{"admin": {"profile_path": "a", "profile_path": "b"}}`,
			canonic: `admin: {profile_path: b}`, format: FormatJSON},
		{name: "json repeated message key, merged",
			lenient: `{"admin": {"profile_path": "a"}, "admin": {"access_log_path": "b", "profile_path": "c"}}`,
			canonic: `admin: {profile_path: c, access_log_path: b}`, format: FormatJSON},
		{name: "json repeated list key, appended",
			lenient: `{"static_resources": {"clusters": [{"name": "a"}], "clusters": {"name": "b"}}}`,
			canonic: `static_resources: {clusters: [{name: a}, {name: b}]}`, format: FormatJSON},
		{name: "json repeated key with null, unchanged",
			lenient: `{"node": {"id": "node1"}, "node": null}`,
			canonic: `node: {id: node1}`, format: FormatJSON},
		{name: "json repeated Struct key, entries merged",
			lenient: `{"node": {"metadata": {"a": 1, "b": 1}, "metadata": {"b": 2}}}`,
			canonic: `node: {metadata: {a: 1, b: 2}}`, format: FormatJSON},
		{name: "yaml quoted number stays a string",
			lenient: `node: {id: "0x10"}`,
			canonic: `{"node": {"id": "0x10"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.lenient), yamlByDefault(tc.format), Options{Name: "lenient"})
			if err != nil {
				t.Fatalf("Parse(lenient) error:\n%v", err)
			}
			want, err := Parse([]byte(tc.canonic), FormatAuto, Options{Name: "canonical"})
			if err != nil {
				t.Fatalf("Parse(canonical) error:\n%v", err)
			}
			if !proto.Equal(got.Bootstrap, want.Bootstrap) {
				t.Errorf("lenient form loads differently (-canonical +lenient):\n%s",
					cmp.Diff(want.Bootstrap, got.Bootstrap, protocmp.Transform()))
			}
		})
	}
}

// TestLoaderRejects checks that what Envoy's loader rejects stays rejected, with an error
// naming the field path.
func TestLoaderRejects(t *testing.T) {
	tests := []struct {
		name   string
		data   string
		format Format // FormatYAML when zero
		want   string // a substring of one FieldError, path included
	}{
		{name: "v2 type URL",
			data: hcm("") + "          \"@type\": type.googleapis.com/envoy.config.filter.network.http_connection_manager.v2.HttpConnectionManager\n",
			want: `static_resources.listeners[0].filter_chains[0].filters[0].typed_config.@type: unsupported type "type.googleapis.com/envoy.config.filter.network.http_connection_manager.v2.HttpConnectionManager"`},
		{name: "untyped config",
			data: `static_resources: {listeners: [{name: l, address: {socket_address: {address: 127.0.0.1, port_value: 1}}, filter_chains: [{filters: [{name: envoy.filters.network.tcp_proxy, config: {stat_prefix: t, cluster: c}}]}]}]}`,
			want: `static_resources.listeners[0].filter_chains[0].filters[0].config: the v2 untyped config form is supported only when empty`},
		{name: "empty typed_config",
			data: `static_resources: {listeners: [{name: l, address: {socket_address: {address: 127.0.0.1, port_value: 1}}, filter_chains: [{filters: [{name: t, typed_config: {}}]}]}]}`,
			want: `static_resources.listeners[0].filter_chains[0].filters[0].typed_config.@type: missing`},
		{name: "unknown field",
			data: `static_resources: {clusters: [{name: a, colour: blue}]}`,
			want: `static_resources.clusters[0].colour: unknown field`},
		{name: "unknown field in a single-element list",
			data: `static_resources: {clusters: {name: a, colour: blue}}`,
			want: `static_resources.clusters.colour: unknown field`},
		{name: "json comment",
			data:   "{\n// a comment\n\"node\": {\"id\": \"n\"}}",
			format: FormatJSON,
			want:   `invalid JSON: invalid character '/'`},
		{name: "yaml merge key",
			data: "base: &b {profile_path: /tmp/p}\nadmin: {<<: *b}",
			want: `admin.<<: unknown field`},
		{name: "unknown enum name",
			data: `static_resources: {clusters: [{name: a, lb_policy: fastest}]}`,
			want: `static_resources.clusters[0].lb_policy: unknown value "fastest" for enum LbPolicy`},
		{name: "enum number string out of int32",
			data: `static_resources: {clusters: [{name: a, lb_policy: "3000000000"}]}`,
			want: `static_resources.clusters[0].lb_policy: unknown value "3000000000"`},
		{name: "integer with a fraction",
			data: `static_resources: {clusters: [{name: a, per_connection_buffer_limit_bytes: 1.5}]}`,
			want: `static_resources.clusters[0].per_connection_buffer_limit_bytes: got a number (1.5)`},
		{name: "bool from a word SimpleAtob does not know",
			data: `admin: {ignore_global_conn_limit: "maybe"}`,
			want: `admin.ignore_global_conn_limit: got a string ("maybe"); want true or false`},
		{name: "yaml on is a bool, not a string",
			data: `node: {id: on}`,
			want: `node.id: got a boolean (true); want a string`},
		{name: "duration object with an unknown field",
			data: `stats_flush_interval: {secs: 5}`,
			want: `stats_flush_interval.secs: unknown field (not in google.protobuf.Duration)`},
		{name: "duration as a number",
			data: `stats_flush_interval: 5`,
			want: `stats_flush_interval: got a number (5)`},
		{name: "typed struct with an unknown field in its value",
			data: `static_resources: {listeners: [{name: l, address: {socket_address: {address: 127.0.0.1, port_value: 1}}, filter_chains: [{filters: [{name: w, typed_config: {"@type": type.googleapis.com/udpa.type.v1.TypedStruct, type_url: type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, value: {stat_prefix: t, cluster: c, colour: blue}}}]}]}]}`,
			want: `filters[0].typed_config.value.colour: unknown field (not in envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy)`},
		{name: "typed struct of a type Legate lacks",
			data: `static_resources: {listeners: [{name: l, address: {socket_address: {address: 127.0.0.1, port_value: 1}}, filter_chains: [{filters: [{name: w, typed_config: {"@type": type.googleapis.com/xds.type.v3.TypedStruct, type_url: type.googleapis.com/envoy.extensions.filters.network.wasm.v3.Wasm, value: {}}}]}]}]}`,
			want: `static_resources.listeners[0].filter_chains[0].filters[0].typed_config.type_url: unsupported type "type.googleapis.com/envoy.extensions.filters.network.wasm.v3.Wasm"`},
		{name: "typed struct without a type_url",
			data: `static_resources: {listeners: [{name: l, address: {socket_address: {address: 127.0.0.1, port_value: 1}}, filter_chains: [{filters: [{name: w, typed_config: {"@type": type.googleapis.com/xds.type.v3.TypedStruct, value: {}}}]}]}]}`,
			want: `typed_config.type_url: missing`},
		{name: "json repeated oneof member",
			data:   `{"static_resources": {"clusters": [{"name": "a", "type": "STATIC", "type": "EDS"}]}}`,
			format: FormatJSON,
			want:   `static_resources.clusters[0].type: set 2 times; a member of oneof cluster_discovery_type may be set once`},
		{name: "json repeated map key",
			data:   `{"static_resources": {"clusters": [{"name": "a", "metadata": {"filter_metadata": {"k": {}, "k": {}}}}]}}`,
			format: FormatJSON,
			want:   `static_resources.clusters[0].metadata.filter_metadata["k"]: map key appears twice`},
		{name: "json repeated @type",
			data:   `{"static_resources": {"clusters": [{"name": "a", "metadata": {"typed_filter_metadata": {"k": {"@type": "type.googleapis.com/google.protobuf.Struct", "@type": "type.googleapis.com/google.protobuf.Struct", "value": {}}}}}]}}`,
			format: FormatJSON,
			want:   `static_resources.clusters[0].metadata.typed_filter_metadata["k"].@type: repeated in one Any`},
		{name: "oneof set twice",
			data: `static_resources: {clusters: [{name: a, type: STATIC, cluster_type: {name: x}}]}`,
			want: `belong to oneof cluster_discovery_type`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.data), yamlByDefault(tc.format), Options{Name: "t"})
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Parse error = %v; want Errors", err)
			}
			for _, e := range errs {
				if strings.Contains(e.Error(), tc.want) {
					return
				}
			}
			t.Errorf("Parse errors:\n%v\nwant one containing %q", err, tc.want)
		})
	}
}

// yamlByDefault reads a table's zero Format as YAML.
func yamlByDefault(f Format) Format {
	if f == FormatAuto {
		return FormatYAML
	}
	return f
}
