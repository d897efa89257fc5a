package config

import (
	"errors"
	"fmt"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/accesslog"
)

// ErrHTTPConnectionManager is wrapped by every error HTTPConnectionManagerFromProto returns.
var ErrHTTPConnectionManager = errors.New("invalid http_connection_manager")

// HTTPCodec is HttpConnectionManager.codec_type.
type HTTPCodec uint8

// The downstream codecs.
const (
	// CodecAuto serves HTTP/2 when TLS negotiated "h2" or the client sent the HTTP/2 prior
	// knowledge preface, else HTTP/1.1.
	CodecAuto HTTPCodec = iota
	CodecHTTP1
	CodecHTTP2
)

// ServerHeaderTransformation is HttpConnectionManager.server_header_transformation.
type ServerHeaderTransformation uint8

// The server header transformations.
const (
	ServerHeaderOverwrite ServerHeaderTransformation = iota
	ServerHeaderAppendIfAbsent
	ServerHeaderPassThrough
)

// HTTPFilter is one entry of HttpConnectionManager.http_filters.
type HTTPFilter struct {
	Name string
	// TypedConfig is typed_config; nil when unset.
	TypedConfig *anypb.Any
}

// AccessLog is one access_log entry of an HTTP connection manager or a listener.
type AccessLog struct {
	Name string
	// TypedConfig is typed_config; nil when unset.
	TypedConfig *anypb.Any
	// Filter is filter, compiled without runtime (the connection manager binds it with
	// Filter.Bind); nil when unset.
	Filter *accesslog.Filter
}

// HTTPConnectionManager is the part of an envoy.filters.network.http_connection_manager
// configuration (extensions.filters.network.http_connection_manager.v3.HttpConnectionManager)
// that Legate implements, with Envoy's defaults applied. Build it with
// HTTPConnectionManagerFromProto. Immutable once built; safe to share between goroutines.
type HTTPConnectionManager struct {
	// StatPrefix is stat_prefix: stats are http.<StatPrefix>.*.
	StatPrefix string
	// Codec is codec_type (default AUTO).
	Codec HTTPCodec
	// RouteConfig is the inline route_config. Legate compiles it with httpproxy/route.
	RouteConfig *routev3.RouteConfiguration
	// HTTPFilters are http_filters in order; the last must be envoy.filters.http.router.
	HTTPFilters []HTTPFilter
	// Router is the router filter's configuration.
	Router Router
	// AccessLogs are access_log in order.
	AccessLogs []AccessLog
	// UpgradeConfigs are upgrade_configs in order: the upgrade types (WebSocket, CONNECT, …)
	// the connection manager lets through, unless a route's own upgrade_configs decides.
	UpgradeConfigs []UpgradeConfig

	// ServerName is server_name (default "envoy"), written in the server response header.
	ServerName string
	// ServerHeader is server_header_transformation (default OVERWRITE).
	ServerHeader ServerHeaderTransformation
	// UseRemoteAddress is use_remote_address: the downstream peer address is the client
	// address and is appended to x-forwarded-for.
	UseRemoteAddress bool
	// XffNumTrustedHops is xff_num_trusted_hops.
	XffNumTrustedHops uint32
	// SkipXffAppend is skip_xff_append.
	SkipXffAppend bool
	// GenerateRequestID is generate_request_id (default true): an x-request-id is added to
	// requests that lack one.
	GenerateRequestID bool
	// PreserveExternalRequestID is preserve_external_request_id.
	PreserveExternalRequestID bool
	// AlwaysSetRequestIDInResponse is always_set_request_id_in_response.
	AlwaysSetRequestIDInResponse bool
	// StripAnyHostPort is strip_any_host_port.
	StripAnyHostPort bool

	// IdleTimeout is common_http_protocol_options.idle_timeout (default 1 h; 0 disables):
	// how long a connection without active requests stays open.
	IdleTimeout time.Duration
	// MaxConnectionDuration is common_http_protocol_options.max_connection_duration (0: none).
	MaxConnectionDuration time.Duration
	// MaxRequestsPerConnection is common_http_protocol_options.max_requests_per_connection
	// (0: unlimited).
	MaxRequestsPerConnection uint32
	// MaxHeadersCount is common_http_protocol_options.max_headers_count (default 100).
	MaxHeadersCount uint32
	// HTTP1 is http_protocol_options, the downstream HTTP/1 codec's options.
	HTTP1 HTTP1Options
	// MaxRequestHeadersKB is max_request_headers_kb (default 60).
	MaxRequestHeadersKB uint32
	// StreamIdleTimeout is stream_idle_timeout (default 5 min; 0 disables).
	StreamIdleTimeout time.Duration
	// RequestTimeout is request_timeout (default 0: none).
	RequestTimeout time.Duration
	// RequestHeadersTimeout is request_headers_timeout (default 0: none).
	RequestHeadersTimeout time.Duration
	// DrainTimeout is drain_timeout (default 5 s): how long HTTP/2 connections get between the
	// first GOAWAY and the connection close during a drain.
	DrainTimeout time.Duration

	// HTTP2MaxConcurrentStreams is http2_protocol_options.max_concurrent_streams
	// (default 2147483647).
	HTTP2MaxConcurrentStreams uint32
	// HTTP2InitialStreamWindowSize and HTTP2InitialConnectionWindowSize are the
	// http2_protocol_options windows (defaults 256 MiB and 256 MiB).
	HTTP2InitialStreamWindowSize, HTTP2InitialConnectionWindowSize uint32
	// HTTP2AllowConnect is http2_protocol_options.allow_connect: HTTP/2 clients may open
	// WebSockets and other upgrades with extended CONNECT (RFC 8441).
	HTTP2AllowConnect bool

	// RDS is rds, when the route table comes from RDS (RouteConfig is then an empty table of
	// its route_config_name); ScopedRoutes is scoped_routes, when the tables come from SRDS
	// or its inline scopes (RouteConfig is then an empty table of its name). Set by the
	// network filter's parser, which takes them out before the conversion.
	RDS          *hcmv3.Rds
	ScopedRoutes *hcmv3.ScopedRoutes
	// DiscoveredFilters are the http_filters with config_discovery (ECDS), taken out of
	// HTTPFilters by the network filter's parser.
	DiscoveredFilters []DiscoveredFilter
	// Tracing is tracing, which the tracing package converts (tracing.FromProto).
	Tracing *hcmv3.HttpConnectionManager_Tracing

	// Proto is the configuration as given, for /config_dump.
	Proto *hcmv3.HttpConnectionManager
	// Ignored lists the fields set that Legate accepts without implementing them (operational
	// only; see hcmFields), for a warning.
	Ignored []string
}

