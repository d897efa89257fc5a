package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"golang.org/x/net/http/httpguts"

	"github.com/legateproxy/legate/bootstrap"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/internal/sockopt"
	"github.com/legateproxy/legate/tlsutil"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// upstreamHTTPOptionsKey is the typed_extension_protocol_options key of the upstream HTTP
// protocol options (where v3 configures HTTP/2 upstreams).
const upstreamHTTPOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"

// ClusterFromProto converts c into a Cluster with every default applied and checks the rules of
// the cluster configuration spec (its Errors and Limits tables). Fields Legate does not
// implement are refused or listed in Cluster.Ignored (see the table in doc.go). Errors name the
// cluster, the field path, the value and the rule. c is kept as Cluster.Proto and must not be modified
// afterwards.
func ClusterFromProto(c *clusterv3.Cluster, lim Limits) (*Cluster, error) {
	if c == nil {
		return nil, fmt.Errorf("cluster: nil")
	}
	b := clusterBuilder{at: fmt.Sprintf("cluster %q", c.GetName()), ext: lim.extensions()}
	out := b.build(c, lim)
	if b.err != nil {
		return nil, b.err
	}
	if cfg := forwardProxySettings(out); cfg != nil {
		cfg.limits = lim // its sub-clusters are read with them too
	}
	return out, nil
}

// clusterBuilder keeps the first error met while converting.
type clusterBuilder struct {
	at  string
	ext *registry.Registry // the cluster types and load balancing policies
	err error
}

func (b *clusterBuilder) fail(format string, args ...any) {
	if b.err == nil {
		b.err = fmt.Errorf("%s: %s", b.at, fmt.Sprintf(format, args...))
	}
}

// failWrap is fail for an error a conversion returned, kept for errors.Is.
func (b *clusterBuilder) failWrap(prefix string, err error) {
	if b.err == nil {
		b.err = fmt.Errorf("%s: %s%w", b.at, prefix, err)
	}
}

// StatName returns the name a cluster's stats use: alt_stat_name when set, else the name, with
// each ':' replaced by '_' (Envoy's sanitising of stat names).
func StatName(name, altStatName string) string {
	if altStatName != "" {
		name = altStatName
	}
	return strings.ReplaceAll(name, ":", "_")
}

