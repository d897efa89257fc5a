package route

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/internal/fraction"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/lb"
)

// Options are Compile's inputs from outside the route configuration. The zero value is usable.
type Options struct {
	// StripAnyHostPort ignores the port in host matching, as the connection manager's
	// strip_any_host_port does (route configs can ask for it with ignore_port_in_host_matching).
	StripAnyHostPort bool
	// Hostname is what %HOSTNAME% prints in header values; empty means os.Hostname().
	Hostname string
	// ClusterExists checks cluster names when validate_clusters is on (its default is
	// ValidateClusters). Nil disables the check.
	ClusterExists func(name string) bool
	// ValidateClusters is the default of RouteConfiguration.validate_clusters: Envoy checks
	// static route configurations and not RDS ones.
	ValidateClusters bool
	// FeatureEnabled evaluates runtime_fraction through the runtime (key, default fraction,
	// random value). Nil uses the default fraction: random % denominator < numerator.
	FeatureEnabled func(key string, numerator, denominator, random uint64) bool
	// ReadFile reads direct_response bodies given by filename; nil means os.ReadFile.
	ReadFile func(name string) ([]byte, error)
	// PerFilterConfig makes the configuration of a typed_per_filter_config entry (route
	// configuration, virtual host, route, weighted cluster): name is the entry's key (a
	// filter's name in http_filters), cfg the per-route typed config and optional
	// FilterConfig.is_optional. An error rejects the route configuration; a nil result with
	// no error keeps the entry without a configuration (an optional filter Legate lacks).
	// Nil keeps each typed config unchecked, as its *anypb.Any.
	PerFilterConfig func(name string, cfg *anypb.Any, optional bool) (any, error)
	// Extensions are the retry host predicates' factories (RetryHostPredicates); nil means
	// this package's.
	Extensions *registry.Registry
}

// defaultTimeout is RouteAction.timeout's default.
const defaultTimeout = 15 * time.Second

// defaultMaxDirectResponseBody is max_direct_response_body_size_bytes' default.
const defaultMaxDirectResponseBody = 4096

// compiler carries the state of one Compile.
type compiler struct {
	opts         *Options
	validate     bool
	maxBody      uint32
	mostSpecific bool
	globalReq    *HeaderOps
	globalResp   *HeaderOps
	filters      perFilter // the route configuration's typed_per_filter_config
	disables     bool      // some typed_per_filter_config entry disables its filter
	traces       bool      // some route has a decorator or a tracing block
	// attemptCount and attemptCountInResponse are the current virtual host's
	// include_request_attempt_count and include_attempt_count_in_response.
	attemptCount, attemptCountInResponse bool
}

// Compile converts a RouteConfiguration into a Table. Errors name the field path, the value
// and the rule: `virtual_hosts[1].routes[0].match.safe_regex.regex = "(": invalid RE2: …`.
func Compile(rc *routev3.RouteConfiguration, opts Options) (*Table, error) {
	if rc == nil {
		return nil, errors.New("route configuration is missing")
	}
	if err := audit(rc.ProtoReflect(), ""); err != nil {
		return nil, err
	}
	if rc.GetVhds() != nil {
		// The xDS client merges VHDS into RDS route configurations before they get here; a
		// static route_config has no subscription to take virtual hosts from (released Envoy
		// ignores the field there), so a silent no-op would hide a broken configuration.
		return nil, errors.New("vhds: virtual host discovery needs a route configuration delivered by RDS (rds or scoped_routes); a static route_config cannot use it")
	}
	if len(rc.GetClusterSpecifierPlugins()) > 0 {
		return nil, errors.New("cluster_specifier_plugins: cluster specifier plugins are not supported")
	}
	c := &compiler{
		opts:         &opts,
		validate:     opts.ValidateClusters,
		maxBody:      defaultMaxDirectResponseBody,
		mostSpecific: rc.GetMostSpecificHeaderMutationsWins(),
	}
	if v := rc.GetValidateClusters(); v != nil {
		c.validate = v.GetValue()
	}
	if c.opts.ClusterExists == nil {
		c.validate = false
	}
	if c.opts.Extensions == nil {
		var err error
		if c.opts.Extensions, err = builtin(); err != nil {
			return nil, err
		}
	}
	if v := rc.GetMaxDirectResponseBodySizeBytes(); v != nil {
		c.maxBody = v.GetValue()
	}
	var err error
	if c.globalReq, err = compileHeaderOps(rc.GetRequestHeadersToAdd(), rc.GetRequestHeadersToRemove(), "", "request_headers", c.opts); err != nil {
		return nil, err
	}
	if c.globalResp, err = compileHeaderOps(rc.GetResponseHeadersToAdd(), rc.GetResponseHeadersToRemove(), "", "response_headers", c.opts); err != nil {
		return nil, err
	}
	if c.filters, err = compilePerFilter(rc.GetTypedPerFilterConfig(), "", c.opts); err != nil {
		return nil, err
	}
	c.noteDisabled(c.filters)
	t := &Table{
		Name:       rc.GetName(),
		exact:      map[string]*VirtualHost{},
		ignorePort: rc.GetIgnorePortInHostMatching() || opts.StripAnyHostPort,
	}
	suffixes := map[int]map[string]*VirtualHost{}
	prefixes := map[int]map[string]*VirtualHost{}
	for i, vhp := range rc.GetVirtualHosts() {
		path := fmt.Sprintf("virtual_hosts[%d]", i)
		vh, err := c.virtualHost(vhp, path)
		if err != nil {
			return nil, err
		}
		t.hosts = append(t.hosts, vh)
		if len(vhp.GetDomains()) == 0 {
			return nil, fmt.Errorf("%s.domains: at least one domain is required", path)
		}
		for j, d := range vhp.GetDomains() {
			dpath := fmt.Sprintf("%s.domains[%d] = %q", path, j, d)
			d = strings.ToLower(d)
			var dup bool
			switch {
			case d == "":
				return nil, fmt.Errorf("%s: must not be empty", dpath)
			case d == "*":
				if t.catchAll != nil {
					return nil, fmt.Errorf("%s: only one virtual host may have the domain \"*\"", dpath)
				}
				t.catchAll = vh
			case d[0] == '*':
				dup = addWildcard(suffixes, d[1:], vh)
			case d[len(d)-1] == '*':
				dup = addWildcard(prefixes, d[:len(d)-1], vh)
			default:
				_, dup = t.exact[d]
				t.exact[d] = vh
			}
			if dup {
				return nil, fmt.Errorf("%s: domains must be unique across virtual hosts", dpath)
			}
		}
	}
	t.suffixes = levels(suffixes)
	t.prefixes = levels(prefixes)
	t.disablesFilters = c.disables
	t.traces = c.traces
	return t, nil
}