// Envoy's HttpConnectionManager defaults.
const (
	defaultHCMIdleTimeout       = time.Hour
	defaultStreamIdleTimeout    = 5 * time.Minute
	defaultHCMDrainTimeout      = 5 * time.Second
	defaultMaxHeadersCount      = 100
	defaultMaxRequestHeadersKB  = 60
	defaultH2MaxStreams         = 2147483647
	defaultH2Window             = 256 << 20
	maxRequestHeadersKBLimit    = 8192
	routerFilterName            = "envoy.filters.http.router"
	routerFilterTypeURL         = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
	defaultServerName           = "envoy"
	hcmUnsupportedFieldRuleText = "not implemented by Legate"
)

// HTTPConnectionManagerFromProto converts and checks an HttpConnectionManager. Errors wrap
// ErrHTTPConnectionManager and name the field path, the value and the rule. Features Legate
// does not implement (rds, scoped_routes, upgrade filters, HTTP/3) are rejected rather than
// ignored.
func HTTPConnectionManagerFromProto(p *hcmv3.HttpConnectionManager) (*HTTPConnectionManager, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: nil configuration", ErrHTTPConnectionManager)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrHTTPConnectionManager}, args...)...)
	}
	h := &HTTPConnectionManager{
		StatPrefix:                   p.GetStatPrefix(),
		RouteConfig:                  p.GetRouteConfig(),
		ServerName:                   p.GetServerName(),
		UseRemoteAddress:             p.GetUseRemoteAddress().GetValue(),
		XffNumTrustedHops:            p.GetXffNumTrustedHops(),
		SkipXffAppend:                p.GetSkipXffAppend(),
		GenerateRequestID:            p.GetGenerateRequestId() == nil || p.GetGenerateRequestId().GetValue(),
		PreserveExternalRequestID:    p.GetPreserveExternalRequestId(),
		AlwaysSetRequestIDInResponse: p.GetAlwaysSetRequestIdInResponse(),
		StripAnyHostPort:             p.GetStripAnyHostPort(),
		StreamIdleTimeout:            durationOr(p.GetStreamIdleTimeout(), defaultStreamIdleTimeout),
		RequestTimeout:               durationOr(p.GetRequestTimeout(), 0),
		RequestHeadersTimeout:        durationOr(p.GetRequestHeadersTimeout(), 0),
		DrainTimeout:                 durationOr(p.GetDrainTimeout(), defaultHCMDrainTimeout),
		MaxRequestHeadersKB:          u32Or(p.GetMaxRequestHeadersKb(), defaultMaxRequestHeadersKB),
		Proto:                        p,
	}
	if h.StatPrefix == "" {
		return nil, bad("stat_prefix = %q; must not be empty", h.StatPrefix)
	}
	ignored, err := auditHCM(p)
	if err != nil {
		return nil, err
	}
	h.Ignored = ignored
	if h.ServerName == "" {
		h.ServerName = defaultServerName
	}
	switch p.GetCodecType() {
	case hcmv3.HttpConnectionManager_AUTO:
		h.Codec = CodecAuto
	case hcmv3.HttpConnectionManager_HTTP1:
		h.Codec = CodecHTTP1
	case hcmv3.HttpConnectionManager_HTTP2:
		h.Codec = CodecHTTP2
	default:
		return nil, bad("codec_type = %s; %s", p.GetCodecType(), hcmUnsupportedFieldRuleText)
	}
	switch p.GetServerHeaderTransformation() {
	case hcmv3.HttpConnectionManager_OVERWRITE:
		h.ServerHeader = ServerHeaderOverwrite
	case hcmv3.HttpConnectionManager_APPEND_IF_ABSENT:
		h.ServerHeader = ServerHeaderAppendIfAbsent
	case hcmv3.HttpConnectionManager_PASS_THROUGH:
		h.ServerHeader = ServerHeaderPassThrough
	}
	if v := p.GetAddProxyProtocolConnectionState(); v != nil && !v.GetValue() {
		// Every connection's PROXY protocol state is set (pool.Request.Origin), as by default.
		return nil, bad("add_proxy_protocol_connection_state: false: %s (the connection manager always sets the PROXY protocol state, Envoy's default)", hcmUnsupportedFieldRuleText)
	}
	if h.MaxRequestHeadersKB == 0 || h.MaxRequestHeadersKB > maxRequestHeadersKBLimit {
		return nil, bad("max_request_headers_kb = %d; must be in [1, %d]", h.MaxRequestHeadersKB, maxRequestHeadersKBLimit)
	}
	if err := h.commonOptions(p.GetCommonHttpProtocolOptions()); err != nil {
		return nil, err
	}
	h1, err := HTTP1OptionsFromProto(p.GetHttpProtocolOptions())
	if err != nil {
		return nil, bad("http_protocol_options.%v", err)
	}
	h.HTTP1 = h1
	h2 := p.GetHttp2ProtocolOptions()
	h.HTTP2MaxConcurrentStreams = u32Or(h2.GetMaxConcurrentStreams(), defaultH2MaxStreams)
	h.HTTP2InitialStreamWindowSize = u32Or(h2.GetInitialStreamWindowSize(), defaultH2Window)
	h.HTTP2InitialConnectionWindowSize = u32Or(h2.GetInitialConnectionWindowSize(), defaultH2Window)
	h.HTTP2AllowConnect = h2.GetAllowConnect()

	switch {
	case p.GetRds() != nil:
		return nil, bad("rds: %s (use route_config)", hcmUnsupportedFieldRuleText)
	case p.GetScopedRoutes() != nil:
		return nil, bad("scoped_routes: %s", hcmUnsupportedFieldRuleText)
	case h.RouteConfig == nil:
		return nil, bad("route_specifier: unset; route_config is required")
	}
	if err := h.filters(p); err != nil {
		return nil, err
	}
	if err := h.upgrades(p.GetUpgradeConfigs()); err != nil {
		return nil, err
	}
	for i, al := range p.GetAccessLog() {
		path := fmt.Sprintf("access_log[%d].filter", i)
		filter, err := accesslog.FilterFromProto(path, al.GetFilter(), accesslog.FilterOptions{})
		if err != nil {
			return nil, bad("%v", err)
		}
		h.AccessLogs = append(h.AccessLogs, AccessLog{Name: al.GetName(), TypedConfig: al.GetTypedConfig(), Filter: filter})
	}
	return h, nil
}

