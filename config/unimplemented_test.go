package config

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/bootstrap"
)

// listenerYAML returns a bootstrap with one TCP proxy listener whose extra fields are given,
// with chain and match added to its filter chain and its filter_chain_match.
func listenerYAML(extra, chain, match string) string {
	return "static_resources:\n  listeners:\n  - {name: l, address: {socket_address: {address: 127.0.0.1, port_value: 1}}" + extra +
		", filter_chains: [{filter_chain_match: {" + match + "}" + chain + ", filters: [{name: tcp, typed_config: {'@type': type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: t, cluster: web}}]}]}\n"
}

const adminAddr = "admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}"

// refusedCases has one bootstrap per refused field (bootstrap.Audit's table), and the path
// the error must name.
var refusedCases = []struct{ name, yaml, path string }{
	// Bootstrap.
	{"header_prefix", "header_prefix: x-acme", "header_prefix"},
	{"dns_resolution_config", "dns_resolution_config: {}", "dns_resolution_config"},
	{"typed_dns_resolver_config", "typed_dns_resolver_config: {name: r}", "typed_dns_resolver_config"},
	{"config_sources", "config_sources: [{ads: {}}]", "config_sources"},
	{"default_config_source", "default_config_source: {ads: {}}", "default_config_source"},
	{"default_socket_interface", "default_socket_interface: custom", "default_socket_interface"},
	{"certificate_provider_instances", "certificate_provider_instances: {p: {name: p}}", "certificate_provider_instances"},
	{"xds_delegate_extension", "xds_delegate_extension: {name: d}", "xds_delegate_extension"},
	{"listener_manager", "listener_manager: {name: m}", "listener_manager"},
	{"admin.allow_paths", adminAddr + ", allow_paths: [{exact: /stats}]}", "admin.allow_paths"},
	{"cluster_manager.upstream_bind_config.freebind", "cluster_manager: {upstream_bind_config: {source_address: {address: 127.0.0.1, port_value: 0}, freebind: true}}", "cluster_manager.upstream_bind_config.freebind"},
	// Cluster.
	{"cluster http_protocol_options.override_stream_error_on_invalid_http_message", webCluster("http_protocol_options: {override_stream_error_on_invalid_http_message: {value: true}}"), "static_resources.clusters[0].http_protocol_options.override_stream_error_on_invalid_http_message"},
	{"cluster http_protocol_options.use_balsa_parser", webCluster("http_protocol_options: {use_balsa_parser: {value: true}}"), "static_resources.clusters[0].http_protocol_options.use_balsa_parser"},
	{"cluster http_protocol_options.allow_custom_methods", webCluster("http_protocol_options: {allow_custom_methods: true}"), "static_resources.clusters[0].http_protocol_options.allow_custom_methods"},
	{"cluster http_protocol_options.ignore_http_11_upgrade", webCluster("http_protocol_options: {ignore_http_11_upgrade: [{exact: h2c}]}"), "static_resources.clusters[0].http_protocol_options.ignore_http_11_upgrade"},
	{"cluster filters", webCluster("filters: [{name: f}]"), "static_resources.clusters[0].filters"},
	{"cluster upstream_config", webCluster("upstream_config: {name: u}"), "static_resources.clusters[0].upstream_config"},
	{"cluster connection_pool_per_downstream_connection", webCluster("connection_pool_per_downstream_connection: true"), "static_resources.clusters[0].connection_pool_per_downstream_connection"},
	{"cluster queuing_policies", webCluster("queuing_policies: {}"), "static_resources.clusters[0].queuing_policies"},
	{"cluster round_robin_lb_config.slow_start_config", webCluster("round_robin_lb_config: {slow_start_config: {}}"), "static_resources.clusters[0].round_robin_lb_config.slow_start_config"},
	{"cluster least_request_lb_config.slow_start_config", webCluster("lb_policy: LEAST_REQUEST", "least_request_lb_config: {slow_start_config: {}}"), "static_resources.clusters[0].least_request_lb_config.slow_start_config"},
	{"cluster common_lb_config.override_host_status", webCluster("common_lb_config: {override_host_status: {statuses: [HEALTHY]}}"), "static_resources.clusters[0].common_lb_config.override_host_status"},
	{"cluster common_lb_config.close_connections_on_host_set_change", webCluster("common_lb_config: {close_connections_on_host_set_change: true}"), "static_resources.clusters[0].common_lb_config.close_connections_on_host_set_change"},
	{"cluster consistent_hashing_lb_config.hash_balance_factor", webCluster("common_lb_config: {consistent_hashing_lb_config: {hash_balance_factor: 150}}"), "static_resources.clusters[0].common_lb_config.consistent_hashing_lb_config.hash_balance_factor"},
	{"cluster lb_subset_config.list_as_any", webCluster("lb_subset_config: {list_as_any: true, subset_selectors: [{keys: [a]}]}"), "static_resources.clusters[0].lb_subset_config.list_as_any"},
	{"cluster lb_subset_config.metadata_fallback_policy", webCluster("lb_subset_config: {metadata_fallback_policy: FALLBACK_LIST, subset_selectors: [{keys: [a]}]}"), "static_resources.clusters[0].lb_subset_config.metadata_fallback_policy"},
	{"cluster subset selector single_host_per_subset", webCluster("lb_subset_config: {subset_selectors: [{keys: [a], single_host_per_subset: true}]}"), "static_resources.clusters[0].lb_subset_config.subset_selectors[0].single_host_per_subset"},
	{"cluster subset selector fallback_policy", webCluster("lb_subset_config: {subset_selectors: [{keys: [a], fallback_policy: ANY_ENDPOINT}]}"), "static_resources.clusters[0].lb_subset_config.subset_selectors[0].fallback_policy"},
	{"cluster subset selector fallback_keys_subset", webCluster("lb_subset_config: {subset_selectors: [{keys: [a, b], fallback_policy: KEYS_SUBSET, fallback_keys_subset: [a]}]}"), "static_resources.clusters[0].lb_subset_config.subset_selectors[0].fallback_keys_subset"},
	{"cluster upstream_bind_config.freebind", webCluster("upstream_bind_config: {source_address: {address: 127.0.0.1, port_value: 0}, freebind: true}"), "static_resources.clusters[0].upstream_bind_config.freebind"},
	{"cluster upstream_bind_config.extra_source_addresses", webCluster("upstream_bind_config: {source_address: {address: 127.0.0.1, port_value: 0}, extra_source_addresses: [{address: {address: '::1', port_value: 0}}]}"), "static_resources.clusters[0].upstream_bind_config.extra_source_addresses"},
	{"cluster upstream_bind_config.additional_source_addresses", webCluster("upstream_bind_config: {source_address: {address: 127.0.0.1, port_value: 0}, additional_source_addresses: [{address: '::1', port_value: 0}]}"), "static_resources.clusters[0].upstream_bind_config.additional_source_addresses"},
	{"cluster upstream_bind_config.local_address_selector", webCluster("upstream_bind_config: {source_address: {address: 127.0.0.1, port_value: 0}, local_address_selector: {name: s}}"), "static_resources.clusters[0].upstream_bind_config.local_address_selector"},
	{"cluster upstream_bind_config.validate_network_namespaces", webCluster("upstream_bind_config: {source_address: {address: 127.0.0.1, port_value: 0}, validate_network_namespaces: true}"), "static_resources.clusters[0].upstream_bind_config.validate_network_namespaces"},
	// Http2ProtocolOptions of a cluster.
	{"cluster http2 allow_metadata", webCluster("http2_protocol_options: {allow_metadata: true}"), "static_resources.clusters[0].http2_protocol_options.allow_metadata"},
	{"cluster http2 stream_error_on_invalid_http_messaging", webCluster("http2_protocol_options: {stream_error_on_invalid_http_messaging: true}"), "static_resources.clusters[0].http2_protocol_options.stream_error_on_invalid_http_messaging"},
	{"cluster http2 custom_settings_parameters", webCluster("http2_protocol_options: {custom_settings_parameters: [{identifier: 10, value: 1}]}"), "static_resources.clusters[0].http2_protocol_options.custom_settings_parameters"},
	{"cluster http2 max_header_field_size_kb", webCluster("http2_protocol_options: {max_header_field_size_kb: 64}"), "static_resources.clusters[0].http2_protocol_options.max_header_field_size_kb"},
	{"cluster http2 disallow_obs_text", webCluster("http2_protocol_options: {disallow_obs_text: true}"), "static_resources.clusters[0].http2_protocol_options.disallow_obs_text"},
	{"cluster http2 connection_idle_interval", webCluster("http2_protocol_options: {connection_keepalive: {interval: 10s, timeout: 1s, connection_idle_interval: 5s}}"), "static_resources.clusters[0].http2_protocol_options.connection_keepalive.connection_idle_interval"},
	{"http options explicit http2 allow_metadata", httpOptionsCluster("explicit_http_config: {http2_protocol_options: {allow_metadata: true}}"), httpOptionsPath + ".explicit_http_config.http2_protocol_options.allow_metadata"},
	// The upstream HttpProtocolOptions inside typed_extension_protocol_options.
	{"http options header_validation_config", httpOptionsCluster("header_validation_config: {name: v}"), httpOptionsPath + ".header_validation_config"},
	{"http options outlier_detection", httpOptionsCluster("outlier_detection: {}"), httpOptionsPath + ".outlier_detection"},
	{"http options request_mirror_policies", httpOptionsCluster("request_mirror_policies: [{cluster: web}]"), httpOptionsPath + ".request_mirror_policies"},
	{"http options hash_policy", httpOptionsCluster("hash_policy: [{header: {header_name: x}}]"), httpOptionsPath + ".hash_policy"},
	{"http options retry_policy", httpOptionsCluster("retry_policy: {}"), httpOptionsPath + ".retry_policy"},
	{"http options explicit http3_protocol_options", httpOptionsCluster("explicit_http_config: {http3_protocol_options: {}}"), httpOptionsPath + ".explicit_http_config.http3_protocol_options"},
	{"http options downstream http3_protocol_options", httpOptionsCluster("use_downstream_protocol_config: {http3_protocol_options: {}}"), httpOptionsPath + ".use_downstream_protocol_config.http3_protocol_options"},
	{"http options auto http3_protocol_options", httpOptionsCluster("auto_config: {http3_protocol_options: {}}"), httpOptionsPath + ".auto_config.http3_protocol_options"},
	{"http options auto alternate_protocols_cache_options", httpOptionsCluster("auto_config: {alternate_protocols_cache_options: {name: c}}"), httpOptionsPath + ".auto_config.alternate_protocols_cache_options"},
	// Listener.
	{"listener fcds_config", listenerYAML(", fcds_config: {name: f}", "", ""), "static_resources.listeners[0].fcds_config"},
	{"listener deprecated_v1", listenerYAML(", deprecated_v1: {bind_to_port: true}", "", ""), "static_resources.listeners[0].deprecated_v1"},
	{"listener transparent", listenerYAML(", transparent: true", "", ""), "static_resources.listeners[0].transparent"},
	{"listener freebind", listenerYAML(", freebind: true", "", ""), "static_resources.listeners[0].freebind"},
	{"listener connection_balance_config", listenerYAML(", connection_balance_config: {exact_balance: {}}", "", ""), "static_resources.listeners[0].connection_balance_config"},
	{"listener enable_mptcp", listenerYAML(", enable_mptcp: true", "", ""), "static_resources.listeners[0].enable_mptcp"},
	{"filter chain match address_suffix", listenerYAML("", "", "address_suffix: x"), "static_resources.listeners[0].filter_chains[0].filter_chain_match.address_suffix"},
	{"filter chain match suffix_len", listenerYAML("", "", "suffix_len: 8"), "static_resources.listeners[0].filter_chains[0].filter_chain_match.suffix_len"},
}