func (b *clusterBuilder) build(c *clusterv3.Cluster, lim Limits) *Cluster {
	out := &Cluster{
		Name:                                c.GetName(),
		AltStatName:                         c.GetAltStatName(),
		StatName:                            StatName(c.GetName(), c.GetAltStatName()),
		ConnectTimeout:                      durationOr(c.GetConnectTimeout(), DefaultConnectTimeout),
		PerConnectionBufferLimitBytes:       u32Or(c.GetPerConnectionBufferLimitBytes(), DefaultClusterBufferLimit),
		MaxRequestsPerConnection:            u32Or(c.GetMaxRequestsPerConnection(), 0),
		DNSRefreshRate:                      durationOr(c.GetDnsRefreshRate(), DefaultDNSRefreshRate),
		RespectDNSTTL:                       c.GetRespectDnsTtl(),
		DNSLookupFamily:                     DNSLookupFamily(c.GetDnsLookupFamily()),
		CleanupInterval:                     durationOr(c.GetCleanupInterval(), DefaultCleanupInterval),
		ProtocolSelection:                   ProtocolSelection(c.GetProtocolSelection()),
		CloseConnectionsOnHostHealthFailure: c.GetCloseConnectionsOnHostHealthFailure(),
		DrainConnectionsOnHostRemoval:       c.GetIgnoreHealthOnHostRemoval(),
		Metadata:                            c.GetMetadata(),
		TransportSocket:                     c.GetTransportSocket(),
		TypedExtensionProtocolOptions:       c.GetTypedExtensionProtocolOptions(),
		Proto:                               c,
	}
	if out.Name == "" {
		b.fail("name is empty; every cluster needs a unique name")
	}
	if n := lim.maxObjNameLen(); len(out.Name) > n {
		b.fail("name = %q is %d characters; must be at most %d (--max-obj-name-len)", out.Name, len(out.Name), n)
	}
	if r := c.GetDnsFailureRefreshRate(); r != nil {
		out.DNSFailureRefreshRate = r.GetBaseInterval().AsDuration()
	}
	if out.DNSRefreshRate <= 0 {
		b.fail("dns_refresh_rate = %v; must be > 0", out.DNSRefreshRate)
	}
	if out.CleanupInterval <= 0 {
		b.fail("cleanup_interval = %v; must be > 0", out.CleanupInterval)
	}
	if out.DNSLookupFamily > All {
		b.fail("dns_lookup_family = %d; not a DnsLookupFamily", c.GetDnsLookupFamily())
	}
	res, err := DNSResolutionFromProto("", c.GetTypedDnsResolverConfig(), c.GetDnsResolutionConfig(), c.GetUseTcpForDnsLookups(), c.GetDnsResolvers())
	if err != nil {
		b.failWrap("", err)
	}
	out.DNSResolution = res
	b.discovery(c, out)
	b.lbPolicy(c, out)
	b.commonLb(c.GetCommonLbConfig(), out)
	if lbp := c.GetLoadBalancingPolicy(); lbp != nil {
		b.typedPolicy(lbp, out)
	}
	b.policyMatchesType(c, out)
	b.subset(c.GetLbSubsetConfig(), out)
	b.circuitBreakers(c.GetCircuitBreakers(), out)
	b.protocols(c, out)
	b.forwardProxyTLSNames(c, out)
	b.socketMatches(c, out)
	for i, hc := range c.GetHealthChecks() {
		b.healthCheckShape(fmt.Sprintf("health_checks[%d]", i), hc)
	}
	// A cluster's upstream_bind_config, even one without an address (no bind), overrides the
	// bootstrap's.
	out.UpstreamBindAddress = lim.UpstreamBindAddress
	if c.GetUpstreamBindConfig() != nil {
		out.UpstreamBindAddress = nil
	}
	if sa := c.GetUpstreamBindConfig().GetSourceAddress(); sa != nil {
		a := b.address("upstream_bind_config.source_address", &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: sa}})
		out.UpstreamBindAddress = &a
	}
	out.UpstreamSocketOptions = lim.UpstreamSocketOptions
	if bc := c.GetUpstreamBindConfig(); bc != nil {
		opts, err := socketOptions("upstream_bind_config.socket_options", bc.GetSocketOptions())
		if err == nil {
			err = sockopt.Check(opts)
		}
		if err != nil {
			b.fail("%v", err)
		}
		out.UpstreamSocketOptions = opts
	}
	if ka := c.GetUpstreamConnectionOptions().GetTcpKeepalive(); ka != nil {
		out.TCPKeepalive = &TCPKeepalive{
			Probes:   u32Or(ka.GetKeepaliveProbes(), 0),
			Time:     time.Duration(u32Or(ka.GetKeepaliveTime(), 0)) * time.Second,
			Interval: time.Duration(u32Or(ka.GetKeepaliveInterval(), 0)) * time.Second,
		}
	}
	if la := c.GetLoadAssignment(); la != nil {
		assignment, err := LoadAssignmentFromProto(la)
		if err != nil {
			b.fail("load_assignment.%v", err)
		}
		out.LoadAssignment = assignment
	} else {
		out.LoadAssignment.OverprovisioningFactor = DefaultOverprovisioningFactor
	}
	b.endpointRules(out)
	out.Ignored = append(out.Ignored, b.audit(c)...)
	b.healthChecking(c, out)
	return out
}

// audit refuses the fields set in c that change traffic or security semantics and Legate does
// not implement, and returns the paths of the operational ones it ignores (bootstrap.Audit).
func (b *clusterBuilder) audit(m proto.Message) []string {
	return auditFields(m, b.fail)
}

// discovery sets the discovery type and checks the fields that depend on it.
func (b *clusterBuilder) discovery(c *clusterv3.Cluster, out *Cluster) {
	if ct := c.GetClusterType(); ct != nil {
		out.Type = Custom
		out.CustomType = &CustomClusterType{Name: ct.GetName(), Config: ct.GetTypedConfig()}
		decode, _, ok := registry.Lookup(b.ext, ClusterTypeDecoders, ct.GetName(), "")
		if !ok {
			b.fail("cluster_type.name = %q; must match a supported cluster type (%s)", ct.GetName(), strings.Join(ClusterTypes(b.ext), ", "))
			return
		}
		settings, err := decode(out.Name, ct.GetTypedConfig())
		if err != nil {
			b.fail("cluster_type.%v", err)
			return
		}
		out.CustomType.Settings = settings
	} else {
		switch t := c.GetType(); t {
		case clusterv3.Cluster_STATIC:
			out.Type = Static
		case clusterv3.Cluster_STRICT_DNS:
			out.Type = StrictDNS
		case clusterv3.Cluster_LOGICAL_DNS:
			out.Type = LogicalDNS
		case clusterv3.Cluster_EDS:
			out.Type = EDS
		case clusterv3.Cluster_ORIGINAL_DST:
			out.Type = OriginalDst
		default:
			b.fail("type = %d; not a DiscoveryType", t)
		}
	}
	if e := c.GetEdsClusterConfig(); e != nil {
		if out.Type != EDS {
			b.fail("eds_cluster_config is set, but type = %s; it is valid only for type EDS", out.Type)
		}
		out.EDS = &EDSConfig{ServiceName: e.GetServiceName(), Source: e.GetEdsConfig()}
	} else if out.Type == EDS {
		out.EDS = &EDSConfig{}
	}
}

