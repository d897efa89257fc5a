package dynamicforwardproxy

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"time"

	dfpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/dynamic_forward_proxy/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/internal/registry"
)

// Name is the filter's name in http_filters.
const Name = "envoy.filters.http.dynamic_forward_proxy"

// Register registers the filter and its per-route configuration.
func Register(b *registry.Builder) {
	registry.Add(b, filter.HTTPFilters, Name, &dfpv3.FilterConfig{}, filter.Extension{
		New:            New,
		PerRoute:       func(cfg *anypb.Any) (any, error) { return PerRouteFromAny(cfg) },
		PerRouteConfig: &dfpv3.PerRouteConfig{},
	})
}

// Filter is one configured dynamic_forward_proxy filter. Immutable.
type Filter struct {
	name   string // its http_filters name: the key of its per-route entries
	caches *cluster.Manager
	cache  *cluster.DNSCache // nil with sub_cluster_config
	// initTimeout is sub_cluster_config.cluster_init_timeout: how long a request waits for
	// its sub-cluster to become active.
	initTimeout time.Duration
}

// defaultClusterInitTimeout is cluster_init_timeout's default, as Envoy's.
const defaultClusterInitTimeout = 5 * time.Second

// New builds the filter from its typed_config.
func New(cfg *anypb.Any, ctx *filter.Context) (filter.Filter, error) {
	var pb dfpv3.FilterConfig
	if cfg != nil {
		if err := cfg.UnmarshalTo(&pb); err != nil {
			return nil, fmt.Errorf("%s: typed_config: %w", Name, err)
		}
	}
	if err := pb.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	switch {
	case pb.GetSaveUpstreamAddress():
		return nil, fmt.Errorf("%s: save_upstream_address: not implemented by Legate (it keeps no filter state)", Name)
	case pb.GetAllowDynamicHostFromFilterState():
		return nil, fmt.Errorf("%s: allow_dynamic_host_from_filter_state: not implemented by Legate", Name)
	}
	initTimeout := defaultClusterInitTimeout
	var dc config.DNSCacheConfig
	sc := pb.GetSubClusterConfig()
	if sc != nil {
		if t := sc.GetClusterInitTimeout(); t != nil {
			initTimeout = t.AsDuration()
		}
	} else {
		var err error
		if dc, err = config.DNSCacheFromProto("dns_cache_config", pb.GetDnsCacheConfig()); err != nil {
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
	}
	if ctx == nil || ctx.Clusters == nil {
		return nil, fmt.Errorf("%s: needs the cluster manager's DNS caches", Name)
	}
	f := &Filter{name: ctx.Name, caches: ctx.Clusters, initTimeout: initTimeout}
	if sc == nil {
		cache, err := ctx.Clusters.DNSCache(dc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
		f.cache = cache
	}
	return f, nil
}

// PerRoute is a PerRouteConfig: the host the request is sent to and resolved by.
type PerRoute struct {
	// Literal is host_rewrite_literal; Header (canonical) is host_rewrite_header.
	Literal, Header string
}

// PerRouteFromAny converts a typed_per_filter_config entry.
func PerRouteFromAny(cfg *anypb.Any) (*PerRoute, error) {
	var pb dfpv3.PerRouteConfig
	if err := cfg.UnmarshalTo(&pb); err != nil {
		return nil, fmt.Errorf("%s: typed_per_filter_config: %w", Name, err)
	}
	if err := pb.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: typed_per_filter_config: %w", Name, err)
	}
	out := &PerRoute{Literal: pb.GetHostRewriteLiteral()}
	if h := pb.GetHostRewriteHeader(); h != "" {
		out.Header = textproto.CanonicalMIMEHeaderKey(h)
	}
	return out, nil
}

// Local replies, as Envoy's filter sends them.
var (
	replyResolutionFailed = &filter.Reply{Status: http.StatusServiceUnavailable, Body: "DNS resolution failure",
		Flags: accesslog.DNSResolutionFailed, Details: "dns_resolution_failure"}
	replyCacheOverflow = &filter.Reply{Status: http.StatusServiceUnavailable, Body: "DNS cache overflow",
		Details: "dns_cache_overflow"}
	replyPendingOverflow = &filter.Reply{Status: http.StatusServiceUnavailable, Body: "Dynamic forward proxy pending request overflow",
		Details: "dynamic_forward_proxy_pending_request_overflow"}
	replySubClusterOverflow = &filter.Reply{Status: http.StatusServiceUnavailable, Body: "Sub cluster overflow",
		Details: "sub_cluster_overflow"}
	replySubClusterTimeout = &filter.Reply{Status: http.StatusServiceUnavailable, Body: "Sub cluster warming timeout",
		Details: "sub_cluster_warming_timeout"}
)

// OnRequest rewrites the host of a request to a dynamic forward proxy cluster as its route
// says and holds the request until its cache has resolved the host.
func (f *Filter) OnRequest(x *filter.Exchange) *filter.Reply {
	if x.Downstream == nil {
		return nil
	}
	m := x.Downstream.Route()
	if m == nil || m.Cluster == "" {
		return nil
	}
	c := f.caches.Get(m.Cluster)
	if c == nil || !c.IsForwardProxy() || (!c.HasSubClusters() && c.ForwardProxyDNSCache() != f.cache) {
		return nil
	}
	if pc, ok := x.PerFilterConfig(f.name); ok {
		if pr, ok := pc.Config.(*PerRoute); ok {
			f.rewrite(x, pr)
		}
	}
	key := c.ForwardProxyKey(x.Request.Authority)
	if key == "" {
		return nil
	}
	if c.HasSubClusters() {
		return f.loadSubCluster(x, c, key)
	}
	_, ready, release, err := f.cache.Load(key)
	switch {
	case errors.Is(err, cluster.ErrDNSCacheOverflow):
		return replyCacheOverflow
	case errors.Is(err, cluster.ErrDNSPendingOverflow):
		return replyPendingOverflow
	case err != nil:
		return replyResolutionFailed
	case ready == nil:
		return nil
	}
	defer release()
	// The resolution ends within dns_query_timeout; the bound only guards against a stuck one.
	if x.Downstream.Pause(ready, 2*f.cache.Config().QueryTimeout) {
		return nil
	}
	if addrs, err := f.cache.Addresses(key); err != nil || len(addrs) == 0 {
		return replyResolutionFailed
	}
	return nil
}

// loadSubCluster holds the request until the sub-cluster of key is active, making it first
// when needed, as Envoy's filter does for a cluster with sub_clusters_config (whatever the
// filter's own configuration).
func (f *Filter) loadSubCluster(x *filter.Exchange, c *cluster.Cluster, key string) *filter.Reply {
	ready, err := c.LoadSubCluster(key)
	switch {
	case errors.Is(err, cluster.ErrSubClusterOverflow):
		return replySubClusterOverflow
	case err != nil:
		// A sub-cluster Legate cannot build (a name too long for --max-obj-name-len) never
		// warms: Envoy answers when cluster_init_timeout ends, Legate at once.
		return replySubClusterTimeout
	}
	if x.Downstream.Pause(ready, f.initTimeout) {
		return nil
	}
	select {
	case <-ready:
		return nil
	default:
		return replySubClusterTimeout
	}
}

// rewrite applies a route's host rewrite to the request's authority.
func (f *Filter) rewrite(x *filter.Exchange, pr *PerRoute) {
	switch {
	case pr.Literal != "":
		x.Request.Authority = pr.Literal
	case pr.Header != "":
		if v := x.Request.Header.Get(pr.Header); v != "" {
			x.Request.Authority = v
		}
	}
}

// OnResponse does nothing.
func (f *Filter) OnResponse(*filter.Exchange, http.Header) {}