func addWildcard(m map[int]map[string]*VirtualHost, key string, vh *VirtualHost) (dup bool) {
	level := m[len(key)]
	if level == nil {
		level = map[string]*VirtualHost{}
		m[len(key)] = level
	}
	_, dup = level[key]
	level[key] = vh
	return dup
}

func levels(m map[int]map[string]*VirtualHost) []wildcardLevel {
	out := make([]wildcardLevel, 0, len(m))
	for n, hosts := range m {
		out = append(out, wildcardLevel{n: n, hosts: hosts})
	}
	slices.SortFunc(out, func(a, b wildcardLevel) int { return cmp.Compare(b.n, a.n) })
	return out
}

func (c *compiler) virtualHost(p *routev3.VirtualHost, path string) (*VirtualHost, error) {
	c.attemptCount, c.attemptCountInResponse = p.GetIncludeRequestAttemptCount(), p.GetIncludeAttemptCountInResponse()
	vh := &VirtualHost{
		Name:       p.GetName(),
		Domains:    p.GetDomains(),
		RequireTLS: TLSRequirement(p.GetRequireTls()),

		globalRequestOps:  c.globalReq,
		globalResponseOps: c.globalResp,
		mostSpecificWins:  c.mostSpecific,
		configFilters:     c.filters,
	}
	var err error
	if vh.filters, err = compilePerFilter(p.GetTypedPerFilterConfig(), path+".", c.opts); err != nil {
		return nil, err
	}
	c.noteDisabled(vh.filters)
	if vh.cors, err = compileLegacyCors(p.GetCors(), path+".cors", c.opts); err != nil {
		return nil, err
	}
	if vh.requestOps, err = compileHeaderOps(p.GetRequestHeadersToAdd(), p.GetRequestHeadersToRemove(), path+".", "request_headers", c.opts); err != nil {
		return nil, err
	}
	if vh.responseOps, err = compileHeaderOps(p.GetResponseHeadersToAdd(), p.GetResponseHeadersToRemove(), path+".", "response_headers", c.opts); err != nil {
		return nil, err
	}
	if p.GetRetryPolicy() != nil {
		if vh.RetryPolicy, err = c.retryPolicy(p.GetRetryPolicy(), path+".retry_policy"); err != nil {
			return nil, err
		}
	}
	if vh.RateLimits, err = CompileRateLimits(p.GetRateLimits(), path+".rate_limits"); err != nil {
		return nil, err
	}
	if err := checkHedge(p.GetHedgePolicy(), path+".hedge_policy"); err != nil {
		return nil, err
	}
	if vh.RequireTLS != TLSNone {
		r := &Route{Kind: ActionRedirect, vhost: vh, Redirect: &Redirect{Scheme: "https", ResponseCode: 301}}
		vh.tlsRedirect = &Match{VirtualHost: vh, Route: r}
		r.single = vh.tlsRedirect
	}
	for i, rp := range p.GetRoutes() {
		r, err := c.route(rp, vh, fmt.Sprintf("%s.routes[%d]", path, i))
		if err != nil {
			return nil, err
		}
		vh.Routes = append(vh.Routes, r)
	}
	if p.GetMatcher() != nil {
		if vh.matcher, err = c.compileMatcher(p, vh, path); err != nil {
			return nil, err
		}
	}
	vh.indexRoutes()
	return vh, nil
}

