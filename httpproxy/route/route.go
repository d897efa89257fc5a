package route

import (
	"net/http"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/lb"
)

// Table is a compiled RouteConfiguration. It is immutable and safe for concurrent use.
type Table struct {
	// Name is RouteConfiguration.name.
	Name string

	exact      map[string]*VirtualHost
	suffixes   []wildcardLevel // longest first
	prefixes   []wildcardLevel // longest first
	catchAll   *VirtualHost    // the "*" domain
	ignorePort bool
	hosts      []*VirtualHost // in configuration order
	// disablesFilters: some typed_per_filter_config entry has disabled set, so the connection
	// manager must look the route up before running its filters.
	disablesFilters bool
	// traces: some route has a decorator or a tracing block, which the connection manager
	// reads when it starts the request's span.
	traces bool
}

// DisablesFilters reports whether some typed_per_filter_config entry of the table disables its
// filter (FilterConfig.disabled).
func (t *Table) DisablesFilters() bool { return t != nil && t.disablesFilters }

// Traces reports whether some route of the table has a decorator or a tracing block, so that
// a traced request's route must be known when its span starts.
func (t *Table) Traces() bool { return t != nil && t.traces }

// wildcardLevel holds the wildcard domains of one length (without the '*').
type wildcardLevel struct {
	n     int
	hosts map[string]*VirtualHost
}

// VirtualHosts returns the virtual hosts in configuration order. The slice must not be
// modified.
func (t *Table) VirtualHosts() []*VirtualHost { return t.hosts }

// TLSRequirement is VirtualHost.require_tls.
type TLSRequirement uint8

// The TLS requirements.
const (
	TLSNone TLSRequirement = iota
	TLSExternalOnly
	TLSAll
)

// VirtualHost is a compiled VirtualHost. Immutable.
type VirtualHost struct {
	Name       string
	Domains    []string
	Routes     []*Route
	RequireTLS TLSRequirement
	// RetryPolicy is the virtual host's default, used by routes without their own.
	RetryPolicy *RetryPolicy
	// RateLimits are the virtual host's rate_limits, for the rate limit filter.
	RateLimits []RateLimit

	requestOps, responseOps *HeaderOps
	tlsRedirect             *Match
	// The route configuration's header mutations and most_specific_header_mutations_wins.
	globalRequestOps, globalResponseOps *HeaderOps
	mostSpecificWins                    bool
	// bySegment maps a path's first segment to its candidate routes; generic are the
	// candidates of other paths. See indexRoutes.
	bySegment map[string][]*Route
	generic   []*Route
	// filters and configFilters are the typed_per_filter_config of the virtual host and of
	// its route configuration.
	filters, configFilters perFilter
	cors                   any // cors (deprecated) as Options.PerFilterConfig made it
	// matcher is the virtual host's matcher (the unified matcher API), which replaces its
	// routes; nil for a host with routes.
	matcher *routeMatcher
}

func (vh *VirtualHost) globalOps(request bool) *HeaderOps {
	if request {
		return vh.globalRequestOps
	}
	return vh.globalResponseOps
}

// ActionKind tells which of a route's actions applies.
type ActionKind uint8

// The route actions.
const (
	ActionRoute ActionKind = iota
	ActionRedirect
	ActionDirectResponse
	ActionNonForwarding
)

// Priority is RouteAction.priority, selecting circuit-breaker thresholds.
type Priority uint8

// The routing priorities.
const (
	PriorityDefault Priority = iota
	PriorityHigh
)