// lbPolicy converts lb_policy and its per-policy config. When load_balancing_policy is set,
// Envoy ignores lb_policy and the per-policy configs (typedPolicy then sets the policy), so
// only original_dst_lb_config, a setting of the ORIGINAL_DST cluster type, is read.
func (b *clusterBuilder) lbPolicy(c *clusterv3.Cluster, out *Cluster) {
	policy := c.GetLbPolicy()
	out.LbPolicy = policy.String()
	if policy == clusterv3.Cluster_CLUSTER_PROVIDED || policy.String() == "ORIGINAL_DST_LB" {
		out.LbPolicy = "CLUSTER_PROVIDED"
	}
	if _, ok := clusterv3.Cluster_LbPolicy_name[int32(policy)]; !ok {
		b.fail("lb_policy = %d; not an LbPolicy", policy)
	}
	out.RingHash = RingHashLbConfig{MinimumRingSize: DefaultMinRingSize, MaximumRingSize: MaxRingSize}
	out.LeastRequest = LeastRequestLbConfig{ChoiceCount: DefaultChoiceCount, ActiveRequestBias: 1}
	out.Maglev = MaglevLbConfig{TableSize: DefaultMaglevTableSize}
	b.originalDst(c.GetOriginalDstLbConfig(), out)
	if c.GetLoadBalancingPolicy() != nil {
		return
	}
	if r := c.GetRingHashLbConfig(); r != nil {
		if policy != clusterv3.Cluster_RING_HASH {
			b.fail("ring_hash_lb_config is set, but lb_policy = %s; ring_hash_lb_config needs lb_policy RING_HASH", policy)
		}
		out.RingHash.MinimumRingSize = u64Or(r.GetMinimumRingSize(), DefaultMinRingSize)
		out.RingHash.MaximumRingSize = u64Or(r.GetMaximumRingSize(), MaxRingSize)
		out.RingHash.HashFunction = HashFunction(r.GetHashFunction())
		if err := out.RingHash.check("ring_hash_lb_config"); err != nil {
			b.fail("%v", err)
		} else if out.RingHash.HashFunction > MurmurHash2 {
			b.fail("ring_hash_lb_config.hash_function = %d; must be XX_HASH or MURMUR_HASH_2", r.GetHashFunction())
		}
	}
	if l := c.GetLeastRequestLbConfig(); l != nil {
		if policy != clusterv3.Cluster_LEAST_REQUEST {
			b.fail("least_request_lb_config is set, but lb_policy = %s; least_request_lb_config needs lb_policy LEAST_REQUEST", policy)
		}
		out.LeastRequest.ChoiceCount = u32Or(l.GetChoiceCount(), DefaultChoiceCount)
		if out.LeastRequest.ChoiceCount < 2 {
			b.fail("least_request_lb_config.choice_count = %d; must be >= 2", out.LeastRequest.ChoiceCount)
		}
		if bias := l.GetActiveRequestBias(); bias != nil {
			out.LeastRequest.ActiveRequestBias = bias.GetDefaultValue()
			if v := out.LeastRequest.ActiveRequestBias; v < 0 || v != v {
				b.fail("least_request_lb_config.active_request_bias = %v; must be >= 0", v)
			}
		}
	}
	if m := c.GetMaglevLbConfig(); m != nil {
		if policy != clusterv3.Cluster_MAGLEV {
			b.fail("maglev_lb_config is set, but lb_policy = %s; maglev_lb_config needs lb_policy MAGLEV", policy)
		}
		out.Maglev.TableSize = u64Or(m.GetTableSize(), DefaultMaglevTableSize)
		if err := out.Maglev.check("maglev_lb_config"); err != nil {
			b.fail("%v", err)
		}
	}
}

