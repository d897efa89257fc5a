package config

import (
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/internal/matcher"
	"github.com/legateproxy/legate/internal/matcher/transportsocket"
	"github.com/legateproxy/legate/internal/proxyproto"
	"github.com/legateproxy/legate/internal/sockopt"
)

// Defaults of the Cluster fields, from the cluster configuration spec and Envoy's API.
const (
	DefaultConnectTimeout         = 5 * time.Second
	DefaultClusterBufferLimit     = 1024 * 1024
	DefaultDNSRefreshRate         = 5 * time.Second
	DefaultCleanupInterval        = 5 * time.Second
	DefaultUpdateMergeWindow      = time.Second
	DefaultHealthyPanicThreshold  = 50
	DefaultZoneRoutingEnabled     = 100
	DefaultMinClusterSize         = 6
	DefaultChoiceCount            = 2
	DefaultMaglevTableSize        = 65537
	MaxMaglevTableSize            = 5000011
	DefaultOverprovisioningFactor = 140
	// Circuit-breaker defaults per priority (Envoy's 1024/1024/1024/3).
	DefaultMaxConnections     = 1024
	DefaultMaxPendingRequests = 1024
	DefaultMaxRequests        = 1024
	DefaultMaxRetries         = 3
	// OriginalDstHeader is Envoy's original-destination override header; OriginalDstHeaderSpec
	// is the spelling the spec uses. Both are honoured when use_http_header is set.
	OriginalDstHeader     = "x-envoy-original-dst-host"
	OriginalDstHeaderSpec = "x-proxy-original-dst-host"
)

// DiscoveryType is Cluster.DiscoveryType, or Custom for a cluster_type.
type DiscoveryType uint8

// Discovery types.
const (
	Static DiscoveryType = iota
	StrictDNS
	LogicalDNS
	EDS
	OriginalDst
	Custom
)

var discoveryNames = [...]string{"STATIC", "STRICT_DNS", "LOGICAL_DNS", "EDS", "ORIGINAL_DST", "CUSTOM"}

// String returns Envoy's enum name ("STATIC", …; "CUSTOM" for a cluster_type).
func (t DiscoveryType) String() string {
	if int(t) < len(discoveryNames) {
		return discoveryNames[t]
	}
	return "UNKNOWN"
}

// DNSLookupFamily is Cluster.DnsLookupFamily.
type DNSLookupFamily uint8

// Lookup families. Auto asks for IPv6 first and falls back to IPv4.
const (
	Auto DNSLookupFamily = iota
	V4Only
	V6Only
	V4Preferred
	All
)

// Priority is a circuit-breaker RoutingPriority.
type Priority uint8

// Routing priorities.
const (
	PriorityDefault Priority = iota
	PriorityHigh
	NumPriorities
)

// ProtocolSelection is Cluster.ClusterProtocolSelection.
type ProtocolSelection uint8

// Protocol selections.
const (
	UseConfiguredProtocol ProtocolSelection = iota
	UseDownstreamProtocol
)

// SubsetFallback is LbSubsetConfig.LbSubsetFallbackPolicy.
type SubsetFallback uint8

// Subset fallback policies.
const (
	NoFallback SubsetFallback = iota
	AnyEndpoint
	DefaultSubset
)

// HashFunction is RingHashLbConfig.HashFunction.
type HashFunction uint8

// Ring hash functions.
const (
	XXHash HashFunction = iota
	MurmurHash2
)