func (c *compiler) route(p *routev3.Route, vh *VirtualHost, path string) (*Route, error) {
	r := &Route{Name: p.GetName(), vhost: vh, Timeout: defaultTimeout, Metadata: p.GetMetadata().GetFilterMetadata(),
		ClusterNotFoundCode: http.StatusServiceUnavailable, AttemptCount: c.attemptCount, AttemptCountInResponse: c.attemptCountInResponse}
	var err error
	if r.filters, err = compilePerFilter(p.GetTypedPerFilterConfig(), path+".", c.opts); err != nil {
		return nil, err
	}
	c.noteDisabled(r.filters)
	if r.match, err = c.routeMatch(p.GetMatch(), path+".match"); err != nil {
		return nil, err
	}
	if r.requestOps, err = compileHeaderOps(p.GetRequestHeadersToAdd(), p.GetRequestHeadersToRemove(), path+".", "request_headers", c.opts); err != nil {
		return nil, err
	}
	if r.responseOps, err = compileHeaderOps(p.GetResponseHeadersToAdd(), p.GetResponseHeadersToRemove(), path+".", "response_headers", c.opts); err != nil {
		return nil, err
	}
	switch a := p.GetAction().(type) {
	case *routev3.Route_Route:
		r.Kind = ActionRoute
		if err := c.routeAction(r, a.Route, path+".route"); err != nil {
			return nil, err
		}
		if r.cors, err = compileLegacyCors(a.Route.GetCors(), path+".route.cors", c.opts); err != nil {
			return nil, err
		}
	case *routev3.Route_Redirect:
		r.Kind = ActionRedirect
		if r.Redirect, err = compileRedirect(a.Redirect, path+".redirect"); err != nil {
			return nil, err
		}
	case *routev3.Route_DirectResponse:
		r.Kind = ActionDirectResponse
		if r.DirectResponse, err = c.directResponse(a.DirectResponse, path+".direct_response"); err != nil {
			return nil, err
		}
	case *routev3.Route_NonForwardingAction:
		r.Kind = ActionNonForwarding
	case *routev3.Route_FilterAction:
		return nil, fmt.Errorf("%s.filter_action: filter actions are not supported", path)
	default:
		return nil, fmt.Errorf("%s: one of route, redirect, direct_response or non_forwarding_action is required", path)
	}
	if r.RetryPolicy == nil && r.Kind == ActionRoute {
		r.RetryPolicy = vh.RetryPolicy
	}
	r.Decorator = compileDecorator(p.GetDecorator())
	if r.Tracing, err = compileTracing(p.GetTracing(), path+".tracing"); err != nil {
		return nil, err
	}
	c.traces = c.traces || r.Decorator != nil || r.Tracing != nil
	precompute(r)
	r.TimeoutMillis = strconv.FormatInt(r.Timeout.Milliseconds(), 10)
	return r, nil
}

func (c *compiler) routeMatch(p *routev3.RouteMatch, path string) (routeMatch, error) {
	m := routeMatch{caseSensitive: true, featureOn: c.opts.FeatureEnabled}
	if p == nil {
		return m, fmt.Errorf("%s: match is required", path)
	}
	if v := p.GetCaseSensitive(); v != nil {
		m.caseSensitive = v.GetValue()
	}
	var err error
	switch s := p.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		m.kind, m.value = pathPrefix, s.Prefix
	case *routev3.RouteMatch_Path:
		m.kind, m.value = pathExact, s.Path
	case *routev3.RouteMatch_SafeRegex:
		m.kind = pathRegex
		if m.re, err = compileRegex(s.SafeRegex, path+".safe_regex"); err != nil {
			return m, err
		}
	case *routev3.RouteMatch_PathSeparatedPrefix:
		m.kind, m.value = pathSeparatedPrefix, s.PathSeparatedPrefix
		if v := s.PathSeparatedPrefix; v == "" || v[0] != '/' || strings.ContainsAny(v, "?#") || strings.HasSuffix(v, "/") {
			return m, fmt.Errorf("%s.path_separated_prefix = %q: must start with '/', not end with '/' and contain no '?' or '#'", path, v)
		}
	case *routev3.RouteMatch_ConnectMatcher_:
		m.kind = pathConnect
	case *routev3.RouteMatch_PathMatchPolicy:
		return m, fmt.Errorf("%s.path_match_policy: path match policies are not supported", path)
	default:
		return m, fmt.Errorf("%s: one of prefix, path, safe_regex, path_separated_prefix or connect_matcher is required", path)
	}
	if !m.caseSensitive {
		m.value = strings.ToLower(m.value)
	}
	switch {
	case p.GetTlsContext() != nil:
		return m, fmt.Errorf("%s.tls_context: TLS context matches are not supported", path)
	case len(p.GetDynamicMetadata()) > 0:
		return m, fmt.Errorf("%s.dynamic_metadata: dynamic metadata matches are not supported", path)
	case len(p.GetFilterState()) > 0:
		return m, fmt.Errorf("%s.filter_state: filter state matches are not supported", path)
	case len(p.GetCookies()) > 0:
		return m, fmt.Errorf("%s.cookies: cookie matches are not supported", path)
	}
	m.grpc = p.GetGrpc() != nil
	if rf := p.GetRuntimeFraction(); rf != nil {
		d, err := denominator(rf.GetDefaultValue().GetDenominator(), path+".runtime_fraction.default_value.denominator")
		if err != nil {
			return m, err
		}
		m.fraction = &runtimeFraction{key: rf.GetRuntimeKey(), numerator: uint64(rf.GetDefaultValue().GetNumerator()), denominator: d}
	}
	if m.headers, err = compileEach(p.GetHeaders(), path+".headers", compileHeaderMatcher); err != nil {
		return m, err
	}
	m.query, err = compileEach(p.GetQueryParameters(), path+".query_parameters", compileQueryMatcher)
	return m, err
}