// Route is a compiled Route: its match and its action. Immutable.
type Route struct {
	// Name is Route.name (%ROUTE_NAME%).
	Name string
	// Metadata is Route.metadata's filter_metadata by namespace (the Lua filter's
	// handle:metadata() reads its own); read only.
	Metadata map[string]*structpb.Struct
	// Kind is the action: route, redirect, direct_response or non_forwarding_action.
	Kind ActionKind

	// Cluster is route.cluster; ClusterHeader is route.cluster_header (canonical form);
	// WeightedClusters is route.weighted_clusters. Exactly one is set for ActionRoute.
	Cluster          string
	ClusterHeader    string
	WeightedClusters *WeightedClusters

	// PrefixRewrite is route.prefix_rewrite; regexRewrite is route.regex_rewrite.
	PrefixRewrite string
	regexRewrite  *rewrite
	// HostRewriteLiteral is route.host_rewrite_literal; HostRewriteHeader (canonical form)
	// is route.host_rewrite_header; AutoHostRewrite is route.auto_host_rewrite.
	HostRewriteLiteral string
	HostRewriteHeader  string
	AutoHostRewrite    bool

	// Timeout is route.timeout: 15 s by default, 0 disables it. TimeoutMillis is its
	// milliseconds in decimal (x-envoy-expected-rq-timeout-ms), made when the route is
	// compiled; "" in a Route built otherwise.
	Timeout       time.Duration
	TimeoutMillis string
	// IdleTimeout is route.idle_timeout when IdleTimeoutSet; 0 disables it. Unset means the
	// connection manager's stream_idle_timeout.
	IdleTimeout    time.Duration
	IdleTimeoutSet bool
	// RetryPolicy is the route's retry policy, or the virtual host's; nil means no retries.
	RetryPolicy *RetryPolicy
	// HashPolicy is route.hash_policy in order.
	HashPolicy []HashPolicy
	// MetadataMatch is route.metadata_match under envoy.lb, sorted by name.
	MetadataMatch []lb.Criterion
	// Priority is route.priority.
	Priority Priority
	// Redirect is set for ActionRedirect.
	Redirect *Redirect
	// DirectResponse is set for ActionDirectResponse.
	DirectResponse *DirectResponse
	// Upgrades is route.upgrade_configs in order (see UpgradeEnabled).
	Upgrades []Upgrade
	// Connect is the CONNECT upgrade's connect_config; nil forwards CONNECT requests
	// upstream as requests.
	Connect *ConnectConfig
	// Mirrors are route.request_mirror_policies in order.
	Mirrors []Mirror
	// Decorator is route.decorator; nil for none.
	Decorator *Decorator
	// Tracing is route.tracing; nil for none (the connection manager's sampling applies).
	Tracing *Tracing
	// GRPCTimeout is how a gRPC request's grpc-timeout sets its timeout; nil: the route's.
	GRPCTimeout *GRPCTimeout
	// ClusterNotFoundCode is the status of a request whose cluster does not exist
	// (cluster_not_found_response_code: 503, 404 or 500).
	ClusterNotFoundCode int
	// AttemptCount and AttemptCountInResponse are the virtual host's
	// include_request_attempt_count and include_attempt_count_in_response: x-envoy-attempt-count
	// on each upstream request, and on the response.
	AttemptCount, AttemptCountInResponse bool
	// RateLimits are route.rate_limits, for the rate limit filter; IncludeVhRateLimits is
	// route.include_vh_rate_limits (the virtual host's are read as well).
	RateLimits          []RateLimit
	IncludeVhRateLimits bool

	match       routeMatch
	vhost       *VirtualHost
	single      *Match // the match for a fixed cluster, redirect or direct response
	template    *Match // copied for cluster_header routes
	requestOps  *HeaderOps
	responseOps *HeaderOps
	filters     perFilter // typed_per_filter_config
	cors        any       // route.cors (deprecated) as Options.PerFilterConfig made it
}

// WeightedClusters is RouteAction.weighted_clusters.
type WeightedClusters struct {
	Clusters []*WeightedCluster
	// Total is the sum of the weights.
	Total uint64
	// HeaderName (canonical form) is random_value_specifier.header_name: the header whose
	// integer value replaces the request's random value.
	HeaderName string
}

// WeightedCluster is one WeightedCluster.ClusterWeight.
type WeightedCluster struct {
	Name string
	// ClusterHeader (canonical form) names the cluster through a request header instead.
	ClusterHeader string
	Weight        uint32
	// MetadataMatch is the route's metadata_match merged with this cluster's (this one wins).
	MetadataMatch []lb.Criterion
	// HostRewriteLiteral is the cluster's host_rewrite_literal.
	HostRewriteLiteral string

	match   *Match
	filters perFilter // typed_per_filter_config
}

// DirectResponse is Route.direct_response.
type DirectResponse struct {
	Status int
	Body   []byte
}

// Match is the result of routing a request. Matches for fixed clusters, weighted clusters,
// redirects and direct responses are precomputed and shared; treat a Match as read-only.
type Match struct {
	VirtualHost *VirtualHost
	Route       *Route
	// Cluster is the chosen upstream cluster ("" when a cluster header is absent, or for
	// redirects and direct responses).
	Cluster string
	// Weighted is the chosen weighted cluster, if the route has weighted clusters.
	Weighted *WeightedCluster
	// MetadataMatch are the subset criteria for the balancer (route and weighted cluster).
	MetadataMatch []lb.Criterion
	// HostRewrite is the literal host rewrite that applies (weighted cluster, then route).
	HostRewrite string

	requestOps, responseOps []*HeaderOps
	fixed                   bool // see Fixed
}

// Fixed reports whether m is the route table's own Match, shared by the requests it matches:
// its Cluster is configuration, which does not change (a cluster_header route's Match is a
// copy made for a request, its Cluster a view of the request's header).
func (m *Match) Fixed() bool { return m.fixed }