// originalDst converts original_dst_lb_config.
func (b *clusterBuilder) originalDst(o *clusterv3.Cluster_OriginalDstLbConfig, out *Cluster) {
	if o != nil {
		out.OriginalDst = OriginalDstLbConfig{
			UseHTTPHeader:        o.GetUseHttpHeader(),
			UpstreamPortOverride: u32Or(o.GetUpstreamPortOverride(), 0),
		}
		if out.OriginalDst.UpstreamPortOverride > 65535 {
			b.fail("original_dst_lb_config.upstream_port_override = %d; must be <= 65535", out.OriginalDst.UpstreamPortOverride)
		}
		if o.GetUseHttpHeader() {
			if name := o.GetHttpHeaderName(); name != "" {
				out.OriginalDst.HeaderNames = []string{strings.ToLower(name)}
			} else {
				out.OriginalDst.HeaderNames = []string{OriginalDstHeader, OriginalDstHeaderSpec}
			}
		}
	}
}

// policyMatchesType checks the effective policy against the discovery type.
func (b *clusterBuilder) policyMatchesType(c *clusterv3.Cluster, out *Cluster) {
	// ORIGINAL_DST clusters and the CLUSTER_PROVIDED policy go together, as Envoy requires.
	switch {
	case out.Type == OriginalDst && out.LbPolicy != "CLUSTER_PROVIDED":
		b.fail("%s = %s is not valid for type ORIGINAL_DST; only CLUSTER_PROVIDED (v2: ORIGINAL_DST_LB) is allowed", policyField(c), out.LbPolicy)
	case out.Type != OriginalDst && out.Type != Custom && out.LbPolicy == "CLUSTER_PROVIDED":
		b.fail("%s = %s needs type ORIGINAL_DST, but type = %s", policyField(c), out.LbPolicy, out.Type)
	case out.Type != OriginalDst && c.GetOriginalDstLbConfig() != nil:
		b.fail("original_dst_lb_config is set, but type = %s; it is valid only for type ORIGINAL_DST", out.Type)
	}
}

// check applies Envoy's ring size bounds; at is the path of the config in errors.
func (r RingHashLbConfig) check(at string) error {
	switch {
	case r.MinimumRingSize > MaxRingSize:
		return fmt.Errorf("%s.minimum_ring_size = %d; must be <= %d", at, r.MinimumRingSize, MaxRingSize)
	case r.MaximumRingSize > MaxRingSize:
		return fmt.Errorf("%s.maximum_ring_size = %d; must be <= %d", at, r.MaximumRingSize, MaxRingSize)
	case r.MinimumRingSize > r.MaximumRingSize:
		return fmt.Errorf("%s.minimum_ring_size = %d; must be <= maximum_ring_size (%d)", at, r.MinimumRingSize, r.MaximumRingSize)
	}
	return nil
}

// check applies Envoy's rule on the Maglev table size; at is the path of the config in errors.
func (m MaglevLbConfig) check(at string) error {
	if ts := m.TableSize; ts > MaxMaglevTableSize || !prime(ts) {
		return fmt.Errorf("%s.table_size = %d; must be a prime <= %d", at, ts, MaxMaglevTableSize)
	}
	return nil
}

// policyField names the field that chose the cluster's policy, for errors.
func policyField(c *clusterv3.Cluster) string {
	if c.GetLoadBalancingPolicy() != nil {
		return "load_balancing_policy"
	}
	return "lb_policy"
}

func prime(n uint64) bool {
	if n < 2 {
		return false
	}
	for d := uint64(2); d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}