// Cluster is one upstream cluster (envoy.config.cluster.v3.Cluster) with every default applied.
// Built by ClusterFromProto; immutable afterwards and safe to share between goroutines.
type Cluster struct {
	// Name is the cluster name; StatName the name used in stats (alt_stat_name or name, each
	// ':' replaced by '_').
	Name        string
	AltStatName string
	StatName    string

	// Type is the discovery type; CustomType is set when Type is Custom (cluster_type).
	Type       DiscoveryType
	CustomType *CustomClusterType
	// EDS holds eds_cluster_config (only for Type EDS).
	EDS *EDSConfig

	ConnectTimeout                time.Duration
	PerConnectionBufferLimitBytes uint32
	// MaxRequestsPerConnection is max_requests_per_connection (or the
	// common_http_protocol_options spelling); 0 means no limit.
	MaxRequestsPerConnection uint32

	// LbPolicy is Envoy's LbPolicy name: ROUND_ROBIN, LEAST_REQUEST, RING_HASH, RANDOM, MAGLEV,
	// CLUSTER_PROVIDED (ORIGINAL_DST_LB in v2). When load_balancing_policy is set, it is the
	// name its chosen policy maps to, and RingHash, LeastRequest, Maglev and the locality
	// settings of CommonLb come from that policy.
	LbPolicy     string
	RingHash     RingHashLbConfig
	LeastRequest LeastRequestLbConfig
	Maglev       MaglevLbConfig
	OriginalDst  OriginalDstLbConfig
	CommonLb     CommonLbConfig
	// LbSubset is lb_subset_config; nil when unset (or without selectors).
	LbSubset *LbSubsetConfig

	// LoadAssignment is load_assignment (or the v2 hosts list upgraded by bootstrap).
	LoadAssignment LoadAssignment

	// HealthCheck is health_checks[0], converted with Envoy's defaults and checked; nil without
	// health checks. Legate refuses more than one, as Envoy supports one per cluster.
	HealthCheck *HealthCheck
	// OutlierDetection is outlier_detection, converted with Envoy's defaults and checked; nil
	// when outlier detection is off.
	OutlierDetection *OutlierDetection
	CircuitBreakers  CircuitBreakers

	// DNS settings (STRICT_DNS and LOGICAL_DNS only).
	DNSRefreshRate        time.Duration
	DNSFailureRefreshRate time.Duration // 0: use DNSRefreshRate
	RespectDNSTTL         bool
	DNSLookupFamily       DNSLookupFamily
	// DNSResolution is typed_dns_resolver_config, dns_resolution_config,
	// use_tcp_for_dns_lookups and dns_resolvers, merged as Envoy merges them.
	DNSResolution DNSResolution

	// CleanupInterval is cleanup_interval (ORIGINAL_DST only).
	CleanupInterval time.Duration

	// TLS reports whether a TLS transport socket (or v2 tls_context) is configured;
	// TransportSocket keeps the proto for the TLS package.
	TLS             bool
	TransportSocket *corev3.TransportSocket
	// TransportSocketMatches are transport_socket_matches: each endpoint's (or its
	// locality's) envoy.transport_socket_match metadata selects one, else TransportSocket
	// applies (MatchTransportSocket).
	TransportSocketMatches []TransportSocketMatch
	// TransportSocketMatcher is transport_socket_matcher, compiled: its action is the index
	// (MatchTransportSocket's) of the transport_socket_matches entry it names. When set it
	// replaces the labels (SelectTransportSocket); nil when unset.
	TransportSocketMatcher *matcher.Matcher[transportsocket.Data, int]
	// SocketMatcherReadsFilterState is set when TransportSocketMatcher has a filter_state
	// input: a connection that carries shared filter state is matched again with it.
	SocketMatcherReadsFilterState bool

	// HTTP2 is set when http2_protocol_options is present (or the upstream options ask for
	// HTTP/2): the upstream speaks HTTP/2 with prior knowledge.
	HTTP2             bool
	ProtocolSelection ProtocolSelection
	// AutoHTTP is HttpProtocolOptions.auto_config: each connection speaks what TLS ALPN
	// negotiates, HTTP/2 when the upstream offers h2, HTTP/1.1 otherwise.
	AutoHTTP bool
	// HTTP2Options are the http2_protocol_options in force (the typed options' or the
	// Cluster's), as the upstream HTTP/2 client applies them.
	HTTP2Options UpstreamHTTP2Options
	// HTTP holds common_http_protocol_options as they apply to the cluster's upstream
	// connections, from typed_extension_protocol_options'
	// envoy.extensions.upstreams.http.v3.HttpProtocolOptions when that is set (it then
	// replaces the Cluster's own protocol fields, as in Envoy), else from the Cluster.
	HTTP UpstreamHTTPOptions
	// UpstreamHTTP is upstream_http_protocol_options: the typed HttpProtocolOptions' when that
	// is set (the Cluster's own field is then ignored, as in Envoy), else the Cluster's.
	UpstreamHTTP UpstreamHTTPProtocolOptions
	// HTTP1 is the upstream HTTP/1 codec's options: http_protocol_options, or, when the
	// typed HttpProtocolOptions is set, the http_protocol_options of its explicit_http_config,
	// use_downstream_protocol_config or auto_config.
	HTTP1 HTTP1Options
	// UpstreamHTTPFilters are the typed HttpProtocolOptions' http_filters but the terminal
	// upstream_codec: each upstream attempt to the cluster runs them, in place of the
	// router's upstream_http_filters (see UpstreamFilters).
	UpstreamHTTPFilters []HTTPFilter
	// TypedExtensionProtocolOptions are typed_extension_protocol_options, by filter name,
	// left opaque for the filters that read them.
	TypedExtensionProtocolOptions map[string]*anypb.Any

	// UpstreamBindAddress is upstream_bind_config.source_address; nil when unset.
	UpstreamBindAddress *Address
	// UpstreamSocketOptions are upstream_bind_config.socket_options, set on each upstream
	// connection before it connects (the bootstrap's cluster_manager.upstream_bind_config's
	// when the cluster has no upstream_bind_config).
	UpstreamSocketOptions []sockopt.Option
	// TCPKeepalive is upstream_connection_options.tcp_keepalive; nil when unset.
	TCPKeepalive *TCPKeepalive

	CloseConnectionsOnHostHealthFailure bool
	// DrainConnectionsOnHostRemoval is v2's drain_connections_on_host_removal, v3's
	// ignore_health_on_host_removal.
	DrainConnectionsOnHostRemoval bool

	// Metadata is the cluster's metadata, kept as the proto for filters and logging.
	Metadata *corev3.Metadata

	// Ignored lists the paths of the fields set that Legate accepts without implementing them
	// (operational only; see the table in doc.go), for the caller to warn about.
	Ignored []string

	// Proto is the cluster as received, for /config_dump. Do not modify it.
	Proto *clusterv3.Cluster
}

