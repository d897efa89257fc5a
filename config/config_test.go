package config

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/legateproxy/legate/bootstrap"
)

// load runs the whole path a bootstrap takes at start: bootstrap.Parse, then FromBootstrap.
func load(t *testing.T, yaml string, lim Limits) (*Bootstrap, error) {
	t.Helper()
	l, err := bootstrap.Parse([]byte(yaml), bootstrap.FormatYAML, bootstrap.Options{Name: "envoy.yaml"})
	if err != nil {
		return nil, err
	}
	return FromBootstrap(l.Bootstrap, lim)
}

func TestFromBootstrapGood(t *testing.T) {
	data, err := os.ReadFile("testdata/good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := load(t, string(data), Limits{})
	if err != nil {
		t.Fatalf("load(good.yaml) error:\n%v", err)
	}
	want := &Bootstrap{
		Admin: &Admin{
			Address:       "127.0.0.1",
			Port:          0,
			AccessLogPath: "/tmp/admin.log",
			ProfilePath:   DefaultProfilePath,
		},
		Node: Node{
			ID:            "node-1",
			Cluster:       "front",
			UserAgentName: "legate",
			Locality:      Locality{Region: "r1", Zone: "z1", SubZone: "s1"},
		},
		StatsFlushInterval:            DefaultStatsFlushInterval,
		StatsServerVersionOverride:    42,
		HasStatsServerVersionOverride: true,
		ClusterNames:                  []string{"web", "eds", "orig", "agg"},
		ListenerNames:                 []string{"in", "out"},
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Bootstrap{}, "Proto", "Clusters")); diff != "" {
		t.Errorf("FromBootstrap(good.yaml) (-want +got):\n%s", diff)
	}
	var built []string
	for _, c := range got.Clusters {
		built = append(built, c.Name)
	}
	if diff := cmp.Diff(want.ClusterNames, built); diff != "" {
		t.Errorf("names of Clusters (-want +got):\n%s", diff)
	}
	if got, want := got.Clusters[0].RingHash, (RingHashLbConfig{MinimumRingSize: 2048, MaximumRingSize: 4096}); got != want {
		t.Errorf("Clusters[0].RingHash = %+v; want %+v", got, want)
	}
	if got.Proto == nil {
		t.Error("Proto = nil; want the decoded bootstrap")
	}
}

func TestFromBootstrapDefaults(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want *Bootstrap
	}{
		{
			name: "empty bootstrap",
			yaml: "",
			want: &Bootstrap{StatsFlushInterval: DefaultStatsFlushInterval},
		},
		{
			name: "flush on admin",
			yaml: "stats_flush_on_admin: true",
			want: &Bootstrap{StatsFlushOnAdmin: true},
		},
		{
			name: "flush interval and admin paths",
			yaml: "stats_flush_interval: 2.5s\nadmin: {access_log_path: /a, profile_path: /p, address: {socket_address: {address: '::1', port_value: 9901}}}",
			want: &Bootstrap{
				StatsFlushInterval: 2500 * time.Millisecond,
				Admin:              &Admin{Address: "::1", Port: 9901, AccessLogPath: "/a", ProfilePath: "/p"},
			},
		},
		{
			name: "admin without address is disabled",
			yaml: "admin: {access_log_path: /a}",
			want: &Bootstrap{StatsFlushInterval: DefaultStatsFlushInterval},
		},
		{
			name: "longer name allowed by a raised limit",
			yaml: "static_resources: {listeners: [{name: " + strings.Repeat("l", 100) + ", address: {socket_address: {address: 127.0.0.1, port_value: 1}}}]}",
			want: &Bootstrap{StatsFlushInterval: DefaultStatsFlushInterval, ListenerNames: []string{strings.Repeat("l", 100)}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := load(t, tc.yaml, Limits{MaxObjNameLen: 100})
			if err != nil {
				t.Fatalf("load error:\n%v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(Bootstrap{}, "Proto")); diff != "" {
				t.Errorf("FromBootstrap (-want +got):\n%s", diff)
			}
		})
	}
}

const endpoints = "load_assignment: {cluster_name: web, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 8080}}}}]}]}"

