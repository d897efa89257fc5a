package config

import (
	"net/netip"
	"time"

	xdsmatcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/internal/sockopt"
)

// Listener defaults, as Envoy documents them.
const (
	// DefaultPerConnectionBufferLimit is per_connection_buffer_limit_bytes when unset (1 MiB).
	DefaultPerConnectionBufferLimit = 1 << 20
	// DefaultListenerFiltersTimeout is listener_filters_timeout when unset.
	DefaultListenerFiltersTimeout = 15 * time.Second
)

// Well-known names of network filters, and of the listener filters Envoy adds to a listener
// itself (use_original_dst, use_proxy_proto).
const (
	HTTPConnectionManagerFilter = "envoy.filters.network.http_connection_manager"
	TCPProxyFilter              = "envoy.filters.network.tcp_proxy"
	OriginalDstFilter           = "envoy.filters.listener.original_dst"
	ProxyProtocolFilter         = "envoy.filters.listener.proxy_protocol"
)

// TrafficDirection is core.TrafficDirection, a listener's traffic_direction.
type TrafficDirection uint8

// Traffic directions.
const (
	DirectionUnspecified TrafficDirection = iota
	DirectionInbound
	DirectionOutbound
)

// String returns the proto enum name.
func (d TrafficDirection) String() string {
	switch d {
	case DirectionInbound:
		return "INBOUND"
	case DirectionOutbound:
		return "OUTBOUND"
	}
	return "UNSPECIFIED"
}

// DrainType is Listener.DrainType.
type DrainType uint8

// Drain types.
const (
	// DrainDefault listeners drain on server drains (/healthcheck/fail, /drain_listeners,
	// hot restart, shutdown) and when modified or removed.
	DrainDefault DrainType = iota
	// DrainModifyOnly listeners drain only when modified or removed.
	DrainModifyOnly
)

// SourceType is FilterChainMatch.ConnectionSourceType.
type SourceType uint8

// Connection source types.
const (
	SourceAny SourceType = iota
	// SourceSameIPOrLoopback matches connections from a loopback address or from the
	// listener's own IP (Envoy's LOCAL / SAME_IP_OR_LOOPBACK).
	SourceSameIPOrLoopback
	// SourceExternal matches every other connection.
	SourceExternal
)

// Listener is config.listener.v3.Listener for TCP socket and pipe listeners, with Envoy's
// defaults applied. Values are immutable once built; share them freely.
type Listener struct {
	// Name is name; empty when the configuration names none (the listener manager then
	// allocates one).
	Name string
	// Address is address; AdditionalAddresses is additional_addresses[*].address.
	Address             Address
	AdditionalAddresses []Address
	// StatPrefix is stat_prefix; empty means the address.
	StatPrefix       string
	TrafficDirection TrafficDirection
	DrainType        DrainType
	// FilterChains is filter_chains, in order.
	FilterChains []*FilterChain
	// DefaultFilterChain is default_filter_chain, nil when unset.
	DefaultFilterChain *FilterChain
	// FilterChainMatcher is filter_chain_matcher (the unified matcher API, whose actions name
	// filter chains), nil when unset; it replaces the chains' filter_chain_match, which is
	// then ignored, and every filter chain has a unique name.
	FilterChainMatcher *xdsmatcherv3.Matcher
	// PerConnectionBufferLimitBytes is per_connection_buffer_limit_bytes (default 1 MiB).
	PerConnectionBufferLimitBytes uint32
	// ListenerFiltersTimeout is listener_filters_timeout (default 15 s; 0 means no timeout).
	ListenerFiltersTimeout time.Duration
	// ContinueOnListenerFiltersTimeout is continue_on_listener_filters_timeout.
	ContinueOnListenerFiltersTimeout bool
	// UDP is set for a listener on a UDP address: its datagrams go to the UDP proxy; it has
	// no filter chains.
	UDP *UDPListener
	// ListenerFilters are listener_filters, in order, which the listener manager builds from
	// the extension registry. An original destination filter comes first when
	// use_original_dst is set, and a PROXY protocol filter when a filter chain sets the
	// deprecated use_proxy_proto without one configured, as Envoy adds them itself.
	ListenerFilters []ListenerFilter
	// UseOriginalDst is use_original_dst: a connection whose original destination is the
	// address of another listener is handed off to that listener.
	UseOriginalDst bool
	// Internal is set for an internal listener (internal_listener): it has no socket and
	// accepts the in-memory connections of clusters whose endpoints have an
	// envoy_internal_address naming it. Address is then that internal address.
	Internal bool
	// BindToPort is bind_to_port (default true).
	BindToPort bool
	// IPv4Compat is address.socket_address.ipv4_compat: an IPv6 "::" listener also accepts
	// IPv4 connections.
	IPv4Compat bool
	// SocketOptions are the options of each bound address, index for index with Address then
	// AdditionalAddresses: socket_options followed by tcp_keepalive's (an additional
	// address's own replacing them when it sets them). Nil when no
	// address has any.
	SocketOptions [][]sockopt.Option
	// IgnoreGlobalConnLimit is ignore_global_conn_limit: the listener's connections are not
	// counted against the overload manager's global_downstream_max_connections.
	IgnoreGlobalConnLimit bool
	// BypassOverloadManager is bypass_overload_manager: no overload action, nor the global
	// connection limit, applies to the listener and its connections.
	BypassOverloadManager bool
	// Ignored lists the paths of the fields set that Legate accepts without implementing them
	// (operational only; see the table in doc.go), for the caller to warn about.
	Ignored []string
	// AccessLogs are access_log, in order, their filters compiled: the connections no filter
	// chain matched are logged there.
	AccessLogs []AccessLog
	// Proto is the listener as configured, for /config_dump and change detection.
	Proto *listenerv3.Listener
}