func denominator(d typev3.FractionalPercent_DenominatorType, path string) (uint64, error) {
	if n, ok := fraction.Denominator(d); ok {
		return n, nil
	}
	return 0, fmt.Errorf("%s = %d: must be HUNDRED, TEN_THOUSAND or MILLION", path, d)
}

func (c *compiler) checkCluster(name, path string) error {
	if c.validate && !c.opts.ClusterExists(name) {
		return fmt.Errorf("%s = %q: unknown cluster", path, name)
	}
	return nil
}

func (c *compiler) routeAction(r *Route, a *routev3.RouteAction, path string) error {
	var err error
	switch s := a.GetClusterSpecifier().(type) {
	case *routev3.RouteAction_Cluster:
		if s.Cluster == "" {
			return fmt.Errorf("%s.cluster = \"\": must not be empty", path)
		}
		r.Cluster = s.Cluster
		if err := c.checkCluster(s.Cluster, path+".cluster"); err != nil {
			return err
		}
	case *routev3.RouteAction_ClusterHeader:
		if s.ClusterHeader == "" {
			return fmt.Errorf("%s.cluster_header = \"\": must not be empty", path)
		}
		r.ClusterHeader = textproto.CanonicalMIMEHeaderKey(s.ClusterHeader)
	case *routev3.RouteAction_WeightedClusters:
		// Weighted clusters need the route's metadata match first; done below.
	case *routev3.RouteAction_ClusterSpecifierPlugin, *routev3.RouteAction_InlineClusterSpecifierPlugin:
		return fmt.Errorf("%s: cluster specifier plugins are not supported", path)
	default:
		return fmt.Errorf("%s: one of cluster, cluster_header or weighted_clusters is required", path)
	}
	if r.MetadataMatch, err = metadataCriteria(a.GetMetadataMatch(), nil, path+".metadata_match"); err != nil {
		return err
	}
	if r.RateLimits, err = CompileRateLimits(a.GetRateLimits(), path+".rate_limits"); err != nil {
		return err
	}
	r.IncludeVhRateLimits = a.GetIncludeVhRateLimits().GetValue()
	if r.GRPCTimeout, err = compileGRPCTimeout(a, path); err != nil {
		return err
	}
	switch a.GetClusterNotFoundResponseCode() {
	case routev3.RouteAction_NOT_FOUND:
		r.ClusterNotFoundCode = http.StatusNotFound
	case routev3.RouteAction_INTERNAL_SERVER_ERROR:
		r.ClusterNotFoundCode = http.StatusInternalServerError
	}
	if err := checkHedge(a.GetHedgePolicy(), path+".hedge_policy"); err != nil {
		return err
	}
	if wc := a.GetWeightedClusters(); wc != nil {
		if r.WeightedClusters, err = c.weightedClusters(wc, r, path+".weighted_clusters"); err != nil {
			return err
		}
	}
	if a.GetPrefixRewrite() != "" && a.GetRegexRewrite() != nil {
		return fmt.Errorf("%s: prefix_rewrite and regex_rewrite are mutually exclusive", path)
	}
	if a.GetPathRewritePolicy() != nil {
		return fmt.Errorf("%s.path_rewrite_policy: path rewrite policies are not supported", path)
	}
	r.PrefixRewrite = a.GetPrefixRewrite()
	if a.GetRegexRewrite() != nil {
		if r.regexRewrite, err = compileRewrite(a.GetRegexRewrite(), path+".regex_rewrite"); err != nil {
			return err
		}
	}
	if r.match.kind == pathConnect && (r.PrefixRewrite != "" || r.regexRewrite != nil) {
		return fmt.Errorf("%s: path rewrites are not allowed on connect_matcher routes", path)
	}
	if err := compileUpgrades(r, a.GetUpgradeConfigs(), path); err != nil {
		return err
	}
	if err := c.compileMirrors(r, a.GetRequestMirrorPolicies(), path); err != nil {
		return err
	}
	switch h := a.GetHostRewriteSpecifier().(type) {
	case *routev3.RouteAction_HostRewriteLiteral:
		r.HostRewriteLiteral = h.HostRewriteLiteral
	case *routev3.RouteAction_AutoHostRewrite:
		r.AutoHostRewrite = h.AutoHostRewrite.GetValue()
	case *routev3.RouteAction_HostRewriteHeader:
		r.HostRewriteHeader = headerKey(h.HostRewriteHeader)
	case *routev3.RouteAction_HostRewritePathRegex:
		return fmt.Errorf("%s.host_rewrite_path_regex: not supported", path)
	}
	if a.GetTimeout() != nil {
		if r.Timeout, err = duration(a.GetTimeout(), path+".timeout"); err != nil {
			return err
		}
	}
	if a.GetIdleTimeout() != nil {
		if r.IdleTimeout, err = duration(a.GetIdleTimeout(), path+".idle_timeout"); err != nil {
			return err
		}
		r.IdleTimeoutSet = true
	}
	if a.GetRetryPolicy() != nil {
		if r.RetryPolicy, err = c.retryPolicy(a.GetRetryPolicy(), path+".retry_policy"); err != nil {
			return err
		}
	}
	if r.HashPolicy, err = compileEach(a.GetHashPolicy(), path+".hash_policy", compileHashPolicy); err != nil {
		return err
	}
	switch a.GetPriority() {
	case corev3.RoutingPriority_DEFAULT:
		r.Priority = PriorityDefault
	case corev3.RoutingPriority_HIGH:
		r.Priority = PriorityHigh
	default:
		return fmt.Errorf("%s.priority = %d: must be DEFAULT or HIGH", path, a.GetPriority())
	}
	return nil
}

