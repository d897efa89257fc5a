package config

import (
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/legateproxy/legate/bootstrap"
)

// clusterYAML decodes one v3 Cluster from YAML, strictly.
func clusterYAML(t testing.TB, y string) (*clusterv3.Cluster, error) {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatalf("YAMLToJSON: %v", err)
	}
	var c clusterv3.Cluster
	return &c, protojson.Unmarshal(j, &c)
}

func mustCluster(t *testing.T, y string) *Cluster {
	t.Helper()
	pc, err := clusterYAML(t, y)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	c, err := ClusterFromProto(pc, Limits{})
	if err != nil {
		t.Fatalf("ClusterFromProto: %v", err)
	}
	return c
}

func TestClusterDefaults(t *testing.T) {
	c := mustCluster(t, `
name: "web:80"
load_assignment:
  endpoints:
  - lb_endpoints:
    - endpoint: {address: {socket_address: {address: 10.0.0.1, port_value: 80}}}
`)
	want := &Cluster{
		Name:                          "web:80",
		StatName:                      "web_80",
		Type:                          Static,
		ConnectTimeout:                DefaultConnectTimeout,
		PerConnectionBufferLimitBytes: 1 << 20,
		LbPolicy:                      "ROUND_ROBIN",
		RingHash:                      RingHashLbConfig{MinimumRingSize: 1024, MaximumRingSize: 8388608},
		LeastRequest:                  LeastRequestLbConfig{ChoiceCount: 2, ActiveRequestBias: 1},
		Maglev:                        MaglevLbConfig{TableSize: 65537},
		CommonLb:                      CommonLbConfig{HealthyPanicThreshold: 50, UpdateMergeWindow: time.Second},
		LoadAssignment: LoadAssignment{
			OverprovisioningFactor: 140,
			Localities: []LocalityEndpoints{{Endpoints: []Endpoint{{
				Address: Address{Host: "10.0.0.1", Port: 80},
			}}}},
		},
		CircuitBreakers: CircuitBreakers{Thresholds: [2]Thresholds{
			{MaxConnections: 1024, MaxPendingRequests: 1024, MaxRequests: 1024, MaxRetries: 3},
			{MaxConnections: 1024, MaxPendingRequests: 1024, MaxRequests: 1024, MaxRetries: 3},
		}},
		DNSRefreshRate:  5 * time.Second,
		CleanupInterval: 5 * time.Second,
		HTTP:            UpstreamHTTPOptions{IdleTimeout: time.Hour, MaxHeadersCount: 100, MaxResponseHeadersBytes: 60 << 10},
	}
	if diff := cmp.Diff(want, c, cmpopts.IgnoreFields(Cluster{}, "Proto")); diff != "" {
		t.Errorf("ClusterFromProto() mismatch (-want +got):\n%s", diff)
	}
}