// cluster returns a bootstrap with one static cluster whose fields are the given YAML lines.
func cluster(lines ...string) string {
	return "static_resources:\n  clusters:\n  - " + strings.Join(lines, "\n    ") + "\n"
}

// webCluster returns a valid cluster "web" with extra fields.
func webCluster(extra ...string) string {
	return cluster(append([]string{"name: web", "connect_timeout: 1s", endpoints}, extra...)...)
}

func TestBadConfigs(t *testing.T) {
	long := strings.Repeat("x", 61)
	tests := []struct {
		name string
		yaml string
		want string // a substring of the error
	}{
		// Syntax and shape.
		{"yaml syntax", "static_resources: [", "envoy.yaml: invalid YAML"},
		{"top level list", "- a\n- b", "got a list at the top level; want an object"},
		// Wrong types.
		{"number for duration", cluster("name: web", "connect_timeout: 5", endpoints),
			`envoy.yaml: static_resources.clusters[0].connect_timeout: got a number (5); want a duration string`},
		{"string for bool", webCluster(`respect_dns_ttl: "maybe"`),
			`static_resources.clusters[0].respect_dns_ttl: got a string ("maybe"); want true or false`},
		{"list for string", cluster("name: [web]", "connect_timeout: 1s"),
			`static_resources.clusters[0].name: got a list; want a string`},
		{"string for a list of messages", "static_resources: {clusters: web}",
			`static_resources.clusters: got a string ("web"); want an object (envoy.config.cluster.v3.Cluster)`},
		{"uint32 overflow", webCluster("per_connection_buffer_limit_bytes: 5000000000"),
			`per_connection_buffer_limit_bytes: got a string ("5000000000"); want an integer in 0..4294967295`},
		{"fraction for integer", webCluster("max_requests_per_connection: 1.5"),
			`max_requests_per_connection: got a number (1.5); want an integer in 0..4294967295`},
		// Bad durations.
		{"bad duration", cluster("name: web", "connect_timeout: 5x", endpoints),
			`envoy.yaml: static_resources.clusters[0].connect_timeout: invalid duration "5x"`},
		{"negative timeout", cluster("name: web", "connect_timeout: -1s", endpoints),
			`static_resources.clusters[0].connect_timeout: value must be greater than 0s`},
		{"bad flush interval", "stats_flush_interval: 10 seconds", `stats_flush_interval: invalid duration "10 seconds"`},
		// Unknown fields.
		{"unknown top-level field", "colour: blue", `envoy.yaml: colour: unknown field (not in envoy.config.bootstrap.v3.Bootstrap)`},
		{"unknown cluster field", webCluster("hostz: []"),
			`static_resources.clusters[0].hostz: unknown field (not in envoy.config.cluster.v3.Cluster)`},
		{"unknown field inside typed_config", webCluster(`transport_socket: {name: tls, typed_config: {"@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext, snii: a}}`),
			`static_resources.clusters[0].transport_socket.typed_config.snii: unknown field (not in envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext)`},
		{"unsupported @type", webCluster(`transport_socket: {name: alts, typed_config: {"@type": type.googleapis.com/envoy.extensions.transport_sockets.alts.v3.Alts}}`),
			`transport_socket.typed_config.@type: unsupported type "type.googleapis.com/envoy.extensions.transport_sockets.alts.v3.Alts"`},
		{"missing @type", webCluster(`transport_socket: {name: tls, typed_config: {sni: a}}`),
			`transport_socket.typed_config.@type: missing`},
		{"field set twice", webCluster("connectTimeout: 2s"),
			`static_resources.clusters[0].connect_timeout: field set twice, as "connectTimeout" and "connect_timeout"`},
		// Oneof conflicts.
		{"type and cluster_type", webCluster("type: STATIC", "cluster_type: {name: envoy.clusters.aggregate}"),
			`static_resources.clusters[0].type: "cluster_type" is already set; cluster_type and type belong to oneof cluster_discovery_type`},
		{"two lb configs", webCluster("lb_policy: RING_HASH", "ring_hash_lb_config: {}", "least_request_lb_config: {}"),
			`least_request_lb_config and ring_hash_lb_config belong to oneof lb_config`},
		{"zone aware and locality weighted", webCluster("common_lb_config: {zone_aware_lb_config: {}, locality_weighted_lb_config: {}}"),
			`common_lb_config.zone_aware_lb_config: "locality_weighted_lb_config" is already set`},
		// Missing required fields.
		{"cluster without name", cluster("connect_timeout: 1s", endpoints),
			`envoy.yaml: static_resources.clusters[0].name: value length must be at least 1 runes`},
		{"socket address without port", cluster("name: web", "load_assignment: {cluster_name: web, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1}}}}]}]}"),
			`static_resources.clusters[0].load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_specifier: value is required`},
		{"typed_config required field", "static_resources: {listeners: [{name: l, address: {socket_address: {address: 127.0.0.1, port_value: 1}}, filter_chains: [{filters: [{name: tcp, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, cluster: web}}]}]}]}",
			`static_resources.listeners[0].filter_chains[0].filters[0].typed_config.stat_prefix: value length must be at least 1 runes`},
		// Ports out of range.
		{"endpoint port out of range", cluster("name: web", "load_assignment: {cluster_name: web, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 70000}}}}]}]}"),
			`endpoint.address.socket_address.port_value: value must be less than or equal to 65535`},
		{"admin port out of range", "admin: {address: {socket_address: {address: 127.0.0.1, port_value: 65536}}}",
			`envoy.yaml: admin.address.socket_address.port_value: value must be less than or equal to 65535`},
		{"admin pipe address", "admin: {address: {pipe: {path: /tmp/admin.sock}}}", `admin.address.pipe is set: the admin address must be a socket_address`},
		{"admin named port", "admin: {address: {socket_address: {address: 127.0.0.1, named_port: admin}}}",
			`admin.address.socket_address.named_port = "admin": must be a port_value`},
		// Unknown enum values.
		{"unknown lb_policy", webCluster("lb_policy: BEST"),
			`static_resources.clusters[0].lb_policy: unknown value "BEST" for enum LbPolicy; want one of ROUND_ROBIN, LEAST_REQUEST`},
		{"unknown discovery type", webCluster("type: MAGIC"), `static_resources.clusters[0].type: unknown value "MAGIC" for enum DiscoveryType`},
		// Legate's rules (package config).
		{"duplicate cluster names", "static_resources:\n  clusters:\n  - {name: web, connect_timeout: 1s, " + endpoints + "}\n  - {name: api, connect_timeout: 1s, " + endpoints + "}\n  - {name: web, connect_timeout: 1s, " + endpoints + "}",
			`static_resources.clusters[2].name = "web": duplicate of clusters[0]`},
		{"duplicate listener names", "static_resources: {listeners: [{name: in, address: {socket_address: {address: 127.0.0.1, port_value: 1}}}, {name: in, address: {socket_address: {address: 127.0.0.1, port_value: 2}}}]}",
			`static_resources.listeners[1].name = "in": duplicate of listeners[0]`},
		{"cluster name too long", cluster("name: "+long, "connect_timeout: 1s", endpoints),
			`static_resources.clusters[0]: cluster "` + long + `": name = "` + long + `" is 61 characters; must be at most 60 (--max-obj-name-len)`},
		{"listener name too long", "static_resources: {listeners: [{name: " + long + ", address: {socket_address: {address: 127.0.0.1, port_value: 1}}}]}",
			`static_resources.listeners[0].name = "` + long + `": 61 characters, longer than the limit of 60`},
		{"flush interval and flush on admin", "stats_flush_interval: 10s\nstats_flush_on_admin: true",
			`stats_flush_interval = 10s and stats_flush_on_admin = true: set only one`},
		{"ring hash config with round robin", webCluster("ring_hash_lb_config: {minimum_ring_size: 1024}"),
			`static_resources.clusters[0]: cluster "web": ring_hash_lb_config is set, but lb_policy = ROUND_ROBIN`},
		{"least request config with random", webCluster("lb_policy: RANDOM", "least_request_lb_config: {choice_count: 3}"),
			`static_resources.clusters[0]: cluster "web": least_request_lb_config is set, but lb_policy = RANDOM`},
		{"ring size over 8M", webCluster("lb_policy: RING_HASH", "ring_hash_lb_config: {minimum_ring_size: 9000000}"),
			`static_resources.clusters[0].ring_hash_lb_config.minimum_ring_size: value must be less than or equal to 8388608`},
		{"ring min over max", webCluster("lb_policy: RING_HASH", "ring_hash_lb_config: {minimum_ring_size: 4096, maximum_ring_size: 2048}"),
			`static_resources.clusters[0]: cluster "web": ring_hash_lb_config.minimum_ring_size = 4096; must be <= maximum_ring_size (2048)`},
		{"eds config on static cluster", webCluster("eds_cluster_config: {service_name: web}"),
			`static_resources.clusters[0]: cluster "web": eds_cluster_config is set, but type = STATIC`},
		{"strict dns without load_assignment", cluster("name: web", "connect_timeout: 1s", "type: STRICT_DNS"),
			`static_resources.clusters[0]: cluster "web": load_assignment is missing; type STRICT_DNS needs it`},
		{"unknown cluster_type", cluster("name: web", "connect_timeout: 1s", "cluster_type: {name: envoy.clusters.redis}"),
			`static_resources.clusters[0]: cluster "web": cluster_type.name = "envoy.clusters.redis"; must match a supported cluster type (envoy.clusters.aggregate, envoy.clusters.dynamic_forward_proxy)`},
		{"panic threshold over 100", webCluster("common_lb_config: {healthy_panic_threshold: {value: 150}}"),
			`static_resources.clusters[0].common_lb_config.healthy_panic_threshold.value: value must be inside range [0, 100]`},
		// v2 spellings that cannot be upgraded.
		{"unknown v2 protocol options key", webCluster("extension_protocol_options: {envoy.filters.network.thrift_proxy: {}}"),
			`static_resources.clusters[0].extension_protocol_options["envoy.filters.network.thrift_proxy"]: no typed message is known for this v2 key`},
		{"non-empty v2 filter config", "static_resources: {listeners: [{name: l, address: {socket_address: {address: 127.0.0.1, port_value: 1}}, filter_chains: [{filters: [{name: envoy.tcp_proxy, config: {stat_prefix: tcp, cluster: web}}]}]}]}",
			`static_resources.listeners[0].filter_chains[0].filters[0].config: the v2 untyped config form is supported only when empty; write typed_config: {"@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy", ...} instead`},
		{"v2 config of unknown filter", "static_resources: {listeners: [{name: l, address: {socket_address: {address: 127.0.0.1, port_value: 1}}, filter_chains: [{filters: [{name: envoy.redis_proxy, config: {}}]}]}]}",
			`filters[0].config: the v2 untyped config form is not supported for extension "envoy.redis_proxy"`},
		{"tls_context and transport_socket", webCluster("tls_context: {sni: a}", "transport_socket: {name: raw}"),
			`static_resources.clusters[0].tls_context: v2 field tls_context and transport_socket are both set`},
		{"ORIGINAL_DST_LB with STATIC", webCluster("type: STATIC", "lb_policy: ORIGINAL_DST_LB"),
			`static_resources.clusters[0].lb_policy: v2 value ORIGINAL_DST_LB needs type ORIGINAL_DST; got type = a string ("STATIC")`},
		{"drain and ignore health both set", webCluster("drain_connections_on_host_removal: true", "ignore_health_on_host_removal: true"),
			`drain_connections_on_host_removal: v2 field drain_connections_on_host_removal and its v3 name ignore_health_on_host_removal are both set`},
		{"bad v2 host", cluster("name: web", "connect_timeout: 1s", "hosts: [{socket_address: {address: 127.0.0.1, port: 80}}]"),
			`static_resources.clusters[0].hosts[0].socket_address.port: unknown field`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.yaml, Limits{})
			if err == nil {
				t.Fatalf("load succeeded; want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("load error =\n%v\nwant it to contain\n%s", err, tc.want)
			}
		})
	}
}

