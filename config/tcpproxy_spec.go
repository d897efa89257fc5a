package config

import (
	"errors"
	"fmt"
	"time"

	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// TCP proxy defaults, as Envoy documents them.
const (
	// DefaultTCPProxyIdleTimeout is TcpProxy.idle_timeout when unset.
	DefaultTCPProxyIdleTimeout = time.Hour
	// DefaultMaxConnectAttempts is TcpProxy.max_connect_attempts when unset.
	DefaultMaxConnectAttempts = 1
)

// TCPProxyTypeURL is the typed_config type URL of the envoy.filters.network.tcp_proxy filter.
const TCPProxyTypeURL = "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy"

// TCPProxy is envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy with Envoy's defaults
// applied: the fields Legate's TCP proxy implements. Immutable once built.
type TCPProxy struct {
	// StatPrefix is stat_prefix: stats are rooted at tcp.<StatPrefix>.
	StatPrefix string
	// Cluster is cluster; empty when WeightedClusters is used.
	Cluster string
	// WeightedClusters is weighted_clusters.clusters, in order; nil with Cluster.
	WeightedClusters []TCPClusterWeight
	// TotalWeight is the sum of the weights of WeightedClusters.
	TotalWeight uint64
	// IdleTimeout is idle_timeout: the connection closes after this long with no bytes in
	// either direction. Default one hour; zero disables it.
	IdleTimeout time.Duration
	// MaxConnectAttempts is max_connect_attempts (default 1, at least 1).
	MaxConnectAttempts uint32
	// MaxDownstreamConnectionDuration is max_downstream_connection_duration; zero means none.
	MaxDownstreamConnectionDuration time.Duration
	// Proto is the configuration as given, for /config_dump.
	Proto *tcpproxyv3.TcpProxy
}

// TCPClusterWeight is TcpProxy.WeightedCluster.ClusterWeight.
type TCPClusterWeight struct {
	Name   string
	Weight uint32
}

// TCPProxyFromAny decodes a filter's typed_config; a nil Any is an error (the TCP proxy has
// required fields).
func TCPProxyFromAny(a *anypb.Any) (*TCPProxy, error) {
	if a == nil {
		return nil, errors.New("tcp_proxy: typed_config is required")
	}
	if a.GetTypeUrl() != TCPProxyTypeURL {
		return nil, fmt.Errorf("tcp_proxy: typed_config type_url = %q; must be %q", a.GetTypeUrl(), TCPProxyTypeURL)
	}
	var p tcpproxyv3.TcpProxy
	if err := a.UnmarshalTo(&p); err != nil {
		return nil, fmt.Errorf("tcp_proxy: typed_config: %w", err)
	}
	return TCPProxyFromProto(&p)
}

// TCPProxyFromProto validates p and applies defaults. Fields Legate does not implement
// (on_demand, tunneling_config, hash_policy, metadata_match, access_log, upstream idle
// timeouts split by direction, …) are refused rather than silently ignored.
func TCPProxyFromProto(p *tcpproxyv3.TcpProxy) (*TCPProxy, error) {
	if p == nil {
		return nil, errors.New("tcp_proxy: configuration is required")
	}
	at := func(format string, args ...any) error {
		return fmt.Errorf("tcp_proxy %q: "+format, append([]any{p.GetStatPrefix()}, args...)...)
	}
	out := &TCPProxy{
		StatPrefix:         p.GetStatPrefix(),
		Cluster:            p.GetCluster(),
		IdleTimeout:        DefaultTCPProxyIdleTimeout,
		MaxConnectAttempts: DefaultMaxConnectAttempts,
		Proto:              p,
	}
	if out.StatPrefix == "" {
		return nil, errors.New("tcp_proxy: stat_prefix = \"\"; must not be empty")
	}
	switch cs := p.GetClusterSpecifier().(type) {
	case *tcpproxyv3.TcpProxy_Cluster:
		if cs.Cluster == "" {
			return nil, at("cluster = \"\"; must not be empty")
		}
	case *tcpproxyv3.TcpProxy_WeightedClusters:
		clusters := cs.WeightedClusters.GetClusters()
		if len(clusters) == 0 {
			return nil, at("weighted_clusters.clusters is empty; must have at least 1 item")
		}
		for i, c := range clusters {
			if c.GetName() == "" {
				return nil, at("weighted_clusters.clusters[%d].name = \"\"; must not be empty", i)
			}
			if c.GetMetadataMatch() != nil {
				return nil, at("weighted_clusters.clusters[%d].metadata_match is set; not supported", i)
			}
			out.WeightedClusters = append(out.WeightedClusters, TCPClusterWeight{Name: c.GetName(), Weight: c.GetWeight()})
			out.TotalWeight += uint64(c.GetWeight())
		}
		if out.TotalWeight == 0 {
			return nil, at("weighted_clusters: total weight = 0; must be > 0")
		}
	default:
		return nil, at("cluster_specifier is unset; one of cluster or weighted_clusters is required")
	}
	if d := p.GetIdleTimeout(); d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
			return nil, at("idle_timeout = %v; must be a non-negative duration", d)
		}
		out.IdleTimeout = d.AsDuration()
	}
	if v := p.GetMaxConnectAttempts(); v != nil {
		if v.GetValue() < 1 {
			return nil, at("max_connect_attempts = %d; must be >= 1", v.GetValue())
		}
		out.MaxConnectAttempts = v.GetValue()
	}
	if d := p.GetMaxDownstreamConnectionDuration(); d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
			return nil, at("max_downstream_connection_duration = %v; must be a non-negative duration", d)
		}
		out.MaxDownstreamConnectionDuration = d.AsDuration()
	}
	for _, u := range []struct {
		name string
		set  bool
	}{
		{"on_demand", p.GetOnDemand() != nil},
		{"metadata_match", p.GetMetadataMatch() != nil},
		{"downstream_idle_timeout", p.GetDownstreamIdleTimeout() != nil},
		{"upstream_idle_timeout", p.GetUpstreamIdleTimeout() != nil},
		{"access_log", len(p.GetAccessLog()) > 0},
		{"hash_policy", len(p.GetHashPolicy()) > 0},
		{"tunneling_config", p.GetTunnelingConfig() != nil},
		{"proxy_protocol_tlvs", len(p.GetProxyProtocolTlvs()) > 0},
	} {
		if u.set {
			return nil, at("%s is set; not supported by Legate's TCP proxy", u.name)
		}
	}
	return out, nil
}