// UpstreamHTTPProtocolOptions are core.v3.UpstreamHttpProtocolOptions: the TLS name of each
// HTTP connection from the requests it carries, so the pools keep one set of connections per
// name (pool.Manager).
type UpstreamHTTPProtocolOptions struct {
	// AutoSNI is auto_sni: the SNI is the host of the request's authority (or of
	// OverrideAutoSNIHeader's value), port removed, unless it is an IP address; it replaces
	// the transport socket's sni.
	AutoSNI bool
	// AutoSANValidation is auto_san_validation: the server's certificate must carry that host
	// as a SAN, replacing the validation context's SAN matchers.
	AutoSANValidation bool
	// OverrideAutoSNIHeader is override_auto_sni_header, lower case: the header whose
	// non-empty value replaces the authority as the name's source.
	OverrideAutoSNIHeader string
}

// ByAuthority reports whether the TLS name of a connection comes from its requests.
func (o *UpstreamHTTPProtocolOptions) ByAuthority() bool { return o.AutoSNI || o.AutoSANValidation }

// UpstreamHTTPOptions are the core.v3.HttpProtocolOptions of a cluster's HTTP connections.
type UpstreamHTTPOptions struct {
	// IdleTimeout is idle_timeout: a connection without a request that long is closed
	// (DefaultUpstreamIdleTimeout when unset; 0 disables).
	IdleTimeout time.Duration
	// MaxConnectionDuration is max_connection_duration: a connection that old takes no new
	// request and closes when its last one ends (0: no limit).
	MaxConnectionDuration time.Duration
	// MaxHeadersCount is max_headers_count, the most fields an upstream response head may
	// have (default 100).
	MaxHeadersCount uint32
	// MaxResponseHeadersBytes is max_response_headers_kb in bytes (default 60 KiB).
	MaxResponseHeadersBytes uint32
	// MaxStreamDuration is max_stream_duration: an upstream request is reset that long after
	// it started (0: no limit).
	MaxStreamDuration time.Duration
}

// UpstreamHTTP2Options are the core.v3.Http2ProtocolOptions of a cluster's HTTP/2
// connections that Legate implements; zero values mean unset (Envoy's defaults).
type UpstreamHTTP2Options struct {
	// HpackTableSize is hpack_table_size, the HPACK table the upstream may use to encode
	// response headers (SETTINGS_HEADER_TABLE_SIZE).
	HpackTableSize uint32
	// MaxConcurrentStreams is max_concurrent_streams: at most that many streams at once on
	// one connection; more open another connection.
	MaxConcurrentStreams uint32
	// InitialStreamWindowSize and InitialConnectionWindowSize are the receive windows
	// advertised; a stream's is never above per_connection_buffer_limit_bytes.
	InitialStreamWindowSize     uint32
	InitialConnectionWindowSize uint32
	// KeepaliveInterval and KeepaliveTimeout are connection_keepalive: a PING after that
	// long without a frame from the upstream, the connection closed when its answer takes
	// longer than the timeout.
	KeepaliveInterval, KeepaliveTimeout time.Duration
}