func TestClusterFields(t *testing.T) {
	c := mustCluster(t, `
name: dns
alt_stat_name: "alt:name"
type: STRICT_DNS
dns_lookup_family: V4_ONLY
dns_refresh_rate: 2s
respect_dns_ttl: true
dns_resolvers: [{socket_address: {address: 127.0.0.1, port_value: 53}}]
lb_policy: RING_HASH
ring_hash_lb_config: {minimum_ring_size: 64, maximum_ring_size: 128, hash_function: MURMUR_HASH_2}
common_lb_config:
  healthy_panic_threshold: {value: 33.9}
  update_merge_window: 0s
  zone_aware_lb_config: {min_cluster_size: 3}
lb_subset_config:
  fallback_policy: DEFAULT_SUBSET
  default_subset: {version: v1, weight: 2, enabled: true}
  subset_selectors: [{keys: [version]}]
  panic_mode_any: true
circuit_breakers:
  thresholds:
  - {priority: HIGH, max_connections: 7, track_remaining: true}
outlier_detection: {consecutive_5xx: 9}
health_checks:
- timeout: 1s
  interval: 2s
  unhealthy_threshold: 2
  healthy_threshold: 1
  http_health_check: {path: /hc}
load_assignment:
  endpoints:
  - locality: {region: r, zone: z}
    priority: 1
    load_balancing_weight: 3
    lb_endpoints:
    - endpoint: {address: {socket_address: {address: example.com, port_value: 80}}}
      load_balancing_weight: 5
      metadata: {filter_metadata: {envoy.lb: {canary: true, version: v1}}}
`)
	if c.StatName != "alt_name" {
		t.Errorf("StatName = %q; want %q", c.StatName, "alt_name")
	}
	if c.CommonLb.HealthyPanicThreshold != 33 {
		t.Errorf("HealthyPanicThreshold = %d; want 33 (truncated)", c.CommonLb.HealthyPanicThreshold)
	}
	if c.CommonLb.UpdateMergeWindow != 0 {
		t.Errorf("UpdateMergeWindow = %v; want 0", c.CommonLb.UpdateMergeWindow)
	}
	if diff := cmp.Diff(&ZoneAwareLbConfig{RoutingEnabled: 100, MinClusterSize: 3}, c.CommonLb.ZoneAware); diff != "" {
		t.Errorf("ZoneAware mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&LbSubsetConfig{
		FallbackPolicy: DefaultSubset, DefaultSubset: map[string]string{"version": "v1", "weight": "2", "enabled": "true"},
		Selectors: [][]string{{"version"}}, PanicModeAny: true,
	}, c.LbSubset); diff != "" {
		t.Errorf("LbSubset mismatch (-want +got):\n%s", diff)
	}
	wantCB := [2]Thresholds{DefaultThresholds(), {MaxConnections: 7, MaxPendingRequests: 1024, MaxRequests: 1024, MaxRetries: 3, TrackRemaining: true}}
	if diff := cmp.Diff(wantCB, c.CircuitBreakers.Thresholds); diff != "" {
		t.Errorf("CircuitBreakers mismatch (-want +got):\n%s", diff)
	}
	if c.OutlierDetection == nil || c.OutlierDetection.Consecutive5xx != 9 || c.OutlierDetection.Interval != 10*time.Second {
		t.Errorf("OutlierDetection = %+v; want consecutive_5xx 9 and interval 10s", c.OutlierDetection)
	}
	if c.HealthCheck == nil || c.HealthCheck.Kind != HTTPHealthCheckKind || c.HealthCheck.NoTrafficInterval != time.Minute {
		t.Errorf("HealthCheck = %+v; want an http check with no_traffic_interval 60s", c.HealthCheck)
	}
	if got, want := c.RingHash, (RingHashLbConfig{64, 128, MurmurHash2}); got != want {
		t.Errorf("RingHash = %+v; want %+v", got, want)
	}
	if c.DNSLookupFamily != V4Only || c.DNSRefreshRate != 2*time.Second || !c.RespectDNSTTL || len(c.DNSResolution.Servers) != 1 {
		t.Errorf("DNS settings = %v %v %v %v; want V4_ONLY 2s true [127.0.0.1:53]", c.DNSLookupFamily, c.DNSRefreshRate, c.RespectDNSTTL, c.DNSResolution.Servers)
	}
	wantLA := LoadAssignment{
		OverprovisioningFactor: 140, HasLocalityWeights: true,
		Localities: []LocalityEndpoints{{Region: "r", Zone: "z", Priority: 1, Weight: 3, Endpoints: []Endpoint{{
			Address: Address{Host: "example.com", Port: 80}, Weight: 5,
			Metadata: map[string]string{"canary": "true", "version": "v1"}, Canary: true,
		}}}},
	}
	// FilterMetadata and RawMetadata are the endpoint's metadata as it came.
	if diff := cmp.Diff(wantLA, c.LoadAssignment, cmpopts.IgnoreFields(Endpoint{}, "FilterMetadata", "RawMetadata")); diff != "" {
		t.Errorf("LoadAssignment mismatch (-want +got):\n%s", diff)
	}
	// The whole filter metadata is kept for internal_upstream's passthrough_metadata.
	if la := c.LoadAssignment.Localities; len(la) == 1 && len(la[0].Endpoints) == 1 {
		if v := la[0].Endpoints[0].FilterMetadata["envoy.lb"].GetFields()["version"].GetStringValue(); v != "v1" {
			t.Errorf("FilterMetadata[envoy.lb][version] = %q; want v1", v)
		}
	}
}

func TestClusterOriginalDstHeaders(t *testing.T) {
	c := mustCluster(t, `
name: odst
type: ORIGINAL_DST
lb_policy: CLUSTER_PROVIDED
cleanup_interval: 1s
original_dst_lb_config: {use_http_header: true}
`)
	want := []string{OriginalDstHeader, OriginalDstHeaderSpec}
	if diff := cmp.Diff(want, c.OriginalDst.HeaderNames); diff != "" {
		t.Errorf("HeaderNames mismatch (-want +got):\n%s", diff)
	}
	if c.CleanupInterval != time.Second {
		t.Errorf("CleanupInterval = %v; want 1s", c.CleanupInterval)
	}
}

