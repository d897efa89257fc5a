package udpproxy

import (
	"errors"
	"fmt"
	"time"

	udpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/config"
)

// Defaults, as Envoy documents them.
const (
	// DefaultIdleTimeout is idle_timeout when unset.
	DefaultIdleTimeout = time.Minute
	routeTypeURL       = "type.googleapis.com/envoy.extensions.filters.udp.udp_proxy.v3.Route"
)

// Config is UdpProxyConfig with Envoy's defaults applied: what the UDP proxy implements.
type Config struct {
	StatPrefix string
	// Cluster is cluster, or the cluster of the matcher's on_no_match route.
	Cluster string
	// IdleTimeout is idle_timeout (default one minute): a session with no datagram either
	// way for this long ends. Zero disables it.
	IdleTimeout time.Duration
	// HashKey is the hash_policies entry: by source IP (HashSourceIP) or a fixed key
	// (HashKey); HashNone without one.
	Hash    HashKind
	HashKey string
	// MaxRxDatagramSize is upstream_socket_config.max_rx_datagram_size (default 1500): longer
	// upstream datagrams are dropped.
	MaxRxDatagramSize uint32
	// PerPacket is use_per_packet_load_balancing: each datagram picks its host.
	PerPacket bool
	// AccessLogs are access_log; each logs an UdpSessionEnd entry when a session ends.
	AccessLogs []AccessLog
}

// HashKind is the kind of a hash policy.
type HashKind uint8

// Hash policies.
const (
	HashNone HashKind = iota
	HashSourceIP
	HashKey
)

// AccessLog is one access_log entry, its filter compiled.
type AccessLog struct {
	Name        string
	TypedConfig *anypb.Any
	Filter      *accesslog.Filter
}

// parse is the UDP proxy's config.UDPListenerFilterConfigs parser: a *Config, made on the
// configuration path (config.ListenerFromProto) for the factory to build from.
func parse(m proto.Message) (any, error) {
	return ConfigFromProto(m.(*udpproxyv3.UdpProxyConfig))
}

// ConfigFromProto checks p and applies defaults; unimplemented fields are refused with
// their path.
func ConfigFromProto(p *udpproxyv3.UdpProxyConfig) (*Config, error) {
	at := func(format string, args ...any) error {
		return fmt.Errorf("udp_proxy %q: "+format, append([]any{p.GetStatPrefix()}, args...)...)
	}
	if p.GetStatPrefix() == "" {
		return nil, errors.New(`udp_proxy: stat_prefix = ""; must not be empty`)
	}
	out := &Config{StatPrefix: p.GetStatPrefix(), IdleTimeout: DefaultIdleTimeout, MaxRxDatagramSize: config.DefaultMaxRxDatagramSize,
		PerPacket: p.GetUsePerPacketLoadBalancing()}
	var err error
	if out.Cluster, err = routeCluster(p); err != nil {
		return nil, at("%w", err)
	}
	if d := p.GetIdleTimeout(); d != nil {
		if d.CheckValid() != nil || d.AsDuration() < 0 {
			return nil, at("idle_timeout = %v; must be a non-negative duration", d)
		}
		out.IdleTimeout = d.AsDuration()
	}
	switch hp := p.GetHashPolicies(); len(hp) {
	case 0:
	case 1:
		switch {
		case hp[0].GetSourceIp():
			out.Hash = HashSourceIP
		case hp[0].GetKey() != "":
			out.Hash, out.HashKey = HashKey, hp[0].GetKey()
		default:
			return nil, at("hash_policies[0]: one of source_ip or key is required")
		}
	default:
		return nil, at("hash_policies: %d entries; at most 1 is allowed", len(hp))
	}
	if sc := p.GetUpstreamSocketConfig(); sc != nil {
		if sc.GetPreferGro().GetValue() {
			return nil, at("upstream_socket_config.prefer_gro: not implemented by Legate")
		}
		if v := sc.GetMaxRxDatagramSize(); v != nil {
			out.MaxRxDatagramSize = uint32(v.GetValue())
		}
	}
	for _, u := range []struct {
		name string
		set  bool
	}{
		{"use_original_src_ip", p.GetUseOriginalSrcIp()},
		{"session_filters", len(p.GetSessionFilters()) > 0},
		{"tunneling_config", p.GetTunnelingConfig() != nil},
		{"access_log_options", p.GetAccessLogOptions() != nil},
		{"proxy_access_log", len(p.GetProxyAccessLog()) > 0},
	} {
		if u.set {
			return nil, at("%s: not implemented by Legate", u.name)
		}
	}
	for i, al := range p.GetAccessLog() {
		path := fmt.Sprintf("access_log[%d]", i)
		if al.GetTypedConfig() == nil {
			return nil, at("%s.typed_config is unset; an access logger configuration is required", path)
		}
		f, err := accesslog.FilterFromProto(path+".filter", al.GetFilter(), accesslog.FilterOptions{})
		if err != nil {
			return nil, at("%w", err)
		}
		out.AccessLogs = append(out.AccessLogs, AccessLog{Name: al.GetName(), TypedConfig: al.GetTypedConfig(), Filter: f})
	}
	return out, nil
}

// routeCluster returns cluster, or the cluster of a matcher that routes everything with its
// on_no_match (the one matcher shape Legate implements).
func routeCluster(p *udpproxyv3.UdpProxyConfig) (string, error) {
	switch {
	case p.GetCluster() != "":
		return p.GetCluster(), nil
	case p.GetMatcher() == nil:
		return "", errors.New("route_specifier is unset; one of cluster or matcher is required")
	}
	m := p.GetMatcher()
	if m.GetMatcherList() != nil || m.GetMatcherTree() != nil {
		return "", errors.New("matcher: matcher_list and matcher_tree are not implemented by Legate; only on_no_match with a Route action")
	}
	action := m.GetOnNoMatch().GetAction()
	if action == nil {
		return "", errors.New("matcher.on_no_match.action is unset; a Route action is required")
	}
	if action.GetTypedConfig().GetTypeUrl() != routeTypeURL {
		return "", fmt.Errorf("matcher.on_no_match.action.typed_config = %q; must be %s", action.GetTypedConfig().GetTypeUrl(), routeTypeURL)
	}
	var r udpproxyv3.Route
	if err := action.GetTypedConfig().UnmarshalTo(&r); err != nil {
		return "", fmt.Errorf("matcher.on_no_match.action.typed_config: %w", err)
	}
	if r.GetCluster() == "" {
		return "", errors.New(`matcher.on_no_match.action: cluster = ""; must not be empty`)
	}
	return r.GetCluster(), nil
}
