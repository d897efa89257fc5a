package rbac

import (
	"fmt"
	"net/http"
	"sort"

	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	rbachttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/stats"
)

// Name and the type URLs select the filter in http_filters (TypeURL) and in
// typed_per_filter_config (PerRouteTypeURL).
const (
	Name            = "envoy.filters.http.rbac"
	TypeURL         = "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC"
	PerRouteTypeURL = "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBACPerRoute"
)

// What Envoy's filter answers and records.
const (
	deniedBody     = "RBAC: access denied"
	detailsPrefix  = "rbac_access_denied_matched_policy["
	resultAllowed  = "allowed"
	resultDenied   = "denied"
	logHintNS      = "envoy.common"
	logHintKey     = "access_log_hint"
	shadowIDKey    = "shadow_effective_policy_id"
	shadowResKey   = "shadow_engine_result"
	enforcedIDKey  = "enforced_effective_policy_id"
	enforcedResKey = "enforced_engine_result"
)

// policy is one compiled policy: it matches when a permission and a principal match.
type policy struct {
	name       string
	permission matcher // any of the permissions
	principal  matcher // any of the principals
}

// engine is one compiled RBAC (rules or shadow_rules). Immutable.
type engine struct {
	action   rbacv3.RBAC_Action
	policies []policy // by name, the order Envoy's engine tries them in
}

// decide evaluates the engine: whether the request is allowed and the policy that decided
// (the first matching one by name; "" when none matched).
func (e *engine) decide(x *filter.Exchange, c *conn) (allowed bool, id string) {
	for i := range e.policies {
		p := &e.policies[i]
		if p.permission.match(x, c) && p.principal.match(x, c) {
			id = p.name
			break
		}
	}
	switch e.action {
	case rbacv3.RBAC_ALLOW:
		return id != "", id
	case rbacv3.RBAC_DENY:
		return id == "", id
	}
	return true, id // LOG: never denies
}

func compileEngine(pb *rbacv3.RBAC, path string) (*engine, error) {
	if pb == nil {
		return nil, nil
	}
	if pb.GetAuditLoggingOptions() != nil {
		return nil, fmt.Errorf("%s.audit_logging_options: RBAC audit loggers are not implemented by Legate", path)
	}
	switch pb.GetAction() {
	case rbacv3.RBAC_ALLOW, rbacv3.RBAC_DENY, rbacv3.RBAC_LOG:
	default:
		return nil, fmt.Errorf("%s.action = %d: not a valid action", path, pb.GetAction())
	}
	e := &engine{action: pb.GetAction()}
	names := make([]string, 0, len(pb.GetPolicies()))
	for n := range pb.GetPolicies() {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p, err := compilePolicy(pb.GetPolicies()[n], fmt.Sprintf("%s.policies[%q]", path, n))
		if err != nil {
			return nil, err
		}
		p.name = n
		e.policies = append(e.policies, p)
	}
	return e, nil
}

func compilePolicy(pb *rbacv3.Policy, path string) (policy, error) {
	if pb.GetCondition() != nil || pb.GetCheckedCondition() != nil || pb.GetCelConfig() != nil {
		return policy{}, fmt.Errorf("%s: CEL conditions (condition, checked_condition, cel_config) are not implemented by Legate", path)
	}
	perm, err := compilePermissions(pb.GetPermissions(), path+".permissions", false)
	if err != nil {
		return policy{}, err
	}
	prin, err := compilePrincipals(pb.GetPrincipals(), path+".principals", false)
	if err != nil {
		return policy{}, err
	}
	return policy{permission: perm, principal: prin}, nil
}

// enforcedStats are rbac.<rules_stat_prefix>*; shadowStats rbac.<shadow_rules_stat_prefix>*.
type enforcedStats struct {
	Allowed stats.Counter `stat:"allowed"`
	Denied  stats.Counter `stat:"denied"`
}

type shadowStats struct {
	Allowed stats.Counter `stat:"shadow_allowed"`
	Denied  stats.Counter `stat:"shadow_denied"`
}

// rules is one RBAC message compiled: the filter's own, or a route's RBACPerRoute.
type rules struct {
	enforced, shadow *engine // nil: none
	// The metadata keys, prefixed as Envoy prefixes them with the stat prefixes.
	enforcedIDKey, enforcedResKey string
	shadowIDKey, shadowResKey     string
}

// Filter is one configured RBAC filter. Immutable; safe for concurrent use.
type Filter struct {
	rules    rules
	enforced *enforcedStats
	shadow   *shadowStats
	release  []func()
}

// PerRoute is a compiled RBACPerRoute: it replaces the filter's rules on its route (an empty
// one leaves the route without rules, which disables the filter there, as in Envoy).
type PerRoute struct{ rules rules }

// Register registers the filter and its per-route configuration (RBACPerRoute).
func Register(b *registry.Builder) {
	registry.Add(b, filter.HTTPFilters, Name, &rbachttpv3.RBAC{}, filter.Extension{
		New:            func(cfg *anypb.Any, ctx *filter.Context) (filter.Filter, error) { return FromAny(cfg, ctx) },
		PerRoute:       func(cfg *anypb.Any) (any, error) { return PerRouteFromAny(cfg) },
		PerRouteConfig: &rbachttpv3.RBACPerRoute{},
	})
}