// commonOptions applies common_http_protocol_options.
func (h *HTTPConnectionManager) commonOptions(c *corev3.HttpProtocolOptions) error {
	h.IdleTimeout = durationOr(c.GetIdleTimeout(), defaultHCMIdleTimeout)
	h.MaxConnectionDuration = durationOr(c.GetMaxConnectionDuration(), 0)
	h.MaxRequestsPerConnection = c.GetMaxRequestsPerConnection().GetValue()
	h.MaxHeadersCount = u32Or(c.GetMaxHeadersCount(), defaultMaxHeadersCount)
	if c.GetHeadersWithUnderscoresAction() == corev3.HttpProtocolOptions_REJECT_REQUEST {
		return fmt.Errorf("%w: common_http_protocol_options.headers_with_underscores_action = REJECT_REQUEST; %s",
			ErrHTTPConnectionManager, hcmUnsupportedFieldRuleText)
	}
	return nil
}

// filters copies http_filters and checks that the router is present and last, as Envoy does.
func (h *HTTPConnectionManager) filters(p *hcmv3.HttpConnectionManager) error {
	fs := p.GetHttpFilters()
	for i, f := range fs {
		h.HTTPFilters = append(h.HTTPFilters, HTTPFilter{Name: f.GetName(), TypedConfig: f.GetTypedConfig()})
		isRouter := h.HTTPFilters[i].IsRouter()
		if isRouter && i != len(fs)-1 {
			return fmt.Errorf("%w: http_filters[%d] = %q: the router must be the last filter", ErrHTTPConnectionManager, i, f.GetName())
		}
		if !isRouter && i == len(fs)-1 {
			return fmt.Errorf("%w: http_filters[%d] = %q: the last filter must be %s", ErrHTTPConnectionManager, i, f.GetName(), routerFilterName)
		}
		if isRouter {
			r, err := routerFromProto(fmt.Sprintf("http_filters[%d].typed_config", i), f.GetTypedConfig())
			if err != nil {
				return fmt.Errorf("%w: %w", ErrHTTPConnectionManager, err)
			}
			h.Router = r
		}
	}
	if len(fs) == 0 {
		// Envoy adds the router when no HTTP filter is configured.
		h.HTTPFilters = []HTTPFilter{{Name: routerFilterName}}
	}
	return nil
}