func (c *compiler) weightedClusters(p *routev3.WeightedCluster, r *Route, path string) (*WeightedClusters, error) {
	wc := &WeightedClusters{}
	if len(p.GetClusters()) == 0 {
		return nil, fmt.Errorf("%s.clusters: at least one cluster is required", path)
	}
	if p.GetUseHashPolicy() != nil && p.GetUseHashPolicy().GetValue() {
		return nil, fmt.Errorf("%s.use_hash_policy: not supported", path)
	}
	if h := p.GetHeaderName(); h != "" {
		wc.HeaderName = textproto.CanonicalMIMEHeaderKey(h)
	}
	for i, cp := range p.GetClusters() {
		cpath := fmt.Sprintf("%s.clusters[%d]", path, i)
		w := &WeightedCluster{
			Name:               cp.GetName(),
			Weight:             cp.GetWeight().GetValue(),
			HostRewriteLiteral: cp.GetHostRewriteLiteral(),
		}
		switch {
		case cp.GetName() != "" && cp.GetClusterHeader() != "":
			return nil, fmt.Errorf("%s: name and cluster_header are mutually exclusive", cpath)
		case cp.GetClusterHeader() != "":
			w.ClusterHeader = textproto.CanonicalMIMEHeaderKey(cp.GetClusterHeader())
		case cp.GetName() == "":
			return nil, fmt.Errorf("%s: one of name or cluster_header is required", cpath)
		default:
			if err := c.checkCluster(cp.GetName(), cpath+".name"); err != nil {
				return nil, err
			}
		}
		var err error
		if w.filters, err = compilePerFilter(cp.GetTypedPerFilterConfig(), cpath+".", c.opts); err != nil {
			return nil, err
		}
		c.noteDisabled(w.filters)
		if w.MetadataMatch, err = metadataCriteria(cp.GetMetadataMatch(), r.MetadataMatch, cpath+".metadata_match"); err != nil {
			return nil, err
		}
		reqOps, err := compileHeaderOps(cp.GetRequestHeadersToAdd(), cp.GetRequestHeadersToRemove(), cpath+".", "request_headers", c.opts)
		if err != nil {
			return nil, err
		}
		respOps, err := compileHeaderOps(cp.GetResponseHeadersToAdd(), cp.GetResponseHeadersToRemove(), cpath+".", "response_headers", c.opts)
		if err != nil {
			return nil, err
		}
		w.match = &Match{
			Route:         r,
			Cluster:       w.Name,
			Weighted:      w,
			MetadataMatch: w.MetadataMatch,
			HostRewrite:   cmp.Or(w.HostRewriteLiteral, r.HostRewriteLiteral),
			requestOps:    []*HeaderOps{reqOps},
			responseOps:   []*HeaderOps{respOps},
		}
		wc.Total += uint64(w.Weight)
		wc.Clusters = append(wc.Clusters, w)
	}
	if wc.Total == 0 {
		return nil, fmt.Errorf("%s.clusters: sum of weights is 0; must be > 0", path)
	}
	if tw := p.GetTotalWeight(); tw != nil && uint64(tw.GetValue()) != wc.Total {
		return nil, fmt.Errorf("%s.total_weight = %d: must equal the sum of the cluster weights (%d)", path, tw.GetValue(), wc.Total)
	}
	return wc, nil
}

