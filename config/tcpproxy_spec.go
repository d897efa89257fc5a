package config

import (
	"errors"
	"fmt"
	"time"

	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/accesslog"
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
	// AccessLogs are access_log, in order, their filters compiled; the loggers' typed_config is
	// checked by the TCP proxy, which builds them.
	AccessLogs []TCPAccessLog
	// AccessLogFlushInterval is access_log_options.access_log_flush_interval (or the deprecated
	// access_log_flush_interval): how often a TcpPeriodic entry is logged while the connection
	// lasts. Zero means none.
	AccessLogFlushInterval time.Duration
	// FlushAccessLogOnConnected is access_log_options.flush_access_log_on_connected (or the
	// deprecated flush_access_log_on_connected): log a TcpUpstreamConnected entry when the
	// upstream connection is established.
	FlushAccessLogOnConnected bool
	// FlushAccessLogOnStart is access_log_options.flush_access_log_on_start: log a
	// TcpConnectionStart entry when the downstream connection is accepted.
	FlushAccessLogOnStart bool
	// Tunnel is tunneling_config; nil proxies raw TCP.
	Tunnel *TCPTunnel
	// Proto is the configuration as given, for /config_dump.
	Proto *tcpproxyv3.TcpProxy
}

// TCPAccessLog is one entry of TcpProxy.access_log.
type TCPAccessLog struct {
	Name string
	// TypedConfig is typed_config; nil when unset.
	TypedConfig *anypb.Any
	// Filter is filter, compiled without runtime (the TCP proxy binds it with Filter.Bind);
	// nil when unset.
	Filter *accesslog.Filter
}

// minAccessLogFlushInterval is the smallest access_log_flush_interval Envoy accepts.
const minAccessLogFlushInterval = time.Millisecond

// TCPClusterWeight is TcpProxy.WeightedCluster.ClusterWeight.
type TCPClusterWeight struct {
	Name   string
	Weight uint32
}

// TCPProxyFromProto validates p and applies defaults. Fields Legate does not implement
// (on_demand, hash_policy, metadata_match, upstream idle timeouts split by
// direction, access log filters other than those of accesslog.Filter, …) are refused rather
// than silently ignored.
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
		{"hash_policy", len(p.GetHashPolicy()) > 0},
		{"proxy_protocol_tlvs", len(p.GetProxyProtocolTlvs()) > 0},
	} {
		if u.set {
			return nil, at("%s is set; not supported by Legate's TCP proxy", u.name)
		}
	}
	if t := p.GetTunnelingConfig(); t != nil {
		var err error
		if out.Tunnel, err = tunnelFromProto(t); err != nil {
			return nil, at("%w", err)
		}
	}
	if err := out.accessLogs(p); err != nil {
		return nil, at("%w", err)
	}
	return out, nil
}

// accessLogs converts access_log and the access log options (access_log_options, or the
// deprecated top-level access_log_flush_interval and flush_access_log_on_connected, which
// may not be combined with it, as in Envoy).
func (out *TCPProxy) accessLogs(p *tcpproxyv3.TcpProxy) error {
	for i, al := range p.GetAccessLog() {
		path := fmt.Sprintf("access_log[%d]", i)
		if al.GetTypedConfig() == nil {
			return fmt.Errorf("%s.typed_config is unset; an access logger configuration is required", path)
		}
		filter, err := accesslog.FilterFromProto(path+".filter", al.GetFilter(), accesslog.FilterOptions{})
		if err != nil {
			return err
		}
		out.AccessLogs = append(out.AccessLogs, TCPAccessLog{Name: al.GetName(), TypedConfig: al.GetTypedConfig(), Filter: filter})
	}
	interval, intervalPath := p.GetAccessLogFlushInterval(), "access_log_flush_interval"
	out.FlushAccessLogOnConnected = p.GetFlushAccessLogOnConnected()
	if o := p.GetAccessLogOptions(); o != nil {
		switch {
		case p.GetFlushAccessLogOnConnected():
			return errors.New("flush_access_log_on_connected and access_log_options are both set; only one may be")
		case p.GetAccessLogFlushInterval() != nil:
			return errors.New("access_log_flush_interval and access_log_options are both set; only one may be")
		}
		interval, intervalPath = o.GetAccessLogFlushInterval(), "access_log_options.access_log_flush_interval"
		out.FlushAccessLogOnConnected = o.GetFlushAccessLogOnConnected()
		out.FlushAccessLogOnStart = o.GetFlushAccessLogOnStart()
	}
	if interval != nil {
		if err := interval.CheckValid(); err != nil || interval.AsDuration() < minAccessLogFlushInterval {
			return fmt.Errorf("%s = %v; must be >= 1ms", intervalPath, interval.AsDuration())
		}
		out.AccessLogFlushInterval = interval.AsDuration()
	}
	return nil
}
