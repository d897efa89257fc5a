package config

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	dfpclusterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/dynamic_forward_proxy/v3"
	commondfpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/dynamic_forward_proxy/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// The dynamic forward proxy's names.
const (
	// DynamicForwardProxyClusterType is the cluster_type name of dynamic forward proxy
	// clusters.
	DynamicForwardProxyClusterType = "envoy.clusters.dynamic_forward_proxy"
	// CaresResolver and GetAddrInfoResolver are the typed_dns_resolver_config names a DNS
	// cache takes; both are served by Legate's resolver (cluster.DNSResolver).
	CaresResolver       = "envoy.network.dns_resolver.cares"
	GetAddrInfoResolver = "envoy.network.dns_resolver.getaddrinfo"
)

// Defaults of DnsCacheConfig, as Envoy documents them.
const (
	DefaultDNSCacheRefreshRate    = 60 * time.Second
	DefaultDNSCacheMinRefreshRate = 5 * time.Second
	DefaultDNSCacheHostTTL        = 5 * time.Minute
	DefaultDNSCacheMaxHosts       = 1024
	DefaultDNSCacheMaxPending     = 1024
	DefaultDNSCacheQueryTimeout   = 5 * time.Second
	// DefaultMaxSubClusters and DefaultSubClusterTTL are sub_clusters_config's
	// max_sub_clusters and sub_cluster_ttl defaults.
	DefaultMaxSubClusters = 1024
	DefaultSubClusterTTL  = 5 * time.Minute
	// SubClusterPrefix begins the name of a sub-cluster: "DFPCluster:<host>:<port>".
	SubClusterPrefix = "DFPCluster:"
)

// DNSCacheConfig is extensions.common.dynamic_forward_proxy.v3.DnsCacheConfig, with Envoy's
// defaults applied. Two configurations of one cache (by Name) must be equal (Equal).
type DNSCacheConfig struct {
	// Name is name: the filters and clusters naming it share one cache.
	Name         string
	LookupFamily DNSLookupFamily
	// RefreshRate is dns_refresh_rate: how often a host is resolved again when its answer
	// has no TTL; MinRefreshRate (dns_min_refresh_rate) bounds a TTL from below.
	RefreshRate, MinRefreshRate time.Duration
	// FailureRefreshRate is dns_failure_refresh_rate.base_interval: how soon a host whose
	// resolution failed is tried again (RefreshRate when unset);
	// DisableRefreshOnFailure (disable_dns_refresh_on_failure) keeps the last good answer
	// until the next regular refresh.
	FailureRefreshRate      time.Duration
	DisableRefreshOnFailure bool
	// HostTTL is host_ttl: a host no request used for that long leaves the cache.
	HostTTL time.Duration
	// MaxHosts is max_hosts; MaxPendingRequests is
	// dns_cache_circuit_breaker.max_pending_requests.
	MaxHosts, MaxPendingRequests uint32
	// QueryTimeout is dns_query_timeout.
	QueryTimeout time.Duration
	// Resolution is typed_dns_resolver_config, dns_resolution_config and
	// use_tcp_for_dns_lookups, merged as Envoy merges them.
	Resolution DNSResolution
	// Preresolve are preresolve_hostnames as cache keys ("host:port"), resolved when the
	// cache is made.
	Preresolve []string
	// ResolvedAddressFilter is resolved_address_filter: the addresses of an answer that it
	// drops; an answer left empty is a failed resolution.
	ResolvedAddressFilter AddressFilter
}

// AddressFilter is a type.matcher.v3.AddressMatcher used to drop addresses: one in ranges
// matches, or with invert (invert_match) one outside them. The zero value drops nothing.
type AddressFilter struct {
	ranges []netip.Prefix
	invert bool
}

// Drops reports whether the filter removes a.
func (f *AddressFilter) Drops(a netip.Addr) bool {
	if len(f.ranges) == 0 && !f.invert {
		return false
	}
	a = a.Unmap()
	in := slices.ContainsFunc(f.ranges, func(p netip.Prefix) bool { return p.Contains(a) })
	return in != f.invert
}