// Route finds the route for req: the virtual host by :authority, then the first matching
// route. It returns nil when no virtual host or route matches (Envoy's 404 NR). It allocates
// only for cluster_header routes.
func (t *Table) Route(req *Request) *Match {
	vh := t.findVirtualHost(req.Authority)
	if vh == nil {
		return nil
	}
	if vh.tlsRedirect != nil && req.Scheme != "https" &&
		(vh.RequireTLS == TLSAll || !isInternal(req)) {
		return vh.tlsRedirect
	}
	p := pathOnly(req.Path)
	if vh.matcher != nil {
		return vh.matchRoutes(req, p)
	}
	for _, r := range vh.candidates(p) {
		if r.match.matches(req, p) {
			return r.resolve(req)
		}
	}
	return nil
}

func isInternal(req *Request) bool {
	vs := req.Headers()["X-Envoy-Internal"]
	return len(vs) > 0 && vs[0] == "true"
}

// resolve picks the cluster of a matched route.
func (r *Route) resolve(req *Request) *Match {
	if r.single != nil {
		return r.single
	}
	if r.ClusterHeader != "" {
		m := *r.template // not fixed
		if vs := req.Headers()[r.ClusterHeader]; len(vs) > 0 {
			m.Cluster = vs[0]
		}
		return &m
	}
	wc := r.WeightedClusters
	random := req.random()
	if wc.HeaderName != "" {
		if v, ok := parseUint(req.Headers()[wc.HeaderName]); ok {
			random = v
		}
	}
	c := wc.pick(random)
	if c.ClusterHeader != "" {
		m := *c.match
		m.fixed = false
		if vs := req.Headers()[c.ClusterHeader]; len(vs) > 0 {
			m.Cluster = vs[0]
		}
		return &m
	}
	return c.match
}

// pick implements Envoy's weighted cluster selection: random % total, walking the clusters'
// cumulative weights.
func (wc *WeightedClusters) pick(random uint64) *WeightedCluster {
	selected := random % wc.Total
	var end uint64
	for _, c := range wc.Clusters {
		end += uint64(c.Weight)
		if selected < end {
			return c
		}
	}
	return wc.Clusters[len(wc.Clusters)-1]
}

// Pick returns the weighted cluster chosen by random, as Route does.
func (wc *WeightedClusters) Pick(random uint64) *WeightedCluster { return wc.pick(random) }

func parseUint(vs []string) (uint64, bool) {
	if len(vs) == 0 || vs[0] == "" || len(vs[0]) > 20 {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(vs[0]); i++ {
		c := vs[0][i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (^uint64(0)-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// FinalizeRequestHeaders applies the request header mutations in Envoy's order: weighted
// cluster, route, virtual host, route configuration (with most_specific_header_mutations_wins
// the order is reversed, so the most specific level is applied last). e feeds header value
// formatters such as %DOWNSTREAM_REMOTE_ADDRESS%.
func (m *Match) FinalizeRequestHeaders(h http.Header, e *accesslog.Entry) {
	for _, ops := range m.requestOps {
		ops.apply(h, e)
	}
}

// HasRequestHeaderOps reports whether the match has request header mutations: without any,
// FinalizeRequestHeaders does nothing and the caller need not fill the access-log entry their
// formatters read.
func (m *Match) HasRequestHeaderOps() bool { return len(m.requestOps) > 0 }

// HasResponseHeaderOps is HasRequestHeaderOps for the response's mutations.
func (m *Match) HasResponseHeaderOps() bool { return len(m.responseOps) > 0 }

// FinalizeResponseHeaders applies the response header mutations, in the same order as
// FinalizeRequestHeaders.
func (m *Match) FinalizeResponseHeaders(h http.Header, e *accesslog.Entry) {
	for _, ops := range m.responseOps {
		ops.apply(h, e)
	}
}

// RewritePath returns the :path to send upstream after prefix_rewrite or regex_rewrite, and
// whether it changed. path is the request's :path; the query is kept.
func (r *Route) RewritePath(path string) (string, bool) {
	if r.PrefixRewrite == "" && r.regexRewrite == nil {
		return path, false
	}
	p := pathOnly(path)
	query := path[len(p):]
	if r.regexRewrite != nil {
		return r.regexRewrite.Apply(p) + query, true
	}
	n := r.match.rewriteLen(p)
	return r.PrefixRewrite + p[n:] + query, true
}

// hostWithoutPort strips a port from a host (keeping IPv6 brackets), as Envoy's getPortStart.
func portStart(host string) int {
	i := strings.LastIndexByte(host, ':')
	if i < 0 {
		return -1
	}
	if v6 := strings.LastIndexByte(host, ']'); v6 >= 0 && v6 > i {
		return -1
	}
	return i
}
