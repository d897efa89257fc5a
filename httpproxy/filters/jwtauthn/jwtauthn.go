package jwtauthn

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/stats"
)

// Name and the type URLs select the filter in http_filters and typed_per_filter_config.
const (
	Name            = "envoy.filters.http.jwt_authn"
	TypeURL         = "type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication"
	PerRouteTypeURL = "type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.PerRouteConfig"
)

// reqKind is what a requirement asks.
type reqKind uint8

const (
	reqProvider reqKind = iota
	reqAny
	reqAll
	reqAllowMissingOrFailed
	reqAllowMissing
)

// requirement is a compiled JwtRequirement.
type requirement struct {
	kind      reqKind
	provider  *provider
	audiences []string // provider_and_audiences
	subs      []*requirement
}

// filterStats are Envoy's jwt_authn.* counters.
type filterStats struct {
	Allowed             stats.Counter `stat:"allowed"`
	Denied              stats.Counter `stat:"denied"`
	CorsPreflightBypass stats.Counter `stat:"cors_preflight_bypassed"`
	JwksFetchSuccess    stats.Counter `stat:"jwks_fetch_success"`
	JwksFetchFailed     stats.Counter `stat:"jwks_fetch_failed"`
}

// Filter is one configured jwt_authn filter. Immutable after New but for the remote JWKS
// caches, which lock; safe for concurrent use.
type Filter struct {
	name         string
	providers    map[string]*provider
	all          []*provider // every provider, by name (allow_missing*)
	rules        *route.Table
	ruleReqs     []*requirement // by rule index; nil: the rule requires nothing
	reqMap       map[string]*requirement
	bypassCORS   bool
	stripFailure bool
	now          func() time.Time
	stats        *filterStats
	release      func()
}

// PerRoute is a compiled PerRouteConfig.
type PerRoute struct {
	disabled bool
	reqName  string
}

// Register registers the filter and its per-route configuration.
func Register(b *registry.Builder) {
	registry.Add(b, filter.HTTPFilters, Name, &jwtv3.JwtAuthentication{}, filter.Extension{
		New:            func(cfg *anypb.Any, ctx *filter.Context) (filter.Filter, error) { return FromAny(cfg, ctx) },
		PerRoute:       func(cfg *anypb.Any) (any, error) { return PerRouteFromAny(cfg) },
		PerRouteConfig: &jwtv3.PerRouteConfig{},
	})
}

// FromAny builds the filter from its typed_config.
func FromAny(cfg *anypb.Any, ctx *filter.Context) (*Filter, error) {
	if cfg == nil {
		return nil, fmt.Errorf("%s: typed_config is required", Name)
	}
	var pb jwtv3.JwtAuthentication
	if err := cfg.UnmarshalTo(&pb); err != nil {
		return nil, fmt.Errorf("%s: typed_config: %w", Name, err)
	}
	return New(&pb, ctx)
}

// New builds the filter from its configuration.
func New(pb *jwtv3.JwtAuthentication, ctx *filter.Context) (*Filter, error) {
	if err := pb.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	if pb.GetFilterStateRules() != nil {
		return nil, fmt.Errorf("%s: filter_state_rules: not implemented by Legate", Name)
	}
	f := &Filter{name: Name, providers: map[string]*provider{}, reqMap: map[string]*requirement{},
		bypassCORS: pb.GetBypassCorsPreflight(), stripFailure: pb.GetStripFailureResponse(), now: clock.Real().Now}
	var st *filter.Stats
	hcm := ""
	if ctx != nil {
		st, hcm = ctx.Stats, ctx.StatPrefix
		if ctx.Name != "" {
			f.name = ctx.Name
		}
		f.now = ctx.Clock()
	}
	f.stats, f.release = filter.AcquireStats[filterStats](st, hcm+"jwt_authn."+pb.GetStatPrefix())
	if err := f.compile(pb, ctx); err != nil {
		f.release()
		return nil, err
	}
	return f, nil
}

func (f *Filter) compile(pb *jwtv3.JwtAuthentication, ctx *filter.Context) error {
	names := make([]string, 0, len(pb.GetProviders()))
	for n := range pb.GetProviders() {
		names = append(names, n)
	}
	sort.Strings(names)
	fetched := func(ok bool) {
		if ok {
			f.stats.JwksFetchSuccess.Inc()
		} else {
			f.stats.JwksFetchFailed.Inc()
		}
	}
	for _, n := range names {
		p, err := compileProvider(n, pb.GetProviders()[n], ctx, f.now, fetched)
		if err != nil {
			return err
		}
		f.providers[n] = p
		f.all = append(f.all, p)
	}
	for n, r := range pb.GetRequirementMap() {
		req, err := f.compileReq(r, fmt.Sprintf("%s: requirement_map[%q]", Name, n))
		if err != nil {
			return err
		}
		f.reqMap[n] = req
	}
	return f.compileRules(pb.GetRules())
}