// Equal reports whether c and o configure a cache alike.
func (c *DNSCacheConfig) Equal(o *DNSCacheConfig) bool {
	return fmt.Sprint(*c) == fmt.Sprint(*o)
}

// DynamicForwardProxyConfig is extensions.clusters.dynamic_forward_proxy.v3.ClusterConfig.
type DynamicForwardProxyConfig struct {
	// DNSCache is dns_cache_config: the cache whose hosts the cluster's hosts are. Zero
	// with SubClusters.
	DNSCache DNSCacheConfig
	// SubClusters is sub_clusters_config: each name:port requested gets a STRICT_DNS
	// cluster of its own; nil with a DNS cache.
	SubClusters *SubClustersConfig
	// allowInsecure is allow_insecure_cluster_options: the cluster may leave auto_sni or
	// auto_san_validation off (forwardProxyTLSNames, which applies it here).
	allowInsecure bool
	// limits are those the cluster was read with, which its sub-clusters are read with too.
	limits Limits
}

func decodeDynamicForwardProxy(_ string, typedConfig *anypb.Any) (any, error) {
	if typedConfig == nil {
		return nil, fmt.Errorf("typed_config is missing; %s needs a ClusterConfig with a dns_cache_config", DynamicForwardProxyClusterType)
	}
	var pb dfpclusterv3.ClusterConfig
	if err := typedConfig.UnmarshalTo(&pb); err != nil {
		return nil, fmt.Errorf("typed_config: %v; %s needs an envoy.extensions.clusters.dynamic_forward_proxy.v3.ClusterConfig", err, DynamicForwardProxyClusterType)
	}
	if err := pb.ValidateAll(); err != nil {
		return nil, fmt.Errorf("typed_config: %w", err)
	}
	switch {
	case pb.GetAllowCoalescedConnections():
		return nil, errors.New("typed_config.allow_coalesced_connections: not implemented by Legate (its connection pools never share an HTTP/2 connection between hosts)")
	}
	out := &DynamicForwardProxyConfig{allowInsecure: pb.GetAllowInsecureClusterOptions()}
	if sc := pb.GetSubClustersConfig(); sc != nil {
		sub, err := subClustersFromProto("typed_config.sub_clusters_config", sc)
		if err != nil {
			return nil, err
		}
		out.SubClusters = sub
		return out, nil
	}
	cache, err := DNSCacheFromProto("typed_config.dns_cache_config", pb.GetDnsCacheConfig())
	if err != nil {
		return nil, err
	}
	out.DNSCache = cache
	return out, nil
}

// SubClustersConfig is extensions.clusters.dynamic_forward_proxy.v3.SubClustersConfig, with
// Envoy's defaults applied.
type SubClustersConfig struct {
	// LbPolicy is lb_policy: the load balancing policy of each sub-cluster.
	LbPolicy clusterv3.Cluster_LbPolicy
	// MaxSubClusters is max_sub_clusters: how many sub-clusters may exist at once.
	MaxSubClusters uint32
	// TTL is sub_cluster_ttl: a sub-cluster no request used for that long is removed.
	TTL time.Duration
	// Preresolve are preresolve_clusters as "host:port" keys: their sub-clusters are made
	// with the cluster.
	Preresolve []string
}

func subClustersFromProto(path string, pb *dfpclusterv3.SubClustersConfig) (*SubClustersConfig, error) {
	switch pb.GetLbPolicy() {
	case clusterv3.Cluster_CLUSTER_PROVIDED, clusterv3.Cluster_LOAD_BALANCING_POLICY_CONFIG:
		return nil, fmt.Errorf("%s.lb_policy = %s; a sub-cluster is a STRICT_DNS cluster and needs a load balancer of its own", path, pb.GetLbPolicy())
	}
	if pb.GetDnsClusterConfig() != nil {
		return nil, fmt.Errorf("%s.dns_cluster_config: not implemented by Legate (sub-clusters are STRICT_DNS clusters)", path)
	}
	out := &SubClustersConfig{
		LbPolicy:       pb.GetLbPolicy(),
		MaxSubClusters: u32Or(pb.GetMaxSubClusters(), DefaultMaxSubClusters),
		TTL:            durationOr(pb.GetSubClusterTtl(), DefaultSubClusterTTL),
	}
	for i, sa := range pb.GetPreresolveClusters() {
		if sa.GetPortValue() == 0 {
			return nil, fmt.Errorf("%s.preresolve_clusters[%d].port_value: missing; a sub-cluster needs its port", path, i)
		}
		out.Preresolve = append(out.Preresolve, HostKey(sa.GetAddress(), sa.GetPortValue()))
	}
	return out, nil
}