func (b *clusterBuilder) commonLb(c *clusterv3.Cluster_CommonLbConfig, out *Cluster) {
	cl := &out.CommonLb
	cl.HealthyPanicThreshold = DefaultHealthyPanicThreshold
	cl.UpdateMergeWindow = DefaultUpdateMergeWindow
	if c == nil {
		return
	}
	if t := c.GetHealthyPanicThreshold(); t != nil {
		v := t.GetValue()
		if v < 0 || v > 100 || v != v {
			b.fail("common_lb_config.healthy_panic_threshold.value = %g; must be in 0..100", v)
		} else {
			cl.HealthyPanicThreshold = uint32(v) // truncated to the nearest 1%
		}
	}
	if z := c.GetZoneAwareLbConfig(); z != nil {
		cl.ZoneAware = &ZoneAwareLbConfig{
			RoutingEnabled:     DefaultZoneRoutingEnabled,
			MinClusterSize:     u64Or(z.GetMinClusterSize(), DefaultMinClusterSize),
			FailTrafficOnPanic: z.GetFailTrafficOnPanic(),
		}
		if r := z.GetRoutingEnabled(); r != nil {
			if v := r.GetValue(); v < 0 || v > 100 || v != v {
				b.fail("common_lb_config.zone_aware_lb_config.routing_enabled.value = %g; must be in 0..100", v)
			} else {
				cl.ZoneAware.RoutingEnabled = v
			}
		}
	}
	cl.LocalityWeighted = c.GetLocalityWeightedLbConfig() != nil
	if w := c.GetUpdateMergeWindow(); w != nil {
		cl.UpdateMergeWindow = w.AsDuration()
		if cl.UpdateMergeWindow < 0 {
			b.fail("common_lb_config.update_merge_window = %v; must be >= 0", cl.UpdateMergeWindow)
		}
	}
	cl.IgnoreNewHostsUntilFirstHC = c.GetIgnoreNewHostsUntilFirstHc()
	cl.UseHostnameForHashing = c.GetConsistentHashingLbConfig().GetUseHostnameForHashing()
}

func (b *clusterBuilder) subset(s *clusterv3.Cluster_LbSubsetConfig, out *Cluster) {
	if s == nil || len(s.GetSubsetSelectors()) == 0 {
		return
	}
	cfg := &LbSubsetConfig{
		FallbackPolicy:      SubsetFallback(s.GetFallbackPolicy()),
		LocalityWeightAware: s.GetLocalityWeightAware(),
		ScaleLocalityWeight: s.GetScaleLocalityWeight(),
		PanicModeAny:        s.GetPanicModeAny(),
	}
	if cfg.FallbackPolicy > DefaultSubset {
		b.fail("lb_subset_config.fallback_policy = %d; not an LbSubsetFallbackPolicy", s.GetFallbackPolicy())
	}
	if d := s.GetDefaultSubset(); d != nil {
		cfg.DefaultSubset = structStrings(d.GetFields())
	}
	for i, sel := range s.GetSubsetSelectors() {
		if len(sel.GetKeys()) == 0 {
			b.fail("lb_subset_config.subset_selectors[%d].keys is empty; a selector needs at least one key", i)
		}
		cfg.Selectors = append(cfg.Selectors, sel.GetKeys())
	}
	out.LbSubset = cfg
}

func (b *clusterBuilder) circuitBreakers(cb *clusterv3.CircuitBreakers, out *Cluster) {
	for p := range out.CircuitBreakers.Thresholds {
		out.CircuitBreakers.Thresholds[p] = DefaultThresholds()
	}
	seen := [NumPriorities]bool{}
	for i, t := range cb.GetThresholds() {
		p := Priority(t.GetPriority())
		if p >= NumPriorities {
			b.fail("circuit_breakers.thresholds[%d].priority = %d; must be DEFAULT or HIGH", i, t.GetPriority())
			continue
		}
		if seen[p] {
			// Envoy uses the last entry for a priority; so do we.
			out.CircuitBreakers.Thresholds[p] = DefaultThresholds()
		}
		seen[p] = true
		th := &out.CircuitBreakers.Thresholds[p]
		th.MaxConnections = u32Or(t.GetMaxConnections(), DefaultMaxConnections)
		th.MaxPendingRequests = u32Or(t.GetMaxPendingRequests(), DefaultMaxPendingRequests)
		th.MaxRequests = u32Or(t.GetMaxRequests(), DefaultMaxRequests)
		th.MaxRetries = u32Or(t.GetMaxRetries(), DefaultMaxRetries)
		th.MaxConnectionPools = u32Or(t.GetMaxConnectionPools(), 0)
		th.TrackRemaining = t.GetTrackRemaining()
		if rb := t.GetRetryBudget(); rb != nil {
			th.RetryBudget = &RetryBudget{BudgetPercent: 20, MinRetryConcurrency: u32Or(rb.GetMinRetryConcurrency(), 3)}
			if bp := rb.GetBudgetPercent(); bp != nil {
				th.RetryBudget.BudgetPercent = bp.GetValue()
			}
		}
	}
	if len(cb.GetPerHostThresholds()) > 0 {
		// The pools hold no per-host connection limit; refused rather than parsed and dropped.
		b.fail("circuit_breakers.per_host_thresholds: set; not implemented by Legate")
	}
}