// TestStaticClusterWithoutEndpoints: Envoy accepts a STATIC cluster with no load_assignment (a
// control plane declares it before it has endpoints); it has no hosts.
func TestStaticClusterWithoutEndpoints(t *testing.T) {
	b, err := load(t, cluster("name: web", "connect_timeout: 1s", "type: STATIC"), Limits{})
	if err != nil {
		t.Fatalf("load error: %v", err)
	}
	if len(b.Clusters) != 1 {
		t.Fatalf("len(Clusters) = %d; want 1", len(b.Clusters))
	}
	if n := len(b.Clusters[0].LoadAssignment.Localities); n != 0 {
		t.Errorf("cluster web has %d localities; want none", n)
	}
}

// TestDeprecatedHTTPProtocolOptions: Cluster.http_protocol_options asking for the defaults loads
// with a deprecation warning.
func TestDeprecatedHTTPProtocolOptions(t *testing.T) {
	l, err := bootstrap.Parse([]byte(webCluster("http_protocol_options: {}")), bootstrap.FormatYAML, bootstrap.Options{Name: "envoy.yaml"})
	if err != nil {
		t.Fatalf("Parse error: %v", err)
	}
	if _, err := FromBootstrap(l.Bootstrap, Limits{}); err != nil {
		t.Fatalf("FromBootstrap error: %v", err)
	}
	want := []string{`envoy.yaml: static_resources.clusters[0].http_protocol_options: deprecated; use typed_extension_protocol_options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"] instead`}
	if diff := cmp.Diff(want, l.Warnings); diff != "" {
		t.Errorf("Warnings (-want +got):\n%s", diff)
	}
}