// SubClusterConfig is the sub-cluster of a dynamic forward proxy cluster for host and port,
// as Envoy makes it: the parent's configuration renamed "DFPCluster:<host>:<port>" (name), a
// STRICT_DNS cluster of that one endpoint with sub_clusters_config's lb_policy, and the
// auto_sni and auto_san_validation the parent got by default.
func SubClusterConfig(parent *Cluster, name, host string, port uint32) (*Cluster, error) {
	cfg := forwardProxySettings(parent)
	if cfg == nil || cfg.SubClusters == nil {
		return nil, fmt.Errorf("cluster %q: not a dynamic forward proxy cluster with sub_clusters_config", parent.Name)
	}
	pb := proto.Clone(parent.Proto).(*clusterv3.Cluster)
	pb.Name = name
	pb.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS}
	pb.LbPolicy = cfg.SubClusters.LbPolicy
	if pb.GetUpstreamHttpProtocolOptions() == nil && pb.GetTypedExtensionProtocolOptions()[upstreamHTTPOptionsKey] == nil {
		pb.UpstreamHttpProtocolOptions = &corev3.UpstreamHttpProtocolOptions{AutoSni: true, AutoSanValidation: true}
	}
	pb.LoadAssignment = &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
		LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}},
		}}}},
	}}}
	return ClusterFromProto(pb, cfg.limits)
}

// forwardProxyTLSNames applies Envoy's rule for the TLS names of a dynamic forward proxy
// cluster, whose hosts are whatever requests name: a cluster without upstream HTTP options
// (neither upstream_http_protocol_options nor a typed HttpProtocolOptions) gets auto_sni and
// auto_san_validation, and one whose options lack either is refused unless
// allow_insecure_cluster_options, so that no request reaches a host whose certificate does
// not carry the name asked for.
func (b *clusterBuilder) forwardProxyTLSNames(c *clusterv3.Cluster, out *Cluster) {
	cfg := forwardProxySettings(out)
	if cfg == nil {
		return
	}
	at := "upstream_http_protocol_options"
	set := c.GetUpstreamHttpProtocolOptions() != nil
	if typed, ok := c.GetTypedExtensionProtocolOptions()[upstreamHTTPOptionsKey]; ok {
		at = fmt.Sprintf("typed_extension_protocol_options[%q].upstream_http_protocol_options", upstreamHTTPOptionsKey)
		var opts upstreamhttpv3.HttpProtocolOptions
		set = typed.UnmarshalTo(&opts) == nil && opts.GetUpstreamHttpProtocolOptions() != nil
	} else if !set {
		out.UpstreamHTTP.AutoSNI, out.UpstreamHTTP.AutoSANValidation = true, true
		return
	}
	if cfg.allowInsecure || (set && out.UpstreamHTTP.AutoSNI && out.UpstreamHTTP.AutoSANValidation) {
		return
	}
	b.fail("%s: a dynamic forward proxy cluster needs auto_sni and auto_san_validation true unless cluster_type.typed_config.allow_insecure_cluster_options is set (Envoy refuses it too)", at)
}