// IsRouter reports whether f is envoy.filters.http.router (by type URL or name).
func (f HTTPFilter) IsRouter() bool {
	if u := f.TypedConfig.GetTypeUrl(); u != "" {
		return u == routerFilterTypeURL
	}
	return f.Name == routerFilterName
}

// UpgradeConfig is one entry of HttpConnectionManager.upgrade_configs.
type UpgradeConfig struct {
	// Type is upgrade_type as given ("websocket", "CONNECT", …); requests match it without
	// regard to case, as Envoy matches them.
	Type string
	// Enabled is enabled (default true). A disabled type is refused unless a route enables it.
	Enabled bool
}

// upgrades converts upgrade_configs. A type given twice is an error, as in Envoy; an upgrade
// filter chain (filters) is refused: Legate runs the connection manager's http_filters.
func (h *HTTPConnectionManager) upgrades(ucs []*hcmv3.HttpConnectionManager_UpgradeConfig) error {
	for i, uc := range ucs {
		path := fmt.Sprintf("upgrade_configs[%d]", i)
		t := uc.GetUpgradeType()
		if t == "" {
			return fmt.Errorf("%w: %s.upgrade_type = \"\": must not be empty", ErrHTTPConnectionManager, path)
		}
		if len(uc.GetFilters()) > 0 {
			return fmt.Errorf("%w: %s.filters: %s", ErrHTTPConnectionManager, path, hcmUnsupportedFieldRuleText)
		}
		for _, prev := range h.UpgradeConfigs {
			if strings.EqualFold(prev.Type, t) {
				return fmt.Errorf("%w: %s.upgrade_type = %q: multiple upgrade configs with the same name", ErrHTTPConnectionManager, path, t)
			}
		}
		enabled := uc.GetEnabled() == nil || uc.GetEnabled().GetValue()
		h.UpgradeConfigs = append(h.UpgradeConfigs, UpgradeConfig{Type: t, Enabled: enabled})
	}
	return nil
}