// httpOptionsPath is the field path of a cluster's upstream HttpProtocolOptions.
const httpOptionsPath = `static_resources.clusters[0].typed_extension_protocol_options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]`

// httpOptionsCluster returns a bootstrap whose cluster sets the upstream HttpProtocolOptions
// fields given.
func httpOptionsCluster(fields string) string {
	return webCluster("typed_extension_protocol_options: {envoy.extensions.upstreams.http.v3.HttpProtocolOptions: {'@type': type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions, " + fields + "}}")
}

// TestBadConfigsUnimplemented extends TestBadConfigs: each field Legate refuses stops the load
// with an error naming the field path and "not implemented by Legate".
func TestBadConfigsUnimplemented(t *testing.T) {
	for _, tc := range refusedCases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.yaml, Limits{})
			want := "envoy.yaml: " + tc.path + ": set; not implemented by Legate"
			if err == nil {
				t.Fatalf("load succeeded; want an error containing %q", want)
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("load error =\n%v\nwant it to contain\n%s", err, want)
			}
		})
	}
}

// TestRefusedCasesCoverTable checks that refusedCases has a case for every refused field of
// the audit table.
func TestRefusedCasesCoverTable(t *testing.T) {
	covered := map[string]bool{}
	for _, tc := range refusedCases {
		covered[lastSegment(strings.ReplaceAll(tc.path, "[0]", ""))] = true
	}
	for msg, fields := range bootstrap.AuditedFields() {
		for f, s := range fields {
			if s == bootstrap.Refused && !covered[string(f)] {
				t.Errorf("refused field %s.%s has no case in refusedCases", msg, f)
			}
		}
	}
}