// FromAny builds the filter from its typed_config.
func FromAny(cfg *anypb.Any, ctx *filter.Context) (*Filter, error) {
	if cfg == nil {
		return nil, fmt.Errorf("%s: typed_config is required", Name)
	}
	var pb rbachttpv3.RBAC
	if err := cfg.UnmarshalTo(&pb); err != nil {
		return nil, fmt.Errorf("%s: typed_config: %w", Name, err)
	}
	return New(&pb, ctx)
}

// New builds the filter from its configuration.
func New(pb *rbachttpv3.RBAC, ctx *filter.Context) (*Filter, error) {
	r, err := compileRules(pb, Name)
	if err != nil {
		return nil, err
	}
	f := &Filter{rules: r}
	var rel1, rel2 func()
	f.enforced, rel1 = filter.AcquireStats[enforcedStats](ctx.Stats, ctx.StatPrefix+"rbac."+pb.GetRulesStatPrefix())
	f.shadow, rel2 = filter.AcquireStats[shadowStats](ctx.Stats, ctx.StatPrefix+"rbac."+pb.GetShadowRulesStatPrefix())
	f.release = []func(){rel1, rel2}
	return f, nil
}

// Close releases the filter's stats.
func (f *Filter) Close() error {
	for _, r := range f.release {
		r()
	}
	return nil
}

func compileRules(pb *rbachttpv3.RBAC, path string) (rules, error) {
	if err := pb.ValidateAll(); err != nil {
		return rules{}, fmt.Errorf("%s: %w", path, err)
	}
	if pb.GetMatcher() != nil {
		return rules{}, fmt.Errorf("%s.matcher: the matcher API form of RBAC is not implemented by Legate (use rules)", path)
	}
	if pb.GetShadowMatcher() != nil {
		return rules{}, fmt.Errorf("%s.shadow_matcher: the matcher API form of RBAC is not implemented by Legate (use shadow_rules)", path)
	}
	if pb.GetTrackPerRuleStats() {
		return rules{}, fmt.Errorf("%s.track_per_rule_stats: per-policy stats are not implemented by Legate", path)
	}
	r := rules{
		enforcedIDKey: pb.GetRulesStatPrefix() + enforcedIDKey, enforcedResKey: pb.GetRulesStatPrefix() + enforcedResKey,
		shadowIDKey: pb.GetShadowRulesStatPrefix() + shadowIDKey, shadowResKey: pb.GetShadowRulesStatPrefix() + shadowResKey,
	}
	var err error
	if r.enforced, err = compileEngine(pb.GetRules(), path+".rules"); err != nil {
		return rules{}, err
	}
	if r.shadow, err = compileEngine(pb.GetShadowRules(), path+".shadow_rules"); err != nil {
		return rules{}, err
	}
	return r, nil
}

// PerRouteFromAny compiles a typed_per_filter_config entry (RBACPerRoute).
func PerRouteFromAny(cfg *anypb.Any) (*PerRoute, error) {
	var pb rbachttpv3.RBACPerRoute
	if err := cfg.UnmarshalTo(&pb); err != nil {
		return nil, fmt.Errorf("%s: typed_per_filter_config: %w", Name, err)
	}
	if pb.GetRbac() == nil {
		return &PerRoute{}, nil
	}
	r, err := compileRules(pb.GetRbac(), Name+": typed_per_filter_config.rbac")
	if err != nil {
		return nil, err
	}
	return &PerRoute{rules: r}, nil
}

// rulesFor returns the rules that apply to the request: its route's RBACPerRoute, else the
// filter's own.
func (f *Filter) rulesFor(x *filter.Exchange) *rules {
	if pc, ok := x.PerFilterConfig(Name); ok {
		if pr, ok := pc.Config.(*PerRoute); ok {
			return &pr.rules
		}
	}
	return &f.rules
}

// OnRequest evaluates the shadow rules (stats and dynamic metadata only), then the enforced
// rules, answering 403 when they deny the request.
func (f *Filter) OnRequest(x *filter.Exchange) *filter.Reply {
	r := f.rulesFor(x)
	var c conn
	if r.shadow != nil {
		ok, id := r.shadow.decide(x, &c)
		count(ok, &f.shadow.Allowed, &f.shadow.Denied)
		record(x, r.shadowIDKey, r.shadowResKey, ok, id)
	}
	if r.enforced == nil {
		return nil
	}
	ok, id := r.enforced.decide(x, &c)
	count(ok, &f.enforced.Allowed, &f.enforced.Denied)
	record(x, r.enforcedIDKey, r.enforcedResKey, ok, id)
	if r.enforced.action == rbacv3.RBAC_LOG {
		x.SetMetadata(logHintNS, map[string]*structpb.Value{logHintKey: structpb.NewBoolValue(id != "")})
	}
	if ok {
		return nil
	}
	if id == "" {
		id = "none"
	}
	return &filter.Reply{Status: http.StatusForbidden, Body: deniedBody, Details: detailsPrefix + id + "]"}
}

func count(allowed bool, yes, no *stats.Counter) {
	if allowed {
		yes.Inc()
	} else {
		no.Inc()
	}
}

// record writes an engine's result, and the policy that decided it, to the filter's dynamic
// metadata.
func record(x *filter.Exchange, idKey, resKey string, allowed bool, id string) {
	res := resultDenied
	if allowed {
		res = resultAllowed
	}
	md := map[string]*structpb.Value{resKey: structpb.NewStringValue(res)}
	if id != "" {
		md[idKey] = structpb.NewStringValue(id)
	}
	x.SetMetadata(Name, md)
}

// OnResponse does nothing: the filter only decides requests.
func (f *Filter) OnResponse(*filter.Exchange, http.Header) {}