// ListenerFilter is one of a listener's listener_filters.
type ListenerFilter struct {
	// Name is the filter's name; TypedConfig its typed_config (nil: the filter's defaults),
	// whose type selects the extension when set.
	Name        string
	TypedConfig *anypb.Any
	// Path names the entry in errors ("listener_filters[0]").
	Path string
}

// FilterChain is config.listener.v3.FilterChain.
type FilterChain struct {
	// Name is name (may be empty; names that are set are unique within a listener).
	Name  string
	Match FilterChainMatch
	// Filters is filters, in order; the last one is the terminal filter that serves the
	// connection.
	Filters []NetworkFilter
	// TransportSocket is transport_socket's name, "" for plain TCP. Terminating TLS is the
	// business of the chain's handler (tlsutil); the listener manager only passes it on.
	TransportSocket string
	// TransportSocketConfig is transport_socket.typed_config, nil when unset.
	TransportSocketConfig *anypb.Any
	// Proto is the filter chain as configured; two chains with equal protos are the same
	// chain (Envoy's in-place filter chain update keeps them).
	Proto *listenerv3.FilterChain
}

// NetworkFilter is config.listener.v3.Filter: a network filter's name and its typed
// configuration, decoded once on the configuration path (ListenerFromProto).
type NetworkFilter struct {
	Name string
	// TypeURL is typed_config's type URL, "" for a filter configured by name alone; as in
	// Envoy, it selects the extension before the name does.
	TypeURL string
	// Config is typed_config decoded into the extension's message, then checked and
	// converted by the extension's NetworkFilterConfigs parser, when it has one (a
	// *TCPProxy, a *HTTPConnectionManager, a filter package's own type), else the message
	// itself; the filter's factory builds from it. Nil when
	// the registry ListenerFromProto was given has no extension for the filter: the listener
	// manager then refuses it.
	Config any
}

// FilterChainMatch is config.listener.v3.FilterChainMatch. Empty fields match anything.
type FilterChainMatch struct {
	// DestinationPort is destination_port; 0 means any.
	DestinationPort uint32
	// PrefixRanges is prefix_ranges (destination IP ranges), masked.
	PrefixRanges []netip.Prefix
	// DirectSourcePrefixRanges is direct_source_prefix_ranges, masked.
	DirectSourcePrefixRanges []netip.Prefix
	SourceType               SourceType
	// SourcePrefixRanges is source_prefix_ranges, masked.
	SourcePrefixRanges []netip.Prefix
	SourcePorts        []uint32
	// ServerNames is server_names, lower-cased: exact names and "*.suffix" wildcards.
	ServerNames []string
	// TransportProtocol is transport_protocol ("tls", "raw_buffer" or "").
	TransportProtocol string
	// ApplicationProtocols is application_protocols (ALPN names).
	ApplicationProtocols []string
}