// TestRefusedThroughProtoConverters checks that ClusterFromProto and ListenerFromProto refuse
// the same fields for resources that arrive over xDS, naming the resource.
func TestRefusedThroughProtoConverters(t *testing.T) {
	pc, err := clusterYAML(t, "name: a\nfilters: [{name: f}]\ntrack_cluster_stats: {timeout_budgets: true}")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ClusterFromProto(pc, Limits{}); err == nil || err.Error() != `cluster "a": filters: set; not implemented by Legate` {
		t.Errorf("ClusterFromProto() error = %v; want %q", err, `cluster "a": filters: set; not implemented by Legate`)
	}
	ll, err := bootstrap.Parse([]byte(listenerYAML("", "", "")), bootstrap.FormatYAML, bootstrap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pl := ll.Bootstrap.GetStaticResources().GetListeners()[0]
	pl.Transparent = wrapperspb.Bool(true)
	if _, err := ListenerFromProto(pl, Limits{}); err == nil || err.Error() != `listener "l": transparent: set; not implemented by Legate` {
		t.Errorf("ListenerFromProto() error = %v; want %q", err, `listener "l": transparent: set; not implemented by Legate`)
	}
	pl.Transparent = nil
	pl.FilterChains[0].FilterChainMatch.SuffixLen = wrapperspb.UInt32(8)
	want := `listener "l": filter_chains[0].filter_chain_match.suffix_len: set; not implemented by Legate`
	if _, err := ListenerFromProto(pl, Limits{}); err == nil || err.Error() != want {
		t.Errorf("ListenerFromProto() error = %v; want %q", err, want)
	}
}

// TestIgnoredFieldsWarn checks that operational fields are accepted, each with one warning that
// names its path, from bootstrap.Parse, and listed in Cluster.Ignored and Listener.Ignored.
func TestIgnoredFieldsWarn(t *testing.T) {
	y := "tracing: {}\nwatchdogs: {}\nenable_dispatcher_stats: true\n" +
		adminAddr + ", socket_options: [{level: 1, name: 2, int_value: 3}]}\n" +
		"cluster_manager: {load_stats_config: {api_type: GRPC, grpc_services: [{envoy_grpc: {cluster_name: web}}]}}\n" +
		webCluster("track_cluster_stats: {timeout_budgets: true}", "preconnect_policy: {per_upstream_preconnect_ratio: 1.5}", "wait_for_warm_on_init: false",
			"upstream_connection_options: {tcp_keepalive: {keepalive_time: 5}, happy_eyeballs_config: {}}")
	l, err := bootstrap.Parse([]byte(y), bootstrap.FormatYAML, bootstrap.Options{Name: "envoy.yaml"})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	var got []string
	for _, w := range l.Warnings {
		got = append(got, strings.TrimSuffix(strings.TrimPrefix(w, "envoy.yaml: "), ": set, but not implemented by Legate; ignored (it does not change how traffic is handled)"))
	}
	want := []string{
		"static_resources.clusters[0].wait_for_warm_on_init",
		"static_resources.clusters[0].upstream_connection_options.happy_eyeballs_config",
		"static_resources.clusters[0].track_cluster_stats",
		"static_resources.clusters[0].preconnect_policy",
		"cluster_manager.load_stats_config",
		"watchdogs",
		"admin.socket_options",
		"enable_dispatcher_stats",
	}
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Warnings (-want +got):\n%s\nraw: %q", diff, l.Warnings)
	}
	b, err := FromBootstrap(l.Bootstrap, Limits{})
	if err != nil {
		t.Fatalf("FromBootstrap: %v", err)
	}
	wantCluster := []string{"wait_for_warm_on_init", "upstream_connection_options.happy_eyeballs_config", "track_cluster_stats", "preconnect_policy"}
	got = slices.Clone(b.Clusters[0].Ignored)
	slices.Sort(got)
	slices.Sort(wantCluster)
	if diff := cmp.Diff(wantCluster, got); diff != "" {
		t.Errorf("Cluster.Ignored (-want +got):\n%s", diff)
	}

	ll, err := bootstrap.Parse([]byte(listenerYAML(", tcp_backlog_size: 10", "", "")), bootstrap.FormatYAML, bootstrap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	lc, err := ListenerFromProto(ll.Bootstrap.GetStaticResources().GetListeners()[0], Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"tcp_backlog_size"}, lc.Ignored); diff != "" {
		t.Errorf("Listener.Ignored (-want +got):\n%s", diff)
	}
}