// precompute builds the shared Matches of a route once its action is compiled.
func precompute(r *Route) {
	switch {
	case r.WeightedClusters != nil:
		for _, w := range r.WeightedClusters.Clusters {
			m := w.match
			m.VirtualHost = r.vhost
			m.requestOps = r.orderedOps(m.requestOps[0], true)
			m.responseOps = r.orderedOps(m.responseOps[0], false)
			m.fixed = true
		}
	case r.ClusterHeader != "":
		r.template = baseMatch(r)
	default:
		r.single = baseMatch(r)
		r.single.fixed = true
	}
}

func baseMatch(r *Route) *Match {
	return &Match{
		VirtualHost:   r.vhost,
		Route:         r,
		Cluster:       r.Cluster,
		MetadataMatch: r.MetadataMatch,
		HostRewrite:   r.HostRewriteLiteral,
		requestOps:    r.orderedOps(nil, true),
		responseOps:   r.orderedOps(nil, false),
	}
}

// orderedOps lists the header mutations of a match in Envoy's order: the weighted cluster's
// (first, always), then route, virtual host and route configuration, or the reverse of those
// three with most_specific_header_mutations_wins.
func (r *Route) orderedOps(cluster *HeaderOps, request bool) []*HeaderOps {
	var levels [3]*HeaderOps
	if request {
		levels = [3]*HeaderOps{r.requestOps, r.vhost.requestOps, r.vhost.globalOps(true)}
	} else {
		levels = [3]*HeaderOps{r.responseOps, r.vhost.responseOps, r.vhost.globalOps(false)}
	}
	if r.vhost.mostSpecificWins {
		levels[0], levels[2] = levels[2], levels[0]
	}
	var out []*HeaderOps
	if cluster != nil {
		out = append(out, cluster)
	}
	for _, l := range levels {
		if l != nil {
			out = append(out, l)
		}
	}
	return out
}

func (c *compiler) directResponse(p *routev3.DirectResponseAction, path string) (*DirectResponse, error) {
	if p.GetStatus() < 200 || p.GetStatus() > 599 {
		return nil, fmt.Errorf("%s.status = %d: must be in [200, 599]", path, p.GetStatus())
	}
	if p.GetBodyFormat() != nil {
		return nil, fmt.Errorf("%s.body_format: not supported", path)
	}
	dr := &DirectResponse{Status: int(p.GetStatus())}
	b := p.GetBody()
	switch {
	case b == nil:
	case b.GetFilename() != "":
		read := c.opts.ReadFile
		if read == nil {
			read = os.ReadFile
		}
		data, err := read(b.GetFilename())
		if err != nil {
			return nil, fmt.Errorf("%s.body.filename = %q: %w", path, b.GetFilename(), err)
		}
		dr.Body = data
	case b.GetInlineBytes() != nil:
		dr.Body = b.GetInlineBytes()
	case b.GetEnvironmentVariable() != "":
		return nil, fmt.Errorf("%s.body.environment_variable: not supported", path)
	default:
		dr.Body = []byte(b.GetInlineString())
	}
	if len(dr.Body) > int(c.maxBody) {
		return nil, fmt.Errorf("%s.body: %d bytes; must be <= max_direct_response_body_size_bytes (%d)", path, len(dr.Body), c.maxBody)
	}
	return dr, nil
}

func compileRedirect(p *routev3.RedirectAction, path string) (*Redirect, error) {
	rd := &Redirect{
		Scheme:        p.GetSchemeRedirect(),
		Host:          p.GetHostRedirect(),
		Port:          p.GetPortRedirect(),
		Path:          p.GetPathRedirect(),
		PrefixRewrite: p.GetPrefixRewrite(),
		StripQuery:    p.GetStripQuery(),
	}
	if p.GetHttpsRedirect() {
		rd.Scheme = "https"
	}
	rd.Scheme = strings.ToLower(rd.Scheme)
	if rd.Port > 65535 {
		return nil, fmt.Errorf("%s.port_redirect = %d: must be <= 65535", path, rd.Port)
	}
	if p.GetRegexRewrite() != nil {
		var err error
		if rd.regexRewrite, err = compileRewrite(p.GetRegexRewrite(), path+".regex_rewrite"); err != nil {
			return nil, err
		}
	}
	if p.GetPathRewrite() != "" {
		return nil, fmt.Errorf("%s.path_rewrite: not supported", path)
	}
	switch p.GetResponseCode() {
	case routev3.RedirectAction_MOVED_PERMANENTLY:
		rd.ResponseCode = 301
	case routev3.RedirectAction_FOUND:
		rd.ResponseCode = 302
	case routev3.RedirectAction_SEE_OTHER:
		rd.ResponseCode = 303
	case routev3.RedirectAction_TEMPORARY_REDIRECT:
		rd.ResponseCode = 307
	case routev3.RedirectAction_PERMANENT_REDIRECT:
		rd.ResponseCode = 308
	default:
		return nil, fmt.Errorf("%s.response_code = %d: unknown redirect response code", path, p.GetResponseCode())
	}
	return rd, nil
}