// Defaults of UpstreamHTTPOptions (Envoy's).
const (
	DefaultUpstreamIdleTimeout     = time.Hour
	DefaultMaxResponseHeadersCount = 100
	DefaultMaxResponseHeadersKB    = 60
	maxResponseHeadersKB           = 8192 // Envoy's bound on max_response_headers_kb
)

// CustomClusterType is Cluster.CustomClusterType: a cluster_type extension named in
// ClusterTypes.
type CustomClusterType struct {
	Name string
	// Settings are typed_config as the type's decoder checked it: *AggregateConfig for
	// envoy.clusters.aggregate.
	Settings any
	// Config is typed_config as received.
	Config *anypb.Any
}

// EDSConfig is Cluster.EdsClusterConfig.
type EDSConfig struct {
	// ServiceName is service_name; empty means the cluster name.
	ServiceName string
	// Source is eds_config, for the xDS client.
	Source *corev3.ConfigSource
}

// RingHashLbConfig is Cluster.RingHashLbConfig with defaults (1024 and 8M).
type RingHashLbConfig struct {
	MinimumRingSize uint64
	MaximumRingSize uint64
	HashFunction    HashFunction
}

// LeastRequestLbConfig is Cluster.LeastRequestLbConfig with defaults.
type LeastRequestLbConfig struct {
	ChoiceCount       uint32  // default 2
	ActiveRequestBias float64 // default 1.0
}

// MaglevLbConfig is Cluster.MaglevLbConfig.
type MaglevLbConfig struct {
	TableSize uint64 // default 65537
}

// OriginalDstLbConfig is Cluster.OriginalDstLbConfig.
type OriginalDstLbConfig struct {
	// UseHTTPHeader lets the x-envoy-original-dst-host (and x-proxy-original-dst-host) header
	// override the destination. The header is not sanitised.
	UseHTTPHeader bool
	// HeaderNames are the headers read when UseHTTPHeader is set: http_header_name when
	// configured, else OriginalDstHeader and OriginalDstHeaderSpec.
	HeaderNames []string
	// UpstreamPortOverride replaces the destination port when non-zero.
	UpstreamPortOverride uint32
}

// CommonLbConfig is Cluster.CommonLbConfig with defaults.
type CommonLbConfig struct {
	// HealthyPanicThreshold in whole percent (truncated to 1%), default 50.
	HealthyPanicThreshold uint32
	// ZoneAware is zone_aware_lb_config; nil when unset (zone-aware routing then uses the
	// defaults whenever a local cluster is configured).
	ZoneAware *ZoneAwareLbConfig
	// LocalityWeighted is locality_weighted_lb_config.
	LocalityWeighted bool
	// UpdateMergeWindow merges health, weight and metadata updates; default 1 s, 0 disables.
	UpdateMergeWindow          time.Duration
	IgnoreNewHostsUntilFirstHC bool
	UseHostnameForHashing      bool
}

// ZoneAwareLbConfig is CommonLbConfig.ZoneAwareLbConfig with defaults.
type ZoneAwareLbConfig struct {
	RoutingEnabled     float64 // percent, default 100
	MinClusterSize     uint64  // default 6
	FailTrafficOnPanic bool
}

// LbSubsetConfig is Cluster.LbSubsetConfig. DefaultSubset values are stringified as endpoint
// metadata is (see Endpoint.Metadata).
type LbSubsetConfig struct {
	FallbackPolicy      SubsetFallback
	DefaultSubset       map[string]string
	Selectors           [][]string
	LocalityWeightAware bool
	ScaleLocalityWeight bool
	PanicModeAny        bool
}

// CircuitBreakers is cluster.CircuitBreakers: the effective thresholds of both routing
// priorities (index PriorityDefault and PriorityHigh).
type CircuitBreakers struct {
	Thresholds [NumPriorities]Thresholds
}

// Thresholds is CircuitBreakers.Thresholds with Envoy's defaults.
type Thresholds struct {
	MaxConnections     uint32
	MaxPendingRequests uint32
	MaxRequests        uint32
	MaxRetries         uint32
	// MaxConnectionPools is max_connection_pools; 0 means unlimited.
	MaxConnectionPools uint32
	// TrackRemaining publishes remaining_* gauges.
	TrackRemaining bool
	// RetryBudget is retry_budget; nil when unset.
	RetryBudget *RetryBudget
}