// TestDefaultRegexEngine: google_re2 (every Kuma bootstrap names it) is Legate's own engine and
// loads without a warning; another engine is refused.
func TestDefaultRegexEngine(t *testing.T) {
	const re2 = `default_regex_engine: {name: envoy.regex_engines.google_re2, typed_config: {"@type": type.googleapis.com/envoy.extensions.regex_engines.v3.GoogleRE2}}`
	l, err := bootstrap.Parse([]byte(re2), bootstrap.FormatYAML, bootstrap.Options{Name: "envoy.yaml"})
	if err != nil {
		t.Fatalf("Parse error: %v", err)
	}
	if len(l.Warnings) != 0 {
		t.Errorf("Warnings = %q; want none", l.Warnings)
	}
	if _, err := FromBootstrap(l.Bootstrap, Limits{}); err != nil {
		t.Errorf("FromBootstrap error: %v", err)
	}
	other := `default_regex_engine: {name: e, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}`
	_, err = load(t, other, Limits{})
	if want := "default_regex_engine.typed_config = \"type.googleapis.com/envoy.extensions.filters.http.router.v3.Router\": not implemented by Legate"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("load error = %v; want one containing %q", err, want)
	}
}

// TestBootstrapUpstreamBind: cluster_manager.upstream_bind_config is the source address of
// every cluster without an upstream_bind_config of its own (discovered clusters too, through
// Limits); a cluster's own one, even without an address, overrides it.
func TestBootstrapUpstreamBind(t *testing.T) {
	const cm = "cluster_manager: {upstream_bind_config: {source_address: {address: 127.0.0.1, port_value: 4242}}}\n"
	y := cm + "static_resources:\n  clusters:\n" +
		"  - {name: plain, connect_timeout: 1s}\n" +
		"  - {name: own, connect_timeout: 1s, upstream_bind_config: {source_address: {address: 127.0.0.2, port_value: 0}}}\n" +
		"  - {name: none, connect_timeout: 1s, upstream_bind_config: {}}\n"
	b, err := load(t, y, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"plain": "127.0.0.1:4242", "own": "127.0.0.2:0", "none": "<nil>"}
	for _, c := range b.Clusters {
		got := "<nil>"
		if c.UpstreamBindAddress != nil {
			got = c.UpstreamBindAddress.String()
		}
		if got != want[c.Name] {
			t.Errorf("cluster %s: UpstreamBindAddress = %s; want %s", c.Name, got, want[c.Name])
		}
	}
	if b.UpstreamBindAddress == nil || b.UpstreamBindAddress.String() != "127.0.0.1:4242" {
		t.Errorf("Bootstrap.UpstreamBindAddress = %v; want 127.0.0.1:4242", b.UpstreamBindAddress)
	}
	if _, err := load(t, "cluster_manager: {upstream_bind_config: {source_address: {address: localhost, port_value: 1}}}\n", Limits{}); err == nil ||
		!strings.Contains(err.Error(), "cluster_manager.upstream_bind_config.source_address") {
		t.Errorf("a host name as the bootstrap bind address: error = %v; want one naming cluster_manager.upstream_bind_config.source_address", err)
	}
}