// retryPolicy compiles a retry policy with its host predicates.
func (c *compiler) retryPolicy(p *routev3.RetryPolicy, path string) (*RetryPolicy, error) {
	rp, err := compileRetryPolicy(p, path)
	if err != nil {
		return nil, err
	}
	for i, hp := range p.GetRetryHostPredicate() {
		hpath := fmt.Sprintf("%s.retry_host_predicate[%d]", path, i)
		apply, e, ok := registry.Lookup(c.opts.Extensions, RetryHostPredicates, hp.GetName(), hp.GetTypedConfig().GetTypeUrl())
		if !ok {
			var names []string
			for e := range registry.All(c.opts.Extensions, RetryHostPredicates) {
				names = append(names, e.Name)
			}
			return nil, fmt.Errorf("%s.name = %q: unsupported; must be %s", hpath, hp.GetName(), strings.Join(names, " or "))
		}
		config, err := e.Decode(hpath+".typed_config", hp.GetTypedConfig())
		if err != nil {
			return nil, err
		}
		if err := apply(hpath+".typed_config", config, rp); err != nil {
			return nil, err
		}
	}
	if pr := p.GetRetryPriority(); pr != nil {
		if err := c.retryPriority(pr, path+".retry_priority", rp); err != nil {
			return nil, err
		}
	}
	return rp, nil
}

// retryPriority applies a retry policy's retry_priority with its registered extension.
func (c *compiler) retryPriority(pr *routev3.RetryPolicy_RetryPriority, path string, rp *RetryPolicy) error {
	apply, e, ok := registry.Lookup(c.opts.Extensions, RetryPriorities, pr.GetName(), pr.GetTypedConfig().GetTypeUrl())
	if !ok {
		return fmt.Errorf("%s.name = %q: not implemented by Legate (only %s is)", path, pr.GetName(), PreviousPriorities)
	}
	config, err := e.Decode(path+".typed_config", pr.GetTypedConfig())
	if err != nil {
		return err
	}
	return apply(path+".typed_config", config, rp)
}

// compileRetryPolicy compiles a retry policy but for its host predicates (retryPolicy).
func compileRetryPolicy(p *routev3.RetryPolicy, path string) (*RetryPolicy, error) {
	rp := &RetryPolicy{
		NumRetries:                    1,
		HostSelectionRetryMaxAttempts: 1,
		BaseInterval:                  25 * time.Millisecond,
		RetriableStatusCodes:          p.GetRetriableStatusCodes(),
	}
	rp.RetryOn, _ = ParseRetryOn(p.GetRetryOn())
	if v := p.GetNumRetries(); v != nil {
		rp.NumRetries = v.GetValue()
	}
	var err error
	if p.GetPerTryTimeout() != nil {
		if rp.PerTryTimeout, err = duration(p.GetPerTryTimeout(), path+".per_try_timeout"); err != nil {
			return nil, err
		}
	}
	if p.GetPerTryIdleTimeout() != nil {
		if rp.PerTryIdleTimeout, err = duration(p.GetPerTryIdleTimeout(), path+".per_try_idle_timeout"); err != nil {
			return nil, err
		}
	}
	if n := p.GetHostSelectionRetryMaxAttempts(); n != 0 {
		rp.HostSelectionRetryMaxAttempts = n
	}
	if len(p.GetRetryOptionsPredicates()) > 0 {
		return nil, fmt.Errorf("%s.retry_options_predicates: not supported", path)
	}
	if bo := p.GetRetryBackOff(); bo != nil {
		if rp.BaseInterval, err = duration(bo.GetBaseInterval(), path+".retry_back_off.base_interval"); err != nil {
			return nil, err
		}
		rp.BaseInterval = max(rp.BaseInterval, time.Millisecond)
		if bo.GetMaxInterval() != nil {
			if rp.MaxInterval, err = duration(bo.GetMaxInterval(), path+".retry_back_off.max_interval"); err != nil {
				return nil, err
			}
			rp.MaxInterval = max(rp.MaxInterval, time.Millisecond)
			if rp.MaxInterval < rp.BaseInterval {
				return nil, fmt.Errorf("%s.retry_back_off.max_interval = %v: must be >= base_interval (%v)", path, rp.MaxInterval, rp.BaseInterval)
			}
		}
	}
	if rp.MaxInterval == 0 {
		rp.MaxInterval = 10 * rp.BaseInterval
	}
	if rp.retriableHeaders, err = compileEach(p.GetRetriableHeaders(), path+".retriable_headers", compileHeaderMatcher); err != nil {
		return nil, err
	}
	if rp.retriableRequestHeaders, err = compileEach(p.GetRetriableRequestHeaders(), path+".retriable_request_headers", compileHeaderMatcher); err != nil {
		return nil, err
	}
	return rp, nil
}