// compileRules compiles the rules' matches into a route table whose route i is rule i.
func (f *Filter) compileRules(rules []*jwtv3.RequirementRule) error {
	if len(rules) == 0 {
		return nil
	}
	vh := &routev3.VirtualHost{Name: "jwt_authn", Domains: []string{"*"}}
	for i, r := range rules {
		path := fmt.Sprintf("%s: rules[%d]", Name, i)
		vh.Routes = append(vh.Routes, &routev3.Route{Name: strconv.Itoa(i), Match: r.GetMatch(),
			Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 200}}})
		var req *requirement
		var err error
		switch {
		case r.GetRequires() != nil:
			req, err = f.compileReq(r.GetRequires(), path+".requires")
		case r.GetRequirementName() != "":
			var ok bool
			if req, ok = f.reqMap[r.GetRequirementName()]; !ok {
				err = fmt.Errorf("%s.requirement_name = %q: not in requirement_map", path, r.GetRequirementName())
			}
		}
		if err != nil {
			return err
		}
		f.ruleReqs = append(f.ruleReqs, req)
	}
	t, err := route.Compile(&routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{vh}}, route.Options{})
	if err != nil {
		return fmt.Errorf("%s: rules: %w", Name, err)
	}
	f.rules = t
	return nil
}

func (f *Filter) compileReq(r *jwtv3.JwtRequirement, path string) (*requirement, error) {
	switch t := r.GetRequiresType().(type) {
	case *jwtv3.JwtRequirement_ProviderName:
		p, ok := f.providers[t.ProviderName]
		if !ok {
			return nil, fmt.Errorf("%s.provider_name = %q: no such provider", path, t.ProviderName)
		}
		return &requirement{kind: reqProvider, provider: p}, nil
	case *jwtv3.JwtRequirement_ProviderAndAudiences:
		p, ok := f.providers[t.ProviderAndAudiences.GetProviderName()]
		if !ok {
			return nil, fmt.Errorf("%s.provider_and_audiences.provider_name = %q: no such provider", path, t.ProviderAndAudiences.GetProviderName())
		}
		return &requirement{kind: reqProvider, provider: p, audiences: t.ProviderAndAudiences.GetAudiences()}, nil
	case *jwtv3.JwtRequirement_RequiresAny:
		return f.compileList(reqAny, t.RequiresAny.GetRequirements(), path+".requires_any")
	case *jwtv3.JwtRequirement_RequiresAll:
		return f.compileList(reqAll, t.RequiresAll.GetRequirements(), path+".requires_all")
	case *jwtv3.JwtRequirement_AllowMissingOrFailed:
		return &requirement{kind: reqAllowMissingOrFailed}, nil
	case *jwtv3.JwtRequirement_AllowMissing:
		return &requirement{kind: reqAllowMissing}, nil
	case *jwtv3.JwtRequirement_ExtractOnlyWithoutValidation:
		return nil, fmt.Errorf("%s.extract_only_without_validation: not implemented by Legate", path)
	}
	return nil, fmt.Errorf("%s: no requirement set", path)
}

func (f *Filter) compileList(kind reqKind, rs []*jwtv3.JwtRequirement, path string) (*requirement, error) {
	out := &requirement{kind: kind}
	for i, r := range rs {
		sub, err := f.compileReq(r, fmt.Sprintf("%s.requirements[%d]", path, i))
		if err != nil {
			return nil, err
		}
		out.subs = append(out.subs, sub)
	}
	return out, nil
}

// PerRouteFromAny compiles a typed_per_filter_config entry (PerRouteConfig).
func PerRouteFromAny(cfg *anypb.Any) (*PerRoute, error) {
	var pb jwtv3.PerRouteConfig
	if err := cfg.UnmarshalTo(&pb); err != nil {
		return nil, fmt.Errorf("%s: typed_per_filter_config: %w", Name, err)
	}
	if err := pb.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: typed_per_filter_config: %w", Name, err)
	}
	return &PerRoute{disabled: pb.GetDisabled(), reqName: pb.GetRequirementName()}, nil
}

// Close releases the filter's stats.
func (f *Filter) Close() error {
	f.release()
	return nil
}