func TestClusterAggregate(t *testing.T) {
	c := mustCluster(t, `
name: agg
lb_policy: CLUSTER_PROVIDED
cluster_type:
  name: envoy.clusters.aggregate
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.clusters.aggregate.v3.ClusterConfig
    clusters: [a, b]
`)
	if c.Type != Custom || c.CustomType == nil {
		t.Fatalf("Type = %v, CustomType = %+v; want a custom type", c.Type, c.CustomType)
	}
	if diff := cmp.Diff(&AggregateConfig{Clusters: []string{"a", "b"}}, c.CustomType.Settings); diff != "" {
		t.Errorf("CustomType.Settings mismatch (-want +got):\n%s", diff)
	}
}

func TestClusterTypes(t *testing.T) {
	if diff := cmp.Diff([]string{AggregateClusterType, DynamicForwardProxyClusterType}, ClusterTypes(Limits{}.extensions())); diff != "" {
		t.Errorf("ClusterTypes() mismatch (-want +got):\n%s", diff)
	}
}

// TestClusterErrors covers every row of the spec's Errors table and the Limits table, and the
// discovery-type rules Envoy enforces.
func TestClusterErrors(t *testing.T) {
	long := strings.Repeat("x", 61)
	tests := []struct {
		name, yaml, want string
		decodeErr        bool
	}{
		{name: "ring hash config with other policy", yaml: "name: a\nlb_policy: ROUND_ROBIN\nring_hash_lb_config: {}", want: "ring_hash_lb_config is set, but lb_policy = ROUND_ROBIN"},
		{name: "least request config with other policy", yaml: "name: a\nlb_policy: RANDOM\nleast_request_lb_config: {}", want: "least_request_lb_config is set, but lb_policy = RANDOM"},
		{name: "maglev config with other policy", yaml: "name: a\nmaglev_lb_config: {}", want: "maglev_lb_config is set, but lb_policy = ROUND_ROBIN"},
		{name: "two lb configs (oneof)", yaml: "name: a\nlb_policy: RING_HASH\nring_hash_lb_config: {}\nleast_request_lb_config: {}", decodeErr: true},
		{name: "type and cluster_type (oneof)", yaml: "name: a\ntype: STATIC\ncluster_type: {name: envoy.clusters.aggregate}", decodeErr: true},
		{name: "zone aware and locality weighted (oneof)", yaml: "name: a\ncommon_lb_config: {zone_aware_lb_config: {}, locality_weighted_lb_config: {}}", decodeErr: true},
		{name: "empty name", yaml: "type: STATIC", want: "name is empty"},
		{name: "name too long", yaml: "name: " + long, want: "is 61 characters; must be at most 60"},
		{name: "minimum ring size", yaml: "name: a\nlb_policy: RING_HASH\nring_hash_lb_config: {minimum_ring_size: 8388609}", want: "minimum_ring_size = 8388609; must be <= 8388608"},
		{name: "maximum ring size", yaml: "name: a\nlb_policy: RING_HASH\nring_hash_lb_config: {maximum_ring_size: 9000000}", want: "maximum_ring_size = 9000000; must be <= 8388608"},
		{name: "min above max ring size", yaml: "name: a\nlb_policy: RING_HASH\nring_hash_lb_config: {minimum_ring_size: 10, maximum_ring_size: 5}", want: "minimum_ring_size = 10; must be <= maximum_ring_size (5)"},
		{name: "panic threshold", yaml: "name: a\ncommon_lb_config: {healthy_panic_threshold: {value: 120}}", want: "healthy_panic_threshold.value = 120; must be in 0..100"},
		{name: "choice count", yaml: "name: a\nlb_policy: LEAST_REQUEST\nleast_request_lb_config: {choice_count: 1}", want: "choice_count = 1; must be >= 2"},
		{name: "maglev table size", yaml: "name: a\nlb_policy: MAGLEV\nmaglev_lb_config: {table_size: 100}", want: "table_size = 100; must be a prime"},
		{name: "eds config on static", yaml: "name: a\neds_cluster_config: {service_name: s}", want: "eds_cluster_config is set, but type = STATIC"},
		{name: "unknown cluster type", yaml: "name: a\ncluster_type: {name: envoy.clusters.redis}", want: `cluster_type.name = "envoy.clusters.redis"; must match a supported cluster type`},
		{name: "aggregate without config", yaml: "name: a\ncluster_type: {name: envoy.clusters.aggregate}", want: "cluster_type.typed_config is missing"},
		{name: "original dst with round robin", yaml: "name: a\ntype: ORIGINAL_DST", want: "lb_policy = ROUND_ROBIN is not valid for type ORIGINAL_DST"},
		{name: "cluster provided without original dst", yaml: "name: a\nlb_policy: CLUSTER_PROVIDED", want: "lb_policy = CLUSTER_PROVIDED needs type ORIGINAL_DST"},
		{name: "logical dns with two endpoints", yaml: "name: a\ntype: LOGICAL_DNS\nload_assignment: {endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: a, port_value: 1}}}}, {endpoint: {address: {socket_address: {address: b, port_value: 1}}}}]}]}", want: "LOGICAL_DNS clusters must have exactly one"},
		{name: "static with a name", yaml: "name: a\nload_assignment: {endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: example.com, port_value: 1}}}}]}]}", want: `socket_address.address = "example.com"; a STATIC cluster needs an IP address`},
		{name: "endpoint weight zero", yaml: "name: a\nload_assignment: {endpoints: [{lb_endpoints: [{load_balancing_weight: 0, endpoint: {address: {socket_address: {address: 1.2.3.4, port_value: 1}}}}]}]}", want: "lb_endpoints[0].load_balancing_weight = 0; must be in 1..100"},
		{name: "endpoint weight over 100", yaml: "name: a\nload_assignment: {endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 1.2.3.4, port_value: 1}}}}, {load_balancing_weight: 101, endpoint: {address: {socket_address: {address: 1.2.3.5, port_value: 1}}}}]}]}", want: "load_assignment.endpoints[0].lb_endpoints[1].load_balancing_weight = 101; must be in 1..100"},
		{name: "socket match without a name", yaml: "name: a\ntransport_socket_matches: [{match: {}, transport_socket: {name: envoy.transport_sockets.raw_buffer}}]", want: "transport_socket_matches[0].name: empty"},
		{name: "socket match names twice", yaml: "name: a\ntransport_socket_matches: [{name: m, transport_socket: {name: raw_buffer}}, {name: m, transport_socket: {name: raw_buffer}}]", want: `transport_socket_matches[1].name = "m": listed twice`},
		{name: "socket match with an unknown socket", yaml: "name: a\ntransport_socket_matches: [{name: m, transport_socket: {name: envoy.transport_sockets.alts}}]", want: "transport_socket_matches[0].transport_socket.typed_config: missing"},
		{name: "transport_socket_matcher empty", yaml: "name: a\ntransport_socket_matcher: {}", want: "transport_socket_matcher: one of matcher_list, matcher_tree or on_no_match is required"},
		{name: "health check without checker", yaml: "name: a\nhealth_checks: [{timeout: 1s, interval: 1s}]", want: "health_checks[0]: no health checker set"},
		{name: "two health checks", yaml: "name: web\nhealth_checks:\n- " + hcEntry + "  http_health_check: {path: /healthz}\n- " + hcEntry + "  tcp_health_check: {}", want: `cluster "web": health_checks has 2 entries; at most one health check per cluster is supported`},
		{name: "grpc health check without http2", yaml: "name: web\nhealth_checks:\n- " + hcEntry + "  grpc_health_check: {}", want: `cluster "web": health_checks[0].grpc_health_check is set but the cluster has no http2_protocol_options`},
		{name: "health check without thresholds", yaml: "name: web\nhealth_checks: [{timeout: 1s, interval: 5s, tcp_health_check: {}}]", want: `cluster "web": health_checks[0]: invalid health check: unhealthy_threshold is unset`},
		{name: "invalid outlier detection", yaml: "name: web\noutlier_detection: {base_ejection_time: 400s, max_ejection_time: 10s}", want: `cluster "web": invalid outlier_detection: outlier_detection.max_ejection_time = 10s; must be >= base_ejection_time`},
		{name: "subset selector without keys", yaml: "name: a\nlb_subset_config: {subset_selectors: [{keys: []}]}", want: "subset_selectors[0].keys is empty"},
		{name: "proxy protocol host TLVs of another type", yaml: "name: a\nload_assignment: {endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 1.2.3.4, port_value: 1}}}, metadata: {typed_filter_metadata: {envoy.transport_sockets.proxy_protocol: {'@type': type.googleapis.com/google.protobuf.StringValue, value: x}}}}]}]}",
			want: `load_assignment.endpoints[0].lb_endpoints[0].metadata.typed_filter_metadata["envoy.transport_sockets.proxy_protocol"]: type "google.protobuf.StringValue"; want envoy.config.core.v3.PerHostConfig`},
		{name: "proxy protocol host TLV type", yaml: "name: a\nload_assignment: {endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 1.2.3.4, port_value: 1}}}, metadata: {typed_filter_metadata: {envoy.transport_sockets.proxy_protocol: {'@type': type.googleapis.com/envoy.config.core.v3.PerHostConfig, added_tlvs: [{type: 300, value: eA==}]}}}}]}]}",
			want: `typed_filter_metadata["envoy.transport_sockets.proxy_protocol"].added_tlvs[0].type: 300; TLV types are one byte (0-255)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pc, err := clusterYAML(t, tt.yaml)
			if tt.decodeErr {
				if err == nil {
					t.Fatalf("decode(%q) = nil error; want a oneof error", tt.yaml)
				}
				return
			}
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			_, err = ClusterFromProto(pc, Limits{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ClusterFromProto() error = %v; want it to contain %q", err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "cluster ") {
				t.Errorf("error %q does not name the cluster", err)
			}
		})
	}
}

func TestClusterNameLimitRaised(t *testing.T) {
	pc, err := clusterYAML(t, "name: "+strings.Repeat("x", 61))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ClusterFromProto(pc, Limits{MaxObjNameLen: 100}); err != nil {
		t.Errorf("ClusterFromProto(MaxObjNameLen 100) = %v; want nil", err)
	}
}

// TestClusterV2Spellings loads the spec's v2 spellings through bootstrap, which upgrades them.
func TestClusterV2Spellings(t *testing.T) {
	l, err := bootstrap.Parse([]byte(`
static_resources:
  clusters:
  - name: v2
    connect_timeout: 1s
    type: STRICT_DNS
    lb_policy: ROUND_ROBIN
    drain_connections_on_host_removal: true
    hosts: [{socket_address: {address: localhost, port_value: 80}}]
  - name: odst
    connect_timeout: 1s
    type: ORIGINAL_DST
    lb_policy: ORIGINAL_DST_LB
`), bootstrap.FormatYAML, bootstrap.Options{Name: "v2.yaml"})
	if err != nil {
		t.Fatalf("bootstrap.Parse: %v", err)
	}
	cs := l.Bootstrap.GetStaticResources().GetClusters()
	v2, err := ClusterFromProto(cs[0], Limits{})
	if err != nil {
		t.Fatalf("ClusterFromProto(v2): %v", err)
	}
	if !v2.DrainConnectionsOnHostRemoval || len(v2.LoadAssignment.Localities) != 1 {
		t.Errorf("v2 cluster = drain %v, %d localities; want true, 1", v2.DrainConnectionsOnHostRemoval, len(v2.LoadAssignment.Localities))
	}
	odst, err := ClusterFromProto(cs[1], Limits{})
	if err != nil {
		t.Fatalf("ClusterFromProto(odst): %v", err)
	}
	if odst.LbPolicy != "CLUSTER_PROVIDED" {
		t.Errorf("LbPolicy = %q; want CLUSTER_PROVIDED", odst.LbPolicy)
	}
}

func TestAddressString(t *testing.T) {
	tests := []struct {
		name string
		a    Address
		want string
	}{
		{"ipv4", Address{Host: "10.0.0.1", Port: 80}, "10.0.0.1:80"},
		{"ipv6", Address{Host: "::1", Port: 80}, "[::1]:80"},
		{"pipe", Address{Kind: PipeAddress, Path: "/tmp/s"}, "/tmp/s"},
		{"internal", Address{Kind: InternalAddress, Path: "l", EndpointID: "e"}, "envoy://l/e"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.String(); got != tt.want {
				t.Errorf("String() = %q; want %q", got, tt.want)
			}
		})
	}
}

func FuzzClusterFromProto(f *testing.F) {
	f.Add([]byte(`{"name":"a","type":"STRICT_DNS","load_assignment":{"endpoints":[{"lb_endpoints":[{"endpoint":{"address":{"socket_address":{"address":"x","port_value":1}}}}]}]}}`))
	f.Add([]byte(`{"name":"b","lb_policy":"RING_HASH","ring_hash_lb_config":{"minimum_ring_size":"3"}}`))
	const lbt = `"@type":"type.googleapis.com/envoy.extensions.load_balancing_policies.`
	f.Add([]byte(`{"name":"c","load_balancing_policy":{"policies":[{"typed_extension_config":{"name":"p","typed_config":{` + lbt + `pick_first.v3.PickFirst"}}},{"typed_extension_config":{"name":"r","typed_config":{` + lbt + `ring_hash.v3.RingHash","minimum_ring_size":"64","hash_function":"MURMUR_HASH_2"}}}]}}`))
	f.Add([]byte(`{"name":"d","load_balancing_policy":{"policies":[{"typed_extension_config":{"name":"w","typed_config":{` + lbt + `wrr_locality.v3.WrrLocality","endpoint_picking_policy":{"policies":[{"typed_extension_config":{"name":"l","typed_config":{` + lbt + `least_request.v3.LeastRequest","choice_count":3}}}]}}}}]}}`))
	f.Add([]byte(`{"name":"e","type":"ORIGINAL_DST","load_balancing_policy":{"policies":[{"typed_extension_config":{"name":"c","typed_config":{` + lbt + `cluster_provided.v3.ClusterProvided"}}}]}}`))
	f.Add([]byte(`{"name":"f","filters":[{"name":"x"}],"track_cluster_stats":{"timeout_budgets":true},"upstream_bind_config":{"source_address":{"address":"127.0.0.1","port_value":0},"freebind":true}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c clusterv3.Cluster
		if protojson.Unmarshal(data, &c) != nil {
			return
		}
		out, err := ClusterFromProto(&c, Limits{})
		if err == nil && out.Name == "" {
			t.Errorf("ClusterFromProto accepted an empty name")
		}
		if err == nil && c.GetFilters() != nil {
			t.Errorf("ClusterFromProto accepted filters, which Legate refuses")
		}
	})
}

// typedHTTPCluster is a cluster whose typed_extension_protocol_options hold the upstream
// HttpProtocolOptions fields given, with extra cluster fields.
func typedHTTPCluster(fields, extra string) string {
	return `
name: web
load_assignment:
  endpoints:
  - lb_endpoints:
    - endpoint: {address: {socket_address: {address: 10.0.0.1, port_value: 80}}}
typed_extension_protocol_options:
  envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
    "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
    ` + fields + "\n" + extra
}

const tlsSocket = `transport_socket: {name: envoy.transport_sockets.tls, typed_config: {"@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext}}`

func TestClusterUpstreamHTTPOptions(t *testing.T) {
	tests := []struct {
		name, fields, extra string
		http2, auto         bool
		sel                 ProtocolSelection
		opts                UpstreamHTTPOptions
		maxRequests         uint32
		ignored             []string
	}{
		{
			name:        "explicit http2 with common options",
			fields:      "explicit_http_config: {http2_protocol_options: {}}\n    common_http_protocol_options: {idle_timeout: 7s, max_connection_duration: 60s, max_headers_count: 20, max_response_headers_kb: 16, max_stream_duration: 3s, max_requests_per_connection: 9}",
			http2:       true,
			opts:        UpstreamHTTPOptions{IdleTimeout: 7 * time.Second, MaxConnectionDuration: time.Minute, MaxHeadersCount: 20, MaxResponseHeadersBytes: 16 << 10, MaxStreamDuration: 3 * time.Second},
			maxRequests: 9,
		},
		{
			name:   "explicit http1",
			fields: "explicit_http_config: {http_protocol_options: {}}",
			opts:   UpstreamHTTPOptions{IdleTimeout: time.Hour, MaxHeadersCount: 100, MaxResponseHeadersBytes: 60 << 10},
		},
		{
			name:   "idle timeout 0 disables",
			fields: "explicit_http_config: {http_protocol_options: {}}\n    common_http_protocol_options: {idle_timeout: 0s}",
			opts:   UpstreamHTTPOptions{MaxHeadersCount: 100, MaxResponseHeadersBytes: 60 << 10},
		},
		{
			name:   "downstream protocol",
			fields: "use_downstream_protocol_config: {http2_protocol_options: {}}",
			sel:    UseDownstreamProtocol,
			opts:   UpstreamHTTPOptions{IdleTimeout: time.Hour, MaxHeadersCount: 100, MaxResponseHeadersBytes: 60 << 10},
		},
		{
			name:   "auto over TLS",
			fields: "auto_config: {http2_protocol_options: {}}",
			extra:  tlsSocket,
			auto:   true,
			opts:   UpstreamHTTPOptions{IdleTimeout: time.Hour, MaxHeadersCount: 100, MaxResponseHeadersBytes: 60 << 10},
		},
		{
			name:    "typed options replace the cluster's",
			fields:  "explicit_http_config: {http_protocol_options: {}}",
			extra:   "http2_protocol_options: {}\ncommon_http_protocol_options: {idle_timeout: 5s}\nprotocol_selection: USE_DOWNSTREAM_PROTOCOL",
			opts:    UpstreamHTTPOptions{IdleTimeout: time.Hour, MaxHeadersCount: 100, MaxResponseHeadersBytes: 60 << 10},
			ignored: []string{"http2_protocol_options (replaced by typed_extension_protocol_options[\"envoy.extensions.upstreams.http.v3.HttpProtocolOptions\"])", "common_http_protocol_options (replaced by typed_extension_protocol_options[\"envoy.extensions.upstreams.http.v3.HttpProtocolOptions\"])", "protocol_selection (replaced by typed_extension_protocol_options[\"envoy.extensions.upstreams.http.v3.HttpProtocolOptions\"])"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := mustCluster(t, typedHTTPCluster(tc.fields, tc.extra))
			if c.HTTP2 != tc.http2 || c.AutoHTTP != tc.auto || c.ProtocolSelection != tc.sel {
				t.Errorf("HTTP2, AutoHTTP, ProtocolSelection = %v, %v, %v; want %v, %v, %v", c.HTTP2, c.AutoHTTP, c.ProtocolSelection, tc.http2, tc.auto, tc.sel)
			}
			if diff := cmp.Diff(tc.opts, c.HTTP); diff != "" {
				t.Errorf("HTTP (-want +got):\n%s", diff)
			}
			if c.MaxRequestsPerConnection != tc.maxRequests {
				t.Errorf("MaxRequestsPerConnection = %d; want %d", c.MaxRequestsPerConnection, tc.maxRequests)
			}
			if diff := cmp.Diff(tc.ignored, c.Ignored, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Ignored (-want +got):\n%s", diff)
			}
		})
	}
}

// TestClusterAutoSNIOptions reads upstream_http_protocol_options from the typed
// HttpProtocolOptions and from the Cluster, the typed one replacing the Cluster's.
func TestClusterAutoSNIOptions(t *testing.T) {
	tests := []struct {
		name, y string
		want    UpstreamHTTPProtocolOptions
	}{
		{"typed", typedHTTPCluster("explicit_http_config: {http_protocol_options: {}}\n    upstream_http_protocol_options: {auto_sni: true, auto_san_validation: true, override_auto_sni_header: X-SNI}", ""),
			UpstreamHTTPProtocolOptions{AutoSNI: true, AutoSANValidation: true, OverrideAutoSNIHeader: "x-sni"}},
		{"cluster", `
name: web
load_assignment: {endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 10.0.0.1, port_value: 80}}}}]}]}
upstream_http_protocol_options: {auto_san_validation: true}
`, UpstreamHTTPProtocolOptions{AutoSANValidation: true}},
		{"typed replaces cluster", typedHTTPCluster("explicit_http_config: {http_protocol_options: {}}\n    upstream_http_protocol_options: {auto_sni: true}", "upstream_http_protocol_options: {auto_san_validation: true}"),
			UpstreamHTTPProtocolOptions{AutoSNI: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pc, err := clusterYAML(t, tc.y)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			c, err := ClusterFromProto(pc, Limits{})
			if err != nil {
				t.Fatalf("ClusterFromProto: %v", err)
			}
			if c.UpstreamHTTP != tc.want {
				t.Fatalf("UpstreamHTTP = %+v; want %+v", c.UpstreamHTTP, tc.want)
			}
		})
	}
}

func TestClusterUpstreamHTTPOptionsRefused(t *testing.T) {
	tests := []struct{ name, y, want string }{
		{"auto without TLS", typedHTTPCluster("auto_config: {}", ""), `auto_config: set on a cluster without a TLS transport_socket`},
		{"max requests twice", typedHTTPCluster("common_http_protocol_options: {max_requests_per_connection: 2}", "max_requests_per_connection: 3"), "max_requests_per_connection and typed_extension_protocol_options"},
		{"other key", `
name: web
load_assignment: {endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 10.0.0.1, port_value: 80}}}}]}]}
typed_extension_protocol_options:
  envoy.filters.network.thrift_proxy: {"@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions, explicit_http_config: {http_protocol_options: {}}}
`, `typed_extension_protocol_options["envoy.filters.network.thrift_proxy"]: set; not implemented by Legate`},
		{"hpack table off", typedHTTPCluster("explicit_http_config: {http2_protocol_options: {hpack_table_size: 0}}", ""), "http2_protocol_options.hpack_table_size = 0"},
		{"headers kb too large", typedHTTPCluster("common_http_protocol_options: {max_response_headers_kb: 9000}", ""), "max_response_headers_kb = 9000; must be 1 to 8192"},
		{"http1 option delegated", typedHTTPCluster("explicit_http_config: {http_protocol_options: {allow_custom_methods: true}}", ""), `typed_extension_protocol_options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].explicit_http_config.http_protocol_options.allow_custom_methods: set; not implemented by Legate`},
		{"override header not a name", typedHTTPCluster("explicit_http_config: {http_protocol_options: {}}\n    upstream_http_protocol_options: {auto_sni: true, override_auto_sni_header: \"x sni\"}", ""), `typed_extension_protocol_options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].upstream_http_protocol_options.override_auto_sni_header = "x sni"; not a valid HTTP header name`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pc, err := clusterYAML(t, tc.y)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			_, err = ClusterFromProto(pc, Limits{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ClusterFromProto error = %v; want it to contain %q", err, tc.want)
			}
		})
	}
}

// hcEntry is the schedule of a valid health check, the first line of a YAML list entry.
const hcEntry = "timeout: 1s\n  interval: 5s\n  unhealthy_threshold: 2\n  healthy_threshold: 2\n"

func TestClusterHealthChecking(t *testing.T) {
	pc, err := clusterYAML(t, "name: web\nhttp2_protocol_options: {}\nhealth_checks:\n- "+hcEntry+"  grpc_health_check: {}\noutlier_detection: {consecutive_5xx: 3}")
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	c, err := ClusterFromProto(pc, Limits{})
	if err != nil {
		t.Fatalf("ClusterFromProto() = %v; want a gRPC health check on an HTTP/2 cluster accepted", err)
	}
	if c.HealthCheck == nil || c.HealthCheck.Kind != GRPCHealthCheckKind || c.HealthCheck.UnhealthyThreshold != 2 {
		t.Errorf("HealthCheck = %+v; want a gRPC check with unhealthy_threshold 2", c.HealthCheck)
	}
	if c.OutlierDetection == nil || c.OutlierDetection.Consecutive5xx != 3 || !c.OutlierDetection.SuccessfulActiveHealthCheckUnejectHost {
		t.Errorf("OutlierDetection = %+v; want consecutive_5xx 3 and Envoy's defaults", c.OutlierDetection)
	}
	pc.HealthChecks, pc.OutlierDetection = nil, nil
	if c, err = ClusterFromProto(pc, Limits{}); err != nil || c.HealthCheck != nil || c.OutlierDetection != nil {
		t.Errorf("ClusterFromProto() without health checking = %+v, %v; want no HealthCheck and no OutlierDetection", c, err)
	}
}

// TestDeprecatedExtensionProtocolOptions: the v2 map extension_protocol_options, under the
// upstream HttpProtocolOptions key, is read as the typed options are.
func TestDeprecatedExtensionProtocolOptions(t *testing.T) {
	b, err := load(t, cluster("name: web", "connect_timeout: 1s", endpoints,
		"extension_protocol_options: {envoy.extensions.upstreams.http.v3.HttpProtocolOptions: {explicit_http_config: {http2_protocol_options: {initial_stream_window_size: 70000}}, common_http_protocol_options: {idle_timeout: 3s, max_stream_duration: 2s}}}"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	c := b.Clusters[0]
	if !c.HTTP2 || c.HTTP.IdleTimeout != 3*time.Second || c.HTTP.MaxStreamDuration != 2*time.Second || c.HTTP2Options.InitialStreamWindowSize != 70000 {
		t.Errorf("HTTP2 %v, idle_timeout %v, max_stream_duration %v, initial_stream_window_size %d; want true, 3s, 2s, 70000",
			c.HTTP2, c.HTTP.IdleTimeout, c.HTTP.MaxStreamDuration, c.HTTP2Options.InitialStreamWindowSize)
	}
}