func compileHashPolicy(p *routev3.RouteAction_HashPolicy, path string) (HashPolicy, error) {
	hp := HashPolicy{Terminal: p.GetTerminal()}
	switch s := p.GetPolicySpecifier().(type) {
	case *routev3.RouteAction_HashPolicy_Header_:
		if s.Header.GetHeaderName() == "" {
			return hp, fmt.Errorf("%s.header.header_name = \"\": must not be empty", path)
		}
		hp.Kind, hp.Name = HashHeader, headerKey(s.Header.GetHeaderName())
		if rw := s.Header.GetRegexRewrite(); rw != nil {
			var err error
			if hp.rewrite, err = compileRewrite(rw, path+".header.regex_rewrite"); err != nil {
				return hp, err
			}
		}
	case *routev3.RouteAction_HashPolicy_Cookie_:
		if s.Cookie.GetName() == "" {
			return hp, fmt.Errorf("%s.cookie.name = \"\": must not be empty", path)
		}
		hp.Kind, hp.Name, hp.CookiePath = HashCookie, s.Cookie.GetName(), s.Cookie.GetPath()
		if s.Cookie.GetTtl() != nil {
			var err error
			if hp.CookieTTL, err = duration(s.Cookie.GetTtl(), path+".cookie.ttl"); err != nil {
				return hp, err
			}
			hp.CookieTTL = hp.CookieTTL.Truncate(time.Second) // Envoy keeps whole seconds
			hp.CookieTTLSet = true
		}
	case *routev3.RouteAction_HashPolicy_ConnectionProperties_:
		hp.Kind = HashSourceIP
		if !s.ConnectionProperties.GetSourceIp() {
			hp.Kind = hashNone // Envoy skips the policy
		}
	case *routev3.RouteAction_HashPolicy_QueryParameter_:
		if s.QueryParameter.GetName() == "" {
			return hp, fmt.Errorf("%s.query_parameter.name = \"\": must not be empty", path)
		}
		hp.Kind, hp.Name = HashQueryParameter, s.QueryParameter.GetName()
	case *routev3.RouteAction_HashPolicy_FilterState_:
		return hp, fmt.Errorf("%s.filter_state: filter state hash policies are not supported", path)
	default:
		return hp, fmt.Errorf("%s: one of header, cookie, connection_properties or query_parameter is required", path)
	}
	return hp, nil
}

func duration(d *durationpb.Duration, path string) (time.Duration, error) {
	if err := d.CheckValid(); err != nil {
		return 0, fmt.Errorf("%s = %v: %v", path, d, err)
	}
	v := d.AsDuration()
	if v < 0 {
		return 0, fmt.Errorf("%s = %v: must not be negative", path, v)
	}
	return v, nil
}

// lbNamespaces are the filter_metadata keys of subset load-balancing criteria, the later
// winning a key both set: the spec's proxy.lb, then Envoy's envoy.lb, as endpoint metadata
// reads them (config.LbMetadataNamespaceSpec and config.LbMetadataNamespace).
var lbNamespaces = [...]string{"proxy.lb", "envoy.lb"}

// metadataCriteria reads metadata_match under proxy.lb and envoy.lb into sorted criteria,
// values stringified as host metadata is, merged over parent (a weighted cluster's criteria
// override the route's).
func metadataCriteria(md *corev3.Metadata, parent []lb.Criterion, path string) ([]lb.Criterion, error) {
	fm := md.GetFilterMetadata()
	var merged map[string]string
	for _, ns := range lbNamespaces {
		s, ok := fm[ns]
		if !ok {
			continue
		}
		if merged == nil {
			merged = map[string]string{}
			for _, c := range parent {
				merged[c.Name] = c.Value
			}
		}
		for k, v := range s.GetFields() {
			switch x := v.GetKind().(type) {
			case *structpb.Value_StringValue:
				merged[k] = x.StringValue
			case *structpb.Value_NumberValue:
				merged[k] = fmt.Sprintf("%v", x.NumberValue)
			case *structpb.Value_BoolValue:
				merged[k] = strconv.FormatBool(x.BoolValue)
			default:
				return nil, fmt.Errorf("%s.filter_metadata[%q].%s: only strings, numbers and booleans are supported", path, ns, k)
			}
		}
	}
	if merged == nil {
		return parent, nil
	}
	out := make([]lb.Criterion, 0, len(merged))
	for k, v := range merged {
		out = append(out, lb.Criterion{Name: k, Value: v})
	}
	lb.SortCriteria(out)
	return out, nil
}

// compileEach compiles the elements of a repeated field, naming each "path[i]" in errors.
func compileEach[P, T any](items []P, path string, compile func(P, string) (T, error)) ([]T, error) {
	var out []T
	for i, item := range items {
		v, err := compile(item, fmt.Sprintf("%s[%d]", path, i))
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