// requirementFor is the request's requirement: its route's PerRouteConfig, else the first
// matching rule's; nil requires nothing. ok is false for a route naming an unknown
// requirement.
func (f *Filter) requirementFor(x *filter.Exchange) (req *requirement, ok bool) {
	if pc, found := x.PerFilterConfig(f.name); found {
		if pr, isPR := pc.Config.(*PerRoute); isPR {
			if pr.disabled {
				return nil, true
			}
			req, ok = f.reqMap[pr.reqName]
			return req, ok
		}
	}
	if f.rules == nil {
		return nil, true
	}
	m := f.rules.Route(x.Request)
	if m == nil || m.Route == nil {
		return nil, true
	}
	i, err := strconv.Atoi(m.Route.Name)
	if err != nil || i >= len(f.ruleReqs) {
		return nil, true
	}
	return f.ruleReqs[i], true
}

// OnRequest verifies the request's tokens against its requirement.
func (f *Filter) OnRequest(x *filter.Exchange) *filter.Reply {
	if f.bypassCORS && x.Request.Method == http.MethodOptions && x.Request.Header.Get("Origin") != "" &&
		x.Request.Header.Get("Access-Control-Request-Method") != "" {
		f.stats.CorsPreflightBypass.Inc()
		return nil
	}
	req, ok := f.requirementFor(x)
	if !ok {
		f.stats.Denied.Inc()
		return &filter.Reply{Status: http.StatusForbidden, Body: "Jwt requirement is not configured", Details: "jwt_authn_access_denied{unknown_requirement}"}
	}
	if req == nil {
		return nil
	}
	v := verification{f: f, x: x, ctx: context.Background(), now: f.now()}
	if err := v.check(req); err != nil {
		f.stats.Denied.Inc()
		return f.deny(x, err)
	}
	f.stats.Allowed.Inc()
	return nil
}

// deny is Envoy's failure answer: 401 (403 for a disallowed audience) with the failure as
// body and a WWW-Authenticate challenge naming the request.
func (f *Filter) deny(x *filter.Exchange, err error) *filter.Reply {
	status := http.StatusUnauthorized
	if errors.Is(err, errAudience) {
		status = http.StatusForbidden
	}
	r := &filter.Reply{Status: status, Body: err.Error(), Details: "jwt_authn_access_denied{" + strings.ReplaceAll(err.Error(), " ", "_") + "}"}
	if f.stripFailure {
		r.Body = ""
		return r
	}
	challenge := `Bearer realm="` + x.Request.Scheme + "://" + x.Request.Authority + x.Request.PathOnly() + `"`
	if !errors.Is(err, errMissing) {
		challenge += `, error="invalid_token"`
	}
	r.Header = http.Header{"Www-Authenticate": {challenge}}
	return r
}

// verification is one request's check.
type verification struct {
	f   *Filter
	x   *filter.Exchange
	ctx context.Context
	now time.Time
}

func (v *verification) check(r *requirement) error {
	switch r.kind {
	case reqProvider:
		return v.provider(r.provider, r.audiences)
	case reqAny:
		var first error
		for _, s := range r.subs {
			err := v.check(s)
			if err == nil {
				return nil
			}
			if first == nil || errors.Is(first, errMissing) {
				first = err
			}
		}
		return first
	case reqAll:
		for _, s := range r.subs {
			if err := v.check(s); err != nil {
				return err
			}
		}
		return nil
	}
	// allow_missing and allow_missing_or_failed: every provider's token that is there is
	// verified (and forwarded on success); a failure fails allow_missing only.
	for _, p := range v.f.all {
		err := v.provider(p, nil)
		if err != nil && !errors.Is(err, errMissing) && r.kind == reqAllowMissing {
			return err
		}
	}
	return nil
}

// provider verifies p's token and applies its success: the token removed unless forward, the
// payload forwarded in a header and written to dynamic metadata.
func (v *verification) provider(p *provider, audiences []string) error {
	token, loc, ok := p.extract(v.x)
	if !ok {
		return errMissing
	}
	payload, err := p.verify(v.ctx, token, audiences, v.now)
	if err != nil {
		return err
	}
	h := v.x.Request.Header
	if !p.forward && loc.header != "" {
		h.Del(loc.header)
	}
	if p.payloadHeader != "" {
		enc := base64.RawURLEncoding
		if p.padPayload {
			enc = base64.URLEncoding
		}
		h.Set(p.payloadHeader, enc.EncodeToString(payload))
	}
	if p.payloadInMD != "" {
		var st structpb.Struct
		if err := st.UnmarshalJSON(payload); err == nil {
			v.x.SetMetadata(Name, map[string]*structpb.Value{p.payloadInMD: structpb.NewStructValue(&st)})
		}
	}
	return nil
}

// OnResponse does nothing: the filter only checks requests.
func (f *Filter) OnResponse(*filter.Exchange, http.Header) {}