// DNSCacheFromProto converts a dns_cache_config at path (for errors), refusing what Legate
// does not implement.
func DNSCacheFromProto(path string, pb *commondfpv3.DnsCacheConfig) (DNSCacheConfig, error) {
	if pb == nil {
		return DNSCacheConfig{}, fmt.Errorf("%s: missing; the dynamic forward proxy needs a DNS cache", path)
	}
	if err := pb.ValidateAll(); err != nil {
		return DNSCacheConfig{}, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case pb.GetKeyValueConfig() != nil:
		return DNSCacheConfig{}, fmt.Errorf("%s.key_value_config: not implemented by Legate (the DNS cache is not persisted; it resolves again after a restart)", path)
	case pb.GetDnsLookupFamily() > clusterv3.Cluster_ALL:
		return DNSCacheConfig{}, fmt.Errorf("%s.dns_lookup_family = %d; not a DnsLookupFamily", path, pb.GetDnsLookupFamily())
	}
	out := DNSCacheConfig{
		Name:                    pb.GetName(),
		LookupFamily:            DNSLookupFamily(pb.GetDnsLookupFamily()),
		RefreshRate:             durationOr(pb.GetDnsRefreshRate(), DefaultDNSCacheRefreshRate),
		MinRefreshRate:          durationOr(pb.GetDnsMinRefreshRate(), DefaultDNSCacheMinRefreshRate),
		HostTTL:                 durationOr(pb.GetHostTtl(), DefaultDNSCacheHostTTL),
		MaxHosts:                u32Or(pb.GetMaxHosts(), DefaultDNSCacheMaxHosts),
		MaxPendingRequests:      u32Or(pb.GetDnsCacheCircuitBreaker().GetMaxPendingRequests(), DefaultDNSCacheMaxPending),
		QueryTimeout:            durationOr(pb.GetDnsQueryTimeout(), DefaultDNSCacheQueryTimeout),
		DisableRefreshOnFailure: pb.GetDisableDnsRefreshOnFailure(),
	}
	out.FailureRefreshRate = durationOr(pb.GetDnsFailureRefreshRate().GetBaseInterval(), out.RefreshRate)
	res, err := DNSResolutionFromProto(path, pb.GetTypedDnsResolverConfig(), pb.GetDnsResolutionConfig(), pb.GetUseTcpForDnsLookups(), nil)
	if err != nil {
		return DNSCacheConfig{}, err
	}
	out.Resolution = res
	if f := pb.GetResolvedAddressFilter(); f != nil {
		// xds.core.v3.CidrRange has core.v3.CidrRange's fields.
		rs := make([]*corev3.CidrRange, len(f.GetRanges()))
		for i, r := range f.GetRanges() {
			rs[i] = &corev3.CidrRange{AddressPrefix: r.GetAddressPrefix(), PrefixLen: r.GetPrefixLen()}
		}
		ranges, err := cidrPrefixes(path+".resolved_address_filter.ranges", rs)
		if err != nil {
			return DNSCacheConfig{}, err
		}
		out.ResolvedAddressFilter = AddressFilter{ranges: ranges, invert: f.GetInvertMatch()}
	}
	for i, sa := range pb.GetPreresolveHostnames() {
		at := fmt.Sprintf("%s.preresolve_hostnames[%d]", path, i)
		if sa.GetPortValue() == 0 {
			return DNSCacheConfig{}, fmt.Errorf("%s.port_value: missing; a preresolved host needs its port", at)
		}
		out.Preresolve = append(out.Preresolve, HostKey(sa.GetAddress(), sa.GetPortValue()))
	}
	return out, nil
}

// HostKey is the cache key of host and port: "host:port", IPv6 literals in brackets.
func HostKey(host string, port uint32) string {
	if ip, err := netip.ParseAddr(host); err == nil && ip.Is6() {
		return "[" + host + "]:" + strconv.FormatUint(uint64(port), 10)
	}
	return host + ":" + strconv.FormatUint(uint64(port), 10)
}

// forwardProxySettings returns the settings of a dynamic forward proxy cluster, nil for other
// clusters.
func forwardProxySettings(c *Cluster) *DynamicForwardProxyConfig {
	if c.CustomType == nil {
		return nil
	}
	cfg, _ := c.CustomType.Settings.(*DynamicForwardProxyConfig)
	return cfg
}
