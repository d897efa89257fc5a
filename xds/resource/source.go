package resource

import (
	"fmt"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// Defaults of core.ConfigSource and core.ApiConfigSource, as Envoy applies them.
const (
	// DefaultInitialFetchTimeout is initial_fetch_timeout when unset.
	DefaultInitialFetchTimeout = 15 * time.Second
	// DefaultRequestTimeout is api_config_source.request_timeout (REST) when unset.
	DefaultRequestTimeout = time.Second
	// DefaultRateLimitMaxTokens and DefaultRateLimitFillRate are rate_limit_settings' defaults.
	DefaultRateLimitMaxTokens = 100
	DefaultRateLimitFillRate  = 10.0
)

// APIType is api_config_source.api_type, restricted to the transports Legate implements.
type APIType int

// API types.
const (
	// GRPC is state-of-the-world gRPC.
	GRPC APIType = iota
	// DeltaGRPC is incremental gRPC.
	DeltaGRPC
	// REST is JSON polling over HTTP.
	REST
)

func (t APIType) String() string {
	switch t {
	case GRPC:
		return "GRPC"
	case DeltaGRPC:
		return "DELTA_GRPC"
	case REST:
		return "REST"
	}
	return fmt.Sprintf("APIType(%d)", int(t))
}

// APISource is core.ApiConfigSource: where and how to reach a management server.
type APISource struct {
	Type APIType
	// Cluster is grpc_services[0].envoy_grpc.cluster_name (gRPC) or cluster_names[0] (REST): a
	// bootstrap cluster whose hosts serve xDS.
	Cluster string
	// Authority is envoy_grpc.authority, the :authority of gRPC requests; "" means Cluster.
	Authority string
	// RefreshDelay is refresh_delay, the REST polling interval.
	RefreshDelay time.Duration
	// RequestTimeout is request_timeout for REST, DefaultRequestTimeout when unset.
	RequestTimeout time.Duration
	// SetNodeOnFirstMessageOnly is set_node_on_first_message_only.
	SetNodeOnFirstMessageOnly bool
	// RateLimit is rate_limit_settings; nil means requests are not rate limited.
	RateLimit *RateLimit
}

// RateLimit is core.RateLimitSettings: a token bucket for discovery requests.
type RateLimit struct {
	MaxTokens uint32
	FillRate  float64 // tokens per second
}

// Source is core.ConfigSource.
type Source struct {
	// ADS is `ads: {}`: use the bootstrap's ads_config stream.
	ADS bool
	// Self is `self: {}`: use the source that delivered the resource naming this one.
	Self bool
	// API is api_config_source; nil for the other kinds.
	API *APISource
	// Path is path_config_source.path (or the deprecated path): a file holding a
	// DiscoveryResponse, reloaded when another file is moved into its place.
	Path string
	// WatchedDirectory is path_config_source.watched_directory.path: when set, Path is read
	// again whenever a file is moved into this directory (a Kubernetes ConfigMap's ..data
	// symlink swap) instead of when Path itself is replaced.
	WatchedDirectory string
	// InitialFetchTimeout is initial_fetch_timeout; DefaultInitialFetchTimeout when unset and
	// zero (no timeout) when set to 0.
	InitialFetchTimeout time.Duration
}

// Key identifies the transport a source uses: sources with equal keys share one stream.
func (s Source) Key() string {
	switch {
	case s.ADS:
		return "ads"
	case s.Path != "" && s.WatchedDirectory != "":
		return "path:" + s.Path + "|dir:" + s.WatchedDirectory
	case s.Path != "":
		return "path:" + s.Path
	case s.API != nil:
		a := s.API
		return fmt.Sprintf("api:%s:%s:%s:%d:%v", a.Type, a.Cluster, a.Authority, a.RefreshDelay, a.SetNodeOnFirstMessageOnly)
	}
	return "self"
}

// SourceFromProto converts a ConfigSource. Errors name the field path below the source.
func SourceFromProto(cs *corev3.ConfigSource) (Source, error) {
	out := Source{InitialFetchTimeout: DefaultInitialFetchTimeout}
	if cs == nil {
		return out, fmt.Errorf("config_source_specifier is not set; one of path, path_config_source, api_config_source, ads or self is required")
	}
	if err := apiVersion("resource_api_version", cs.GetResourceApiVersion()); err != nil {
		return out, err
	}
	if t := cs.GetInitialFetchTimeout(); t != nil {
		if err := t.CheckValid(); err != nil || t.AsDuration() < 0 {
			return out, fmt.Errorf("initial_fetch_timeout = %v; must be a duration >= 0", t)
		}
		out.InitialFetchTimeout = t.AsDuration()
	}
	switch s := cs.GetConfigSourceSpecifier().(type) {
	case *corev3.ConfigSource_Ads:
		out.ADS = true
	case *corev3.ConfigSource_Self:
		out.Self = true
	case *corev3.ConfigSource_Path:
		out.Path = s.Path
	case *corev3.ConfigSource_PathConfigSource:
		out.Path = s.PathConfigSource.GetPath()
		if wd := s.PathConfigSource.GetWatchedDirectory(); wd != nil {
			if wd.GetPath() == "" {
				return out, fmt.Errorf("path_config_source.watched_directory.path is empty; a directory path is required")
			}
			out.WatchedDirectory = wd.GetPath()
		}
	case *corev3.ConfigSource_ApiConfigSource:
		a, err := APISourceFromProto(s.ApiConfigSource)
		if err != nil {
			return out, fmt.Errorf("api_config_source.%w", err)
		}
		out.API = &a
	default:
		return out, fmt.Errorf("config_source_specifier is not set; one of path, path_config_source, api_config_source, ads or self is required")
	}
	if !out.ADS && !out.Self && out.API == nil && out.Path == "" {
		return out, fmt.Errorf("path_config_source.path is empty; a file path is required")
	}
	return out, nil
}

// APISourceFromProto converts an ApiConfigSource (an api_config_source or the bootstrap's
// ads_config). Errors name the field path below it.
func APISourceFromProto(a *corev3.ApiConfigSource) (APISource, error) {
	out := APISource{
		RefreshDelay:              a.GetRefreshDelay().AsDuration(),
		RequestTimeout:            DefaultRequestTimeout,
		SetNodeOnFirstMessageOnly: a.GetSetNodeOnFirstMessageOnly(),
	}
	if a == nil {
		return out, fmt.Errorf("api_type is not set")
	}
	if err := apiVersion("transport_api_version", a.GetTransportApiVersion()); err != nil {
		return out, err
	}
	if t := a.GetRequestTimeout(); t != nil {
		out.RequestTimeout = t.AsDuration()
	}
	if rl := a.GetRateLimitSettings(); rl != nil {
		r := &RateLimit{MaxTokens: DefaultRateLimitMaxTokens, FillRate: DefaultRateLimitFillRate}
		if rl.GetMaxTokens() != nil {
			r.MaxTokens = rl.GetMaxTokens().GetValue()
		}
		if rl.GetFillRate() != nil {
			r.FillRate = rl.GetFillRate().GetValue()
		}
		if r.FillRate <= 0 {
			return out, fmt.Errorf("rate_limit_settings.fill_rate = %v; must be > 0", r.FillRate)
		}
		out.RateLimit = r
	}
	switch a.GetApiType() {
	case corev3.ApiConfigSource_GRPC, corev3.ApiConfigSource_DELTA_GRPC:
		out.Type = GRPC
		if a.GetApiType() == corev3.ApiConfigSource_DELTA_GRPC {
			out.Type = DeltaGRPC
		}
		if len(a.GetClusterNames()) != 0 {
			return out, fmt.Errorf("cluster_names = %q; gRPC sources name their cluster in grpc_services", a.GetClusterNames())
		}
		if n := len(a.GetGrpcServices()); n != 1 {
			return out, fmt.Errorf("grpc_services has %d entries; a gRPC source needs exactly one", n)
		}
		g := a.GetGrpcServices()[0]
		if g.GetGoogleGrpc() != nil {
			return out, fmt.Errorf("grpc_services[0].google_grpc is not supported; use envoy_grpc with a bootstrap cluster")
		}
		out.Cluster = g.GetEnvoyGrpc().GetClusterName()
		out.Authority = g.GetEnvoyGrpc().GetAuthority()
		if out.Cluster == "" {
			return out, fmt.Errorf("grpc_services[0].envoy_grpc.cluster_name is empty; name a bootstrap cluster")
		}
	case corev3.ApiConfigSource_REST:
		out.Type = REST
		if len(a.GetGrpcServices()) != 0 {
			return out, fmt.Errorf("grpc_services has %d entries; a REST source names its cluster in cluster_names", len(a.GetGrpcServices()))
		}
		if n := len(a.GetClusterNames()); n != 1 {
			return out, fmt.Errorf("cluster_names has %d entries; a REST source needs exactly one", n)
		}
		out.Cluster = a.GetClusterNames()[0]
		if a.GetRefreshDelay() == nil || out.RefreshDelay <= 0 {
			return out, fmt.Errorf("refresh_delay = %v; a REST source needs a refresh_delay > 0", a.GetRefreshDelay().AsDuration())
		}
	default:
		return out, fmt.Errorf("api_type = %s; supported: GRPC, DELTA_GRPC, REST", a.GetApiType())
	}
	return out, nil
}

func apiVersion(field string, v corev3.ApiVersion) error {
	if v == corev3.ApiVersion_V2 {
		return fmt.Errorf("%s = V2; only V3 is supported", field)
	}
	return nil
}
