package cors

import (
	"fmt"
	"net/http"

	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/headermatch"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/stats"
)

// Name and the type URLs select the filter in http_filters (TypeURL) and its policies in
// typed_per_filter_config (PolicyTypeURL).
const (
	Name          = "envoy.filters.http.cors"
	TypeURL       = "type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors"
	PolicyTypeURL = "type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy"
)

// Header names, in canonical form.
const (
	hdrOrigin             = "Origin"
	hdrRequestMethod      = "Access-Control-Request-Method"
	hdrRequestHeaders     = "Access-Control-Request-Headers"
	hdrRequestPrivateNet  = "Access-Control-Request-Private-Network"
	hdrAllowOrigin        = "Access-Control-Allow-Origin"
	hdrAllowCredentials   = "Access-Control-Allow-Credentials"
	hdrAllowMethods       = "Access-Control-Allow-Methods"
	hdrAllowHeaders       = "Access-Control-Allow-Headers"
	hdrMaxAge             = "Access-Control-Max-Age"
	hdrExposeHeaders      = "Access-Control-Expose-Headers"
	hdrAllowPrivateNet    = "Access-Control-Allow-Private-Network"
	detailsCorsResponse   = "cors_response"
	maxPoliciesPerRequest = 4 // weighted cluster, route, virtual host, route configuration
)

// Stats are the filter's stats (http.<stat_prefix>.cors.*).
type Stats struct {
	OriginValid   stats.Counter `stat:"origin_valid"`
	OriginInvalid stats.Counter `stat:"origin_invalid"`
}

// tristate is an optional bool (a BoolValue): unset lets a less specific policy decide.
type tristate uint8

const (
	unset tristate = iota
	isFalse
	isTrue
)

func tristateOf(b *wrapperspb.BoolValue) tristate {
	switch {
	case b == nil:
		return unset
	case b.GetValue():
		return isTrue
	}
	return isFalse
}

// Policy is one compiled CORS policy. Immutable.
type Policy struct {
	origins                            []headermatch.String
	allowMethods, allowHeaders         string
	exposeHeaders, maxAge              string
	credentials, privateNet, forwardNM tristate
	enabled, shadow                    filter.Fraction
	shadowSet                          bool
}

// compilePolicy checks and compiles a CorsPolicy; path names it in errors.
func compilePolicy(pb *corsv3.CorsPolicy, path string) (*Policy, error) {
	if err := pb.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	p := &Policy{
		allowMethods:  pb.GetAllowMethods(),
		allowHeaders:  pb.GetAllowHeaders(),
		exposeHeaders: pb.GetExposeHeaders(),
		maxAge:        pb.GetMaxAge(),
		credentials:   tristateOf(pb.GetAllowCredentials()),
		privateNet:    tristateOf(pb.GetAllowPrivateNetworkAccess()),
		forwardNM:     tristateOf(pb.GetForwardNotMatchingPreflights()),
		shadowSet:     pb.GetShadowEnabled() != nil,
	}
	for i, m := range pb.GetAllowOriginStringMatch() {
		sm, err := headermatch.CompileString(m, fmt.Sprintf("%s.allow_origin_string_match[%d]", path, i))
		if err != nil {
			return nil, err
		}
		p.origins = append(p.origins, sm)
	}
	var err error
	if p.enabled, err = filter.FractionFromProto(pb.GetFilterEnabled(), filter.Always, path+".filter_enabled"); err != nil {
		return nil, err
	}
	if p.shadow, err = filter.FractionFromProto(pb.GetShadowEnabled(), filter.Fraction{Denominator: 100}, path+".shadow_enabled"); err != nil {
		return nil, err
	}
	return p, nil
}

// PolicyFromAny compiles a typed_per_filter_config entry (a CorsPolicy).
func PolicyFromAny(cfg *anypb.Any) (*Policy, error) {
	if cfg.GetTypeUrl() != PolicyTypeURL {
		return nil, fmt.Errorf("%s: typed_per_filter_config: type %q; want %s", Name, cfg.GetTypeUrl(), PolicyTypeURL)
	}
	var pb corsv3.CorsPolicy
	if err := cfg.UnmarshalTo(&pb); err != nil {
		return nil, fmt.Errorf("%s: typed_per_filter_config: %w", Name, err)
	}
	return compilePolicy(&pb, "CorsPolicy")
}