// protocols works out TLS, HTTP/2 and the HTTP connection options from the v3 fields (v2's
// tls_context, http2_protocol_options and extension_protocol_options are upgraded by bootstrap
// into these). typed_extension_protocol_options' HttpProtocolOptions, when set, replaces the
// Cluster's http2_protocol_options, common_http_protocol_options and protocol_selection, as in
// Envoy; those are then listed as ignored.
func (b *clusterBuilder) protocols(c *clusterv3.Cluster, out *Cluster) {
	// A socket that does not convert fails where the cluster's connections are built.
	up, err := tlsutil.Upstream(b.ext, "transport_socket", c.GetTransportSocket())
	out.TLS = err == nil && up != nil
	out.HTTP2 = c.GetHttp2ProtocolOptions() != nil
	http2 := c.GetHttp2ProtocolOptions()
	common := c.GetCommonHttpProtocolOptions()
	b.http1("http_protocol_options", c.GetHttpProtocolOptions(), out)
	b.upstreamHTTP("upstream_http_protocol_options", c.GetUpstreamHttpProtocolOptions(), out)
	for _, key := range slices.Sorted(maps.Keys(c.GetTypedExtensionProtocolOptions())) {
		if key != upstreamHTTPOptionsKey {
			// Envoy refuses a key no extension registers; Legate registers this one only.
			b.fail("typed_extension_protocol_options[%q]: set; not implemented by Legate (only %q is)", key, upstreamHTTPOptionsKey)
		}
	}
	if a, ok := c.GetTypedExtensionProtocolOptions()[upstreamHTTPOptionsKey]; ok {
		at := fmt.Sprintf("typed_extension_protocol_options[%q]", upstreamHTTPOptionsKey)
		var opts upstreamhttpv3.HttpProtocolOptions
		if err := a.UnmarshalTo(&opts); err != nil {
			b.fail("%s: %v", at, err)
			return
		}
		for _, legacy := range []struct {
			name string
			set  bool
		}{
			{"http_protocol_options", c.GetHttpProtocolOptions() != nil},
			{"http2_protocol_options", c.GetHttp2ProtocolOptions() != nil},
			{"common_http_protocol_options", common != nil},
			{"protocol_selection", c.GetProtocolSelection() != clusterv3.Cluster_USE_CONFIGURED_PROTOCOL},
			{"upstream_http_protocol_options", c.GetUpstreamHttpProtocolOptions() != nil},
		} {
			if legacy.set {
				out.Ignored = append(out.Ignored, legacy.name+" (replaced by "+at+")")
			}
		}
		out.HTTP2 = false
		out.ProtocolSelection = UseConfiguredProtocol
		out.HTTP1 = HTTP1Options{}
		b.upstreamHTTP(at+".upstream_http_protocol_options", opts.GetUpstreamHttpProtocolOptions(), out)
		switch {
		case opts.GetExplicitHttpConfig() != nil:
			http2 = opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions()
			out.HTTP2 = http2 != nil
			b.http1(at+".explicit_http_config.http_protocol_options", opts.GetExplicitHttpConfig().GetHttpProtocolOptions(), out)
		case opts.GetUseDownstreamProtocolConfig() != nil:
			out.ProtocolSelection = UseDownstreamProtocol
			http2 = opts.GetUseDownstreamProtocolConfig().GetHttp2ProtocolOptions()
			b.http1(at+".use_downstream_protocol_config.http_protocol_options", opts.GetUseDownstreamProtocolConfig().GetHttpProtocolOptions(), out)
		case opts.GetAutoConfig() != nil:
			b.autoConfig(at+".auto_config", out)
			http2 = opts.GetAutoConfig().GetHttp2ProtocolOptions()
			b.http1(at+".auto_config.http_protocol_options", opts.GetAutoConfig().GetHttpProtocolOptions(), out)
		default:
			http2 = nil
		}
		common = opts.GetCommonHttpProtocolOptions()
		fs, err := UpstreamFilters(at+".http_filters", opts.GetHttpFilters())
		if err != nil {
			b.fail("%v", err)
		}
		out.UpstreamHTTPFilters = fs
		if common.GetMaxRequestsPerConnection() != nil && c.GetMaxRequestsPerConnection() != nil {
			b.fail("max_requests_per_connection and %s.common_http_protocol_options.max_requests_per_connection are both set; set only one (Envoy refuses both)", at)
		}
	}
	b.httpOptions(common, out)
	b.http2Options(http2, out)
}