// TestDocTableMatchesAudit holds the table in doc.go equal to bootstrap's audit table: every
// ignored or refused field appears in doc.go's table with the same decision, and no other row
// does.
func TestDocTableMatchesAudit(t *testing.T) {
	data, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^//\s+\|\s*([a-zA-Z0-9_.]+)\s*\|\s*([a-z0-9_]+)\s*\|\s*(ignored|refused)\s*\|`)
	got := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		if m[1] == "HttpConnectionManager" {
			continue // hcmFields' table (TestHCMDocTable)
		}
		got[m[1]+"."+m[2]] = m[3]
	}
	want := map[string]string{}
	for msg, fields := range bootstrap.AuditedFields() {
		short := shortName(msg)
		for f, s := range fields {
			switch s {
			case bootstrap.Ignored:
				want[short+"."+string(f)] = "ignored"
			case bootstrap.Refused:
				want[short+"."+string(f)] = "refused"
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("doc.go table (-audit table +doc.go):\n%s", diff)
	}
}

// shortName drops the package of a message name: envoy.config.cluster.v3.Cluster.CommonLbConfig
// becomes Cluster.CommonLbConfig.
func shortName(n protoreflect.FullName) string {
	parts := strings.Split(string(n), ".")
	for i, p := range parts {
		if p != "" && p[0] >= 'A' && p[0] <= 'Z' {
			return strings.Join(parts[i:], ".")
		}
	}
	return fmt.Sprint(n)
}