// Filter is one configured CORS filter. Immutable; safe for concurrent use.
type Filter struct {
	name    string // the filter's name in http_filters: the key of its per-route entries
	ctx     *filter.Context
	stats   *Stats
	release func()
}

// Register registers the filter and its per-route policy (CorsPolicy); the route package
// hands the deprecated route and virtual host cors fields over as CorsPolicy entries too.
func Register(b *registry.Builder) {
	registry.Add(b, filter.HTTPFilters, Name, &corsv3.Cors{}, filter.Extension{
		New:            func(cfg *anypb.Any, ctx *filter.Context) (filter.Filter, error) { return FromAny(cfg, ctx) },
		PerRoute:       func(cfg *anypb.Any) (any, error) { return PolicyFromAny(cfg) },
		PerRouteConfig: &corsv3.CorsPolicy{},
	})
}

// FromAny builds the filter from its typed_config (nil or an empty Cors).
func FromAny(cfg *anypb.Any, ctx *filter.Context) (*Filter, error) {
	if cfg != nil {
		if cfg.GetTypeUrl() != TypeURL {
			return nil, fmt.Errorf("%s: typed_config: type %q; want %s", Name, cfg.GetTypeUrl(), TypeURL)
		}
		var pb corsv3.Cors
		if err := cfg.UnmarshalTo(&pb); err != nil {
			return nil, fmt.Errorf("%s: typed_config: %w", Name, err)
		}
	}
	return New(ctx), nil
}

// New builds the filter.
func New(ctx *filter.Context) *Filter {
	if ctx == nil {
		ctx = &filter.Context{}
	}
	name := ctx.Name
	if name == "" {
		name = Name
	}
	st, release := filter.AcquireStats[Stats](ctx.Stats, ctx.StatPrefix+"cors.")
	return &Filter{name: name, ctx: ctx, stats: st, release: release}
}

// Close drops the filter's hold on its stats.
func (f *Filter) Close() error {
	f.release()
	return nil
}

// policies are a request's policies, most specific first.
type policies struct {
	list [maxPoliciesPerRequest]*Policy
	n    int
}

// collect finds the request's policies: the typed_per_filter_config entries, or else the
// deprecated route and virtual host fields.
func (f *Filter) collect(m *route.Match) policies {
	var ps policies
	var buf [maxPoliciesPerRequest]*route.FilterConfig
	for _, fc := range m.PerFilterConfigs(f.name, buf[:0]) {
		if p, ok := fc.Config.(*Policy); ok && ps.n < len(ps.list) {
			ps.list[ps.n] = p
			ps.n++
		}
	}
	if ps.n > 0 {
		return ps
	}
	r, vh := m.LegacyCors()
	for _, v := range [2]any{r, vh} {
		if p, ok := v.(*Policy); ok {
			ps.list[ps.n] = p
			ps.n++
		}
	}
	return ps
}

func (ps *policies) all() []*Policy { return ps.list[:ps.n] }

func (ps *policies) origins() []headermatch.String {
	for _, p := range ps.all() {
		if len(p.origins) > 0 {
			return p.origins
		}
	}
	return nil
}

// str is the first non-empty value of field.
func (ps *policies) str(field func(*Policy) string) string {
	for _, p := range ps.all() {
		if v := field(p); v != "" {
			return v
		}
	}
	return ""
}

// flag is the first set value of field, or def.
func (ps *policies) flag(field func(*Policy) tristate, def bool) bool {
	for _, p := range ps.all() {
		switch field(p) {
		case isTrue:
			return true
		case isFalse:
			return false
		}
	}
	return def
}

func (ps *policies) originAllowed(origin string) bool {
	for _, m := range ps.origins() {
		if m.Match("*") || m.Match(origin) {
			return true
		}
	}
	return false
}