// upstreamHTTP converts upstream_http_protocol_options: the SNI, and the SAN the server's
// certificate must carry, taken from each request's authority (or the override header).
func (b *clusterBuilder) upstreamHTTP(at string, p *corev3.UpstreamHttpProtocolOptions, out *Cluster) {
	out.UpstreamHTTP = UpstreamHTTPProtocolOptions{
		AutoSNI:           p.GetAutoSni(),
		AutoSANValidation: p.GetAutoSanValidation(),
	}
	h := p.GetOverrideAutoSniHeader()
	if h == "" {
		return
	}
	if !httpguts.ValidHeaderFieldName(h) {
		b.fail("%s.override_auto_sni_header = %q; not a valid HTTP header name", at, h)
		return
	}
	out.UpstreamHTTP.OverrideAutoSNIHeader = strings.ToLower(h)
}

// http2Options converts the http2_protocol_options the upstream HTTP/2 client applies.
func (b *clusterBuilder) http2Options(p *corev3.Http2ProtocolOptions, out *Cluster) {
	out.HTTP2Options = UpstreamHTTP2Options{
		MaxConcurrentStreams:        p.GetMaxConcurrentStreams().GetValue(),
		InitialStreamWindowSize:     p.GetInitialStreamWindowSize().GetValue(),
		InitialConnectionWindowSize: p.GetInitialConnectionWindowSize().GetValue(),
		KeepaliveInterval:           p.GetConnectionKeepalive().GetInterval().AsDuration(),
		KeepaliveTimeout:            p.GetConnectionKeepalive().GetTimeout().AsDuration(),
	}
	if t := p.GetHpackTableSize(); t != nil {
		if t.GetValue() == 0 {
			b.fail("http2_protocol_options.hpack_table_size = 0; Legate's HTTP/2 client cannot turn the dynamic table off (set at least 1)")
		}
		out.HTTP2Options.HpackTableSize = t.GetValue()
	}
}

// autoConfig checks auto_config, which needs ALPN and so TLS: Envoy refuses it on a cluster
// whose transport socket cannot negotiate a protocol.
func (b *clusterBuilder) autoConfig(at string, out *Cluster) {
	if !out.TLS {
		b.fail("%s: set on a cluster without a TLS transport_socket; the protocol is chosen by TLS ALPN (use explicit_http_config for plain text)", at)
	}
	out.AutoHTTP = true
}

// httpOptions converts the common_http_protocol_options of the cluster's connections.
func (b *clusterBuilder) httpOptions(p *corev3.HttpProtocolOptions, out *Cluster) {
	out.HTTP = UpstreamHTTPOptions{
		IdleTimeout:             durationOr(p.GetIdleTimeout(), DefaultUpstreamIdleTimeout),
		MaxConnectionDuration:   p.GetMaxConnectionDuration().AsDuration(),
		MaxHeadersCount:         u32Or(p.GetMaxHeadersCount(), DefaultMaxResponseHeadersCount),
		MaxResponseHeadersBytes: u32Or(p.GetMaxResponseHeadersKb(), DefaultMaxResponseHeadersKB) << 10,
		MaxStreamDuration:       p.GetMaxStreamDuration().AsDuration(),
	}
	if mr := p.GetMaxRequestsPerConnection(); mr != nil && out.MaxRequestsPerConnection == 0 {
		out.MaxRequestsPerConnection = mr.GetValue()
	}
	if kb := p.GetMaxResponseHeadersKb(); kb != nil && (kb.GetValue() == 0 || kb.GetValue() > maxResponseHeadersKB) {
		b.fail("common_http_protocol_options.max_response_headers_kb = %d; must be 1 to %d", kb.GetValue(), maxResponseHeadersKB)
	}
	if n := p.GetMaxHeadersCount(); n != nil && n.GetValue() == 0 {
		b.fail("common_http_protocol_options.max_headers_count = 0; must be at least 1")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"idle_timeout", out.HTTP.IdleTimeout},
		{"max_connection_duration", out.HTTP.MaxConnectionDuration},
		{"max_stream_duration", out.HTTP.MaxStreamDuration},
	} {
		if d.v < 0 {
			b.fail("common_http_protocol_options.%s = %v; must not be negative", d.name, d.v)
		}
	}
}

// http1 reads one spelling of the upstream HTTP/1 codec's options, when set.
func (b *clusterBuilder) http1(at string, p *corev3.Http1ProtocolOptions, out *Cluster) {
	if p == nil {
		return
	}
	o, err := HTTP1OptionsFromProto(p)
	if err != nil {
		b.fail("%s.%v", at, err)
		return
	}
	out.HTTP1 = o
}