// RetryBudget is CircuitBreakers.Thresholds.RetryBudget with defaults (20%, 3).
type RetryBudget struct {
	BudgetPercent       float64
	MinRetryConcurrency uint32
}

// DefaultThresholds returns the thresholds Envoy uses when none is configured.
func DefaultThresholds() Thresholds {
	return Thresholds{
		MaxConnections:     DefaultMaxConnections,
		MaxPendingRequests: DefaultMaxPendingRequests,
		MaxRequests:        DefaultMaxRequests,
		MaxRetries:         DefaultMaxRetries,
	}
}

// AddressKind says which member of core.Address is set.
type AddressKind uint8

// Address kinds.
const (
	SocketAddress AddressKind = iota
	PipeAddress
	InternalAddress
)

// Address is core.Address.
type Address struct {
	Kind AddressKind
	// Host is socket_address.address: an IP for static addresses, a DNS name for DNS clusters.
	Host string
	Port uint32
	// UDP is set for protocol UDP.
	UDP bool
	// Path is the pipe path, or the server_listener_name of an internal address.
	Path string
	// EndpointID is envoy_internal_address.endpoint_id.
	EndpointID string
}

// TCPKeepalive is core.TcpKeepalive; zero fields mean the system default.
type TCPKeepalive struct {
	Probes   uint32
	Time     time.Duration
	Interval time.Duration
}

// HealthStatus is core.HealthStatus, an endpoint's health as EDS reports it.
type HealthStatus uint8

// EDS health statuses.
const (
	HealthUnknown HealthStatus = iota
	HealthHealthy
	HealthUnhealthy
	HealthDraining
	HealthTimeout
	HealthDegraded
)

// LoadAssignment is ClusterLoadAssignment, converted.
type LoadAssignment struct {
	// ClusterName is cluster_name (EDS service name).
	ClusterName string
	Localities  []LocalityEndpoints
	// OverprovisioningFactor in percent; default 140.
	OverprovisioningFactor uint32
	WeightedPriorityHealth bool
	DropOverloads          []DropOverload
	// HasLocalityWeights is set when any LocalityLbEndpoints carries load_balancing_weight.
	HasLocalityWeights bool
}

// LocalityEndpoints is LocalityLbEndpoints.
type LocalityEndpoints struct {
	Region, Zone, SubZone string
	Priority              uint32
	// Weight is load_balancing_weight; 0 when unset.
	Weight    uint32
	Endpoints []Endpoint
	// SocketMatch is the locality's envoy.transport_socket_match metadata (SocketMatchLabels).
	SocketMatch map[string]string
	// RawMetadata is the locality's metadata as received, for transport_socket_matcher's
	// locality_metadata input; nil when unset. Do not modify it.
	RawMetadata *corev3.Metadata
}

// Endpoint is LbEndpoint.
type Endpoint struct {
	Address  Address
	Hostname string
	// Weight is load_balancing_weight; 0 means 1.
	Weight       uint32
	HealthStatus HealthStatus
	// Metadata is the endpoint's envoy.lb (or proxy.lb) filter metadata, values stringified:
	// strings as is, numbers in Go's %v form, booleans "true"/"false".
	Metadata map[string]string
	// Canary is envoy.lb metadata "canary": true.
	Canary bool
	// FilterMetadata is the endpoint's whole filter metadata (internal_upstream's
	// passthrough_metadata reads it); shared with the proto, read only.
	FilterMetadata map[string]*structpb.Struct
	// SocketMatch is the endpoint's envoy.transport_socket_match metadata (SocketMatchLabels).
	SocketMatch map[string]string
	// RawMetadata is the endpoint's metadata as received, for transport_socket_matcher's
	// endpoint_metadata input; nil when unset. Do not modify it.
	RawMetadata *corev3.Metadata
	// ProxyProtocolTLVs are the added_tlvs of the endpoint's PerHostConfig for the upstream
	// proxy_protocol socket (typed_filter_metadata[envoy.transport_sockets.proxy_protocol]).
	ProxyProtocolTLVs []proxyproto.TLV
}

// DropOverload is ClusterLoadAssignment.Policy.DropOverload, the drop rate in parts per million.
type DropOverload struct {
	Category   string
	PerMillion uint32
}
