package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	dfpclusterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/dynamic_forward_proxy/v3"
	commondfpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/dynamic_forward_proxy/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
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
}

// Equal reports whether c and o configure a cache alike.
func (c *DNSCacheConfig) Equal(o *DNSCacheConfig) bool {
	return fmt.Sprint(*c) == fmt.Sprint(*o)
}

// DynamicForwardProxyConfig is extensions.clusters.dynamic_forward_proxy.v3.ClusterConfig.
type DynamicForwardProxyConfig struct {
	// DNSCache is dns_cache_config: the cache whose hosts the cluster's hosts are.
	DNSCache DNSCacheConfig
	// allowInsecure is allow_insecure_cluster_options: the cluster may leave auto_sni or
	// auto_san_validation off (forwardProxyTLSNames, which applies it here).
	allowInsecure bool
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
	case pb.GetSubClustersConfig() != nil:
		return nil, errors.New("typed_config.sub_clusters_config: not implemented by Legate (use dns_cache_config)")
	case pb.GetAllowCoalescedConnections():
		return nil, errors.New("typed_config.allow_coalesced_connections: not implemented by Legate")
	}
	cache, err := DNSCacheFromProto("typed_config.dns_cache_config", pb.GetDnsCacheConfig())
	if err != nil {
		return nil, err
	}
	return &DynamicForwardProxyConfig{DNSCache: cache, allowInsecure: pb.GetAllowInsecureClusterOptions()}, nil
}

// forwardProxyTLSNames applies Envoy's rule for the TLS names of a dynamic forward proxy
// cluster, whose hosts are whatever requests name: a cluster without upstream HTTP options
// (neither upstream_http_protocol_options nor a typed HttpProtocolOptions) gets auto_sni and
// auto_san_validation, and one whose options lack either is refused unless
// allow_insecure_cluster_options, so that no request reaches a host whose certificate does
// not carry the name asked for.
func (b *clusterBuilder) forwardProxyTLSNames(c *clusterv3.Cluster, out *Cluster) {
	if out.CustomType == nil {
		return
	}
	cfg, ok := out.CustomType.Settings.(*DynamicForwardProxyConfig)
	if !ok {
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
		return DNSCacheConfig{}, fmt.Errorf("%s.key_value_config: not implemented by Legate", path)
	case pb.GetResolvedAddressFilter() != nil:
		return DNSCacheConfig{}, fmt.Errorf("%s.resolved_address_filter: not implemented by Legate", path)
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