// endpointRules checks the rules that tie endpoints to the discovery type.
func (b *clusterBuilder) endpointRules(out *Cluster) {
	n := 0
	for li, l := range out.LoadAssignment.Localities {
		for ei, e := range l.Endpoints {
			n++
			at := fmt.Sprintf("load_assignment.endpoints[%d].lb_endpoints[%d].endpoint.address", li, ei)
			switch out.Type {
			case Static, EDS:
				if e.Address.Kind == SocketAddress && !isIP(e.Address.Host) {
					b.fail("%s.socket_address.address = %q; a %s cluster needs an IP address (use STRICT_DNS or LOGICAL_DNS for names)", at, e.Address.Host, out.Type)
				}
			case StrictDNS, LogicalDNS:
				if e.Address.Kind != SocketAddress {
					b.fail("%s: type %s needs a socket_address", at, out.Type)
				}
			}
		}
	}
	switch {
	case out.Type == LogicalDNS && n != 1:
		b.fail("load_assignment has %d endpoints; LOGICAL_DNS clusters must have exactly one", n)
	case out.Type == OriginalDst && n != 0:
		b.fail("load_assignment has %d endpoints; ORIGINAL_DST clusters create their hosts on demand and must have none", n)
	}
}

// healthCheckShape checks what every entry of health_checks needs before the cluster's one
// health check is converted (healthChecking): a checker, a timeout and an interval.
func (b *clusterBuilder) healthCheckShape(at string, hc *corev3.HealthCheck) {
	if hc.GetHttpHealthCheck() == nil && hc.GetTcpHealthCheck() == nil && hc.GetGrpcHealthCheck() == nil && hc.GetCustomHealthCheck() == nil {
		b.fail("%s: no health checker set; one of http_health_check, tcp_health_check, grpc_health_check, custom_health_check is required", at)
	}
	if d := hc.GetTimeout().AsDuration(); d <= 0 {
		b.fail("%s.timeout = %v; must be > 0", at, d)
	}
	if d := hc.GetInterval().AsDuration(); d <= 0 {
		b.fail("%s.interval = %v; must be > 0", at, d)
	}
}

// healthChecking converts health_checks and outlier_detection into the one form the health,
// outlier and cluster packages run. It comes last, so that the cluster's other errors are
// reported first. Like Envoy, it accepts at most one health check per cluster and a gRPC health
// check only on a cluster that speaks HTTP/2.
func (b *clusterBuilder) healthChecking(c *clusterv3.Cluster, out *Cluster) {
	switch n := len(c.GetHealthChecks()); {
	case n > 1:
		b.fail("health_checks has %d entries; at most one health check per cluster is supported, as in Envoy", n)
	case n == 1:
		hc, err := HealthCheckFromProto(c.GetHealthChecks()[0])
		if err != nil {
			b.failWrap("health_checks[0]: ", err)
			break
		}
		if hc.Kind == GRPCHealthCheckKind && !out.HTTP2 {
			b.fail("health_checks[0].grpc_health_check is set but the cluster has no http2_protocol_options; gRPC health checking needs an HTTP/2 cluster")
			break
		}
		out.HealthCheck = hc
	}
	od, err := OutlierDetectionFromProto(c.GetOutlierDetection())
	if err != nil {
		b.failWrap("", err)
		return
	}
	out.OutlierDetection = od
}

func (b *clusterBuilder) address(at string, a *corev3.Address) Address {
	out, err := AddressFromProto(a)
	if err != nil {
		b.fail("%s: %v", at, err)
	}
	return out
}

func durationOr(d *durationpb.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.AsDuration()
}

func u32Or(v *wrapperspb.UInt32Value, def uint32) uint32 {
	if v == nil {
		return def
	}
	return v.GetValue()
}

func u64Or(v *wrapperspb.UInt64Value, def uint64) uint64 {
	if v == nil {
		return def
	}
	return v.GetValue()
}

// auditFields reports through fail each field set in m that Legate refuses, and returns the
// paths of those it ignores.
func auditFields(m proto.Message, fail func(format string, args ...any)) []string {
	var ignored []string
	for _, n := range bootstrap.Audit("", m) {
		if n.Support == bootstrap.Refused {
			fail("%s", n)
			continue
		}
		ignored = append(ignored, n.Path)
	}
	return ignored
}
