package config

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func dfpCluster(typedConfig string) string {
	return `name: egress
lb_policy: CLUSTER_PROVIDED
cluster_type:
  name: envoy.clusters.dynamic_forward_proxy
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.clusters.dynamic_forward_proxy.v3.ClusterConfig
    ` + typedConfig
}

// TestDynamicForwardProxyCluster: the DNS cache's fields with Envoy's defaults, and what each
// set field becomes.
func TestDynamicForwardProxyCluster(t *testing.T) {
	defaults := DNSCacheConfig{Name: "c", RefreshRate: time.Minute, MinRefreshRate: 5 * time.Second,
		FailureRefreshRate: time.Minute, HostTTL: 5 * time.Minute, MaxHosts: 1024, MaxPendingRequests: 1024, QueryTimeout: 5 * time.Second}
	tests := []struct {
		name, cache string
		want        DNSCacheConfig
	}{
		{"defaults", "{name: c}", defaults},
		{"every field", `{name: c, dns_lookup_family: V4_ONLY, dns_refresh_rate: 10s, dns_min_refresh_rate: 2s,
  dns_failure_refresh_rate: {base_interval: 3s, max_interval: 9s}, disable_dns_refresh_on_failure: true,
  host_ttl: 30s, max_hosts: 7, dns_cache_circuit_breaker: {max_pending_requests: 3}, dns_query_timeout: 1s,
  preresolve_hostnames: [{address: Example.test, port_value: 443}, {address: "::1", port_value: 80}],
  typed_dns_resolver_config: {name: envoy.network.dns_resolver.cares, typed_config: {
    "@type": type.googleapis.com/envoy.extensions.network.dns_resolver.cares.v3.CaresDnsResolverConfig,
    resolvers: [{socket_address: {address: 127.0.0.1, port_value: 5353}}, {socket_address: {address: 127.0.0.2}}]}}}`,
			DNSCacheConfig{Name: "c", LookupFamily: V4Only, RefreshRate: 10 * time.Second, MinRefreshRate: 2 * time.Second,
				FailureRefreshRate: 3 * time.Second, DisableRefreshOnFailure: true, HostTTL: 30 * time.Second, MaxHosts: 7,
				MaxPendingRequests: 3, QueryTimeout: time.Second, Resolution: DNSResolution{Servers: []string{"127.0.0.1:5353", "127.0.0.2:53"}},
				Preresolve: []string{"Example.test:443", "[::1]:80"}}},
		{"getaddrinfo", `{name: c, typed_dns_resolver_config: {name: envoy.network.dns_resolver.getaddrinfo, typed_config: {
    "@type": type.googleapis.com/envoy.extensions.network.dns_resolver.getaddrinfo.v3.GetAddrInfoDnsResolverConfig}}}`, defaults},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCluster(t, dfpCluster("dns_cache_config: "+tt.cache))
			got, ok := c.CustomType.Settings.(*DynamicForwardProxyConfig)
			if !ok {
				t.Fatalf("Settings = %T; want *DynamicForwardProxyConfig", c.CustomType.Settings)
			}
			if diff := cmp.Diff(tt.want, got.DNSCache, cmp.AllowUnexported(AddressFilter{})); diff != "" {
				t.Errorf("DNSCache (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDynamicForwardProxyClusterRefused(t *testing.T) {
	tests := []struct{ name, typed, want string }{
		{"no cache", "allow_coalesced_connections: false", "dns_cache_config: missing"},
		{"sub-cluster lb", "sub_clusters_config: {lb_policy: CLUSTER_PROVIDED}", "typed_config.sub_clusters_config.lb_policy = CLUSTER_PROVIDED; a sub-cluster is a STRICT_DNS cluster"},
		{"sub-cluster dns cluster", "sub_clusters_config: {dns_cluster_config: {}}", "typed_config.sub_clusters_config.dns_cluster_config: not implemented by Legate"},
		{"coalesced", "dns_cache_config: {name: c}\n    allow_coalesced_connections: true", "allow_coalesced_connections: not implemented by Legate"},
		{"key value store", "dns_cache_config: {name: c, key_value_config: {config: {name: x, typed_config: {\"@type\": type.googleapis.com/google.protobuf.Struct, value: {}}}}}", "dns_cache_config.key_value_config: not implemented by Legate"},
		{"resolution config without resolvers", "dns_cache_config: {name: c, dns_resolution_config: {}}", "invalid DnsResolutionConfig.Resolvers: value must contain at least 1 item(s)"},
		{"resolver by name", "dns_cache_config: {name: c, dns_resolution_config: {resolvers: [{socket_address: {address: dns.test, port_value: 53}}]}}", "dns_cache_config.dns_resolution_config.resolvers[0]: must be an IP socket address"},
		{"cares option", `dns_cache_config: {name: c, typed_dns_resolver_config: {name: r, typed_config: {"@type": type.googleapis.com/envoy.extensions.network.dns_resolver.cares.v3.CaresDnsResolverConfig, use_resolvers_as_fallback: true}}}`,
			"typed_dns_resolver_config.typed_config: only resolvers and dns_resolver_options are implemented by Legate"},
		{"other resolver", `dns_cache_config: {name: c, typed_dns_resolver_config: {name: r, typed_config: {"@type": type.googleapis.com/google.protobuf.Struct, value: {}}}}`,
			`typed_dns_resolver_config.typed_config: type "type.googleapis.com/google.protobuf.Struct"`},
		{"preresolve without port", "dns_cache_config: {name: c, preresolve_hostnames: [{address: a.test}]}", "PreresolveHostnames[0]: embedded message failed validation"},
		{"empty name", "dns_cache_config: {name: \"\"}", "invalid DnsCacheConfig.Name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := dfpCluster(tt.typed)
			pc, err := clusterYAML(t, y)
			if err != nil {
				t.Fatalf("decode: %v\n%s", err, y)
			}
			_, err = ClusterFromProto(pc, Limits{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ClusterFromProto() = %v; want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestDNSResolution: the resolver fields of a DNS cache and of a cluster merge as Envoy's do:
// typed_dns_resolver_config wins over dns_resolution_config, which wins over
// use_tcp_for_dns_lookups and a cluster's dns_resolvers.
func TestDNSResolution(t *testing.T) {
	const (
		cares      = `typed_dns_resolver_config: {name: envoy.network.dns_resolver.cares, typed_config: {"@type": type.googleapis.com/envoy.extensions.network.dns_resolver.cares.v3.CaresDnsResolverConfig, resolvers: [{socket_address: {address: 127.0.0.3, port_value: 5300}}], dns_resolver_options: {no_default_search_domain: true}}}`
		gai        = `typed_dns_resolver_config: {name: envoy.network.dns_resolver.getaddrinfo, typed_config: {"@type": type.googleapis.com/envoy.extensions.network.dns_resolver.getaddrinfo.v3.GetAddrInfoDnsResolverConfig, num_retries: 4, num_resolver_threads: 2}}`
		resolution = `dns_resolution_config: {resolvers: [{socket_address: {address: "::1", port_value: 0}}], dns_resolver_options: {use_tcp_for_dns_lookups: true, no_default_search_domain: true}}`
	)
	tests := []struct {
		name, fields string
		want         DNSResolution
	}{
		{"none", "", DNSResolution{}},
		{"use_tcp_for_dns_lookups", "use_tcp_for_dns_lookups: true", DNSResolution{TCP: true}},
		{"dns_resolution_config", resolution, DNSResolution{Servers: []string{"[::1]:53"}, TCP: true, NoSearchDomain: true}},
		{"resolution config over use_tcp", resolution + "\nuse_tcp_for_dns_lookups: false", DNSResolution{Servers: []string{"[::1]:53"}, TCP: true, NoSearchDomain: true}},
		{"cares", cares, DNSResolution{Servers: []string{"127.0.0.3:5300"}, NoSearchDomain: true}},
		{"typed over the rest", cares + "\n" + resolution + "\nuse_tcp_for_dns_lookups: true", DNSResolution{Servers: []string{"127.0.0.3:5300"}, NoSearchDomain: true}},
		{"getaddrinfo", gai, DNSResolution{Retries: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cache := mustCluster(t, dfpCluster("dns_cache_config: {name: c, "+flowYAML(tt.fields)+"}"))
			if diff := cmp.Diff(tt.want, cache.CustomType.Settings.(*DynamicForwardProxyConfig).DNSCache.Resolution); diff != "" {
				t.Errorf("DNS cache Resolution (-want +got):\n%s", diff)
			}
			c := mustCluster(t, "name: dns\ntype: STRICT_DNS\n"+tt.fields+"\nload_assignment: {endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: a.test, port_value: 80}}}}]}]}")
			if diff := cmp.Diff(tt.want, c.DNSResolution); diff != "" {
				t.Errorf("cluster DNSResolution (-want +got):\n%s", diff)
			}
		})
	}
	// A cluster's legacy dns_resolvers go with use_tcp_for_dns_lookups, and only without the
	// newer fields.
	c := mustCluster(t, "name: dns\ntype: STRICT_DNS\nuse_tcp_for_dns_lookups: true\ndns_resolvers: [{socket_address: {address: 127.0.0.9}}]\nload_assignment: {endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: a.test, port_value: 80}}}}]}]}")
	if diff := cmp.Diff(DNSResolution{Servers: []string{"127.0.0.9:53"}, TCP: true}, c.DNSResolution); diff != "" {
		t.Errorf("legacy DNSResolution (-want +got):\n%s", diff)
	}
	c = mustCluster(t, "name: dns\ntype: STRICT_DNS\n"+cares+"\ndns_resolvers: [{socket_address: {address: 127.0.0.9}}]\nload_assignment: {endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: a.test, port_value: 80}}}}]}]}")
	if got := c.DNSResolution.Servers; len(got) != 1 || got[0] != "127.0.0.3:5300" {
		t.Errorf("Servers with typed_dns_resolver_config and dns_resolvers = %v; want [127.0.0.3:5300]", got)
	}
}

// flowYAML puts block YAML fields on one line of a flow mapping.
func flowYAML(fields string) string {
	return strings.ReplaceAll(fields, "\n", ", ")
}

// TestDynamicForwardProxyTLSNames: Envoy's rule for a dynamic forward proxy cluster's TLS
// names: without upstream HTTP options it gets auto_sni and auto_san_validation; options that
// lack either are refused unless allow_insecure_cluster_options.
func TestDynamicForwardProxyTLSNames(t *testing.T) {
	const typed = `typed_extension_protocol_options:
  envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
    "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
    explicit_http_config: {http2_protocol_options: {}}
`
	both := UpstreamHTTPProtocolOptions{AutoSNI: true, AutoSANValidation: true}
	tests := []struct {
		name, typedConfig, extra string
		want                     UpstreamHTTPProtocolOptions
		err                      string
	}{
		{"defaults", "", "", both, ""},
		{"both set", "", "upstream_http_protocol_options: {auto_sni: true, auto_san_validation: true}\n", both, ""},
		{"typed both set", "", typed + "    upstream_http_protocol_options: {auto_sni: true, auto_san_validation: true}\n", both, ""},
		{"sni only", "", "upstream_http_protocol_options: {auto_sni: true}\n", UpstreamHTTPProtocolOptions{},
			"upstream_http_protocol_options: a dynamic forward proxy cluster needs auto_sni and auto_san_validation true unless cluster_type.typed_config.allow_insecure_cluster_options is set"},
		{"typed without upstream options", "", typed, UpstreamHTTPProtocolOptions{},
			`typed_extension_protocol_options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].upstream_http_protocol_options: a dynamic forward proxy cluster needs auto_sni`},
		{"insecure", "\n    allow_insecure_cluster_options: true", "upstream_http_protocol_options: {auto_sni: true}\n", UpstreamHTTPProtocolOptions{AutoSNI: true}, ""},
		{"insecure typed", "\n    allow_insecure_cluster_options: true", typed, UpstreamHTTPProtocolOptions{}, ""},
		{"insecure without options", "\n    allow_insecure_cluster_options: true", "", both, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := tt.extra + dfpCluster("dns_cache_config: {name: c}"+tt.typedConfig)
			pc, err := clusterYAML(t, y)
			if err != nil {
				t.Fatalf("decode: %v\n%s", err, y)
			}
			c, err := ClusterFromProto(pc, Limits{})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ClusterFromProto() = %v; want an error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.UpstreamHTTP != tt.want {
				t.Errorf("UpstreamHTTP = %+v; want %+v", c.UpstreamHTTP, tt.want)
			}
		})
	}
}

// TestSubClustersConfig: sub_clusters_config with Envoy's defaults, and what each set field
// becomes.
func TestSubClustersConfig(t *testing.T) {
	for _, tt := range []struct {
		yaml string
		want SubClustersConfig
	}{
		{"{}", SubClustersConfig{MaxSubClusters: 1024, TTL: 5 * time.Minute}},
		{"{lb_policy: LEAST_REQUEST, max_sub_clusters: 3, sub_cluster_ttl: 7s, preresolve_clusters: [{address: a.test, port_value: 8080}]}",
			SubClustersConfig{LbPolicy: 1, MaxSubClusters: 3, TTL: 7 * time.Second, Preresolve: []string{"a.test:8080"}}},
	} {
		c := mustCluster(t, dfpCluster("sub_clusters_config: "+tt.yaml))
		got := c.CustomType.Settings.(*DynamicForwardProxyConfig).SubClusters
		if got == nil {
			t.Fatalf("%s: SubClusters = nil", tt.yaml)
		}
		if diff := cmp.Diff(tt.want, *got); diff != "" {
			t.Errorf("%s: SubClusters (-want +got):\n%s", tt.yaml, diff)
		}
	}
}

// TestResolvedAddressFilter: resolved_address_filter's ranges, inverted or not.
func TestResolvedAddressFilter(t *testing.T) {
	c := mustCluster(t, dfpCluster(`dns_cache_config: {name: c, resolved_address_filter: {ranges: [{address_prefix: 10.0.0.0, prefix_len: 8}, {address_prefix: "fd00::", prefix_len: 8}]}}`))
	f := c.CustomType.Settings.(*DynamicForwardProxyConfig).DNSCache.ResolvedAddressFilter
	inverted := f
	inverted.invert = true
	for _, tt := range []struct {
		addr          string
		drops, invert bool
	}{
		{"10.1.2.3", true, false}, {"::ffff:10.1.2.3", true, false}, {"fd12::1", true, false}, {"192.0.2.1", false, true}, {"2001:db8::1", false, true},
	} {
		a := netip.MustParseAddr(tt.addr)
		if got := f.Drops(a); got != tt.drops {
			t.Errorf("Drops(%s) = %v; want %v", a, got, tt.drops)
		}
		if got := inverted.Drops(a); got != tt.invert {
			t.Errorf("inverted Drops(%s) = %v; want %v", a, got, tt.invert)
		}
	}
	var none AddressFilter
	if none.Drops(netip.MustParseAddr("10.0.0.1")) {
		t.Error("the zero AddressFilter drops an address")
	}
	pc, err := clusterYAML(t, dfpCluster(`dns_cache_config: {name: c, resolved_address_filter: {ranges: [{address_prefix: 10.0.0.0, prefix_len: 33}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ClusterFromProto(pc, Limits{}); err == nil || !strings.Contains(err.Error(), "resolved_address_filter.ranges[0].prefix_len = 33") {
		t.Errorf("prefix_len 33 = %v; want an error naming it", err)
	}
}