func allowMethods(p *Policy) string         { return p.allowMethods }
func allowHeaders(p *Policy) string         { return p.allowHeaders }
func exposeHeaders(p *Policy) string        { return p.exposeHeaders }
func maxAge(p *Policy) string               { return p.maxAge }
func credentials(p *Policy) tristate        { return p.credentials }
func privateNet(p *Policy) tristate         { return p.privateNet }
func forwardNotMatching(p *Policy) tristate { return p.forwardNM }

// kept is what a CORS request keeps for its response: the allowed origin and the policies.
type kept struct {
	origin string
	ps     policies
}

// OnRequest checks the request's origin against its route's policies, counts it, answers a
// preflight itself, and keeps what the response needs.
func (f *Filter) OnRequest(x *filter.Exchange) *filter.Reply {
	if x.Downstream == nil {
		return nil
	}
	m := x.Downstream.Route()
	if m == nil || m.Route == nil {
		return nil
	}
	ps := f.collect(m)
	if ps.n == 0 {
		return nil
	}
	first := ps.list[0]
	enabled := first.enabled.Enabled(f.ctx)
	shadow := first.shadowSet && first.shadow.Enabled(f.ctx)
	if !enabled && !shadow {
		return nil
	}
	hd := x.Request.Header
	origin, _ := headermatch.Value(hd[hdrOrigin])
	if origin == "" {
		return nil
	}
	allowed := ps.originAllowed(origin)
	if allowed {
		f.stats.OriginValid.Inc()
	} else {
		f.stats.OriginInvalid.Inc()
	}
	if !enabled {
		return nil // shadow mode: counted only
	}
	if allowed {
		x.Keep(f, &kept{origin: origin, ps: ps})
	}
	if x.Request.Method != http.MethodOptions {
		return nil
	}
	reqMethod, _ := headermatch.Value(hd[hdrRequestMethod])
	if reqMethod == "" {
		return nil
	}
	if !allowed && ps.flag(forwardNotMatching, true) {
		return nil
	}
	return f.preflight(hd, &ps, origin, allowed, reqMethod)
}

// preflight is the answer to a preflight request (200, no body).
func (f *Filter) preflight(hd http.Header, ps *policies, origin string, allowed bool, reqMethod string) *filter.Reply {
	h := http.Header{}
	if allowed {
		h.Set(hdrAllowOrigin, origin)
	}
	if ps.flag(credentials, false) {
		h.Set(hdrAllowCredentials, "true")
	}
	if v := ps.str(allowMethods); v == "*" {
		h.Set(hdrAllowMethods, reqMethod)
	} else if v != "" {
		h.Set(hdrAllowMethods, v)
	}
	if v := ps.str(allowHeaders); v == "*" {
		if rh, _ := headermatch.Value(hd[hdrRequestHeaders]); rh != "" {
			h.Set(hdrAllowHeaders, rh)
		}
	} else if v != "" {
		h.Set(hdrAllowHeaders, v)
	}
	if v := ps.str(maxAge); v != "" {
		h.Set(hdrMaxAge, v)
	}
	if ps.flag(privateNet, false) {
		if v, _ := headermatch.Value(hd[hdrRequestPrivateNet]); v == "true" {
			h.Set(hdrAllowPrivateNet, "true")
		}
	}
	// OnResponse then adds the simple-request headers too, as Envoy's encoder pass over the
	// filter's own reply does.
	return &filter.Reply{Status: http.StatusOK, Details: detailsCorsResponse, Header: h}
}

// OnResponse adds the access-control headers to the response of an allowed CORS request.
func (f *Filter) OnResponse(x *filter.Exchange, h http.Header) {
	k, ok := x.Kept(f).(*kept)
	if !ok || k == nil {
		return
	}
	h.Set(hdrAllowOrigin, k.origin)
	if k.ps.flag(credentials, false) {
		h.Set(hdrAllowCredentials, "true")
	}
	if v := k.ps.str(exposeHeaders); v != "" {
		h.Set(hdrExposeHeaders, v)
	}
}
