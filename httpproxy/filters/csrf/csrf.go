package csrf

import (
	"fmt"
	"net/http"
	"net/url"

	csrfv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/csrf/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/internal/headermatch"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/stats"
)

// Name and TypeURL select the filter in http_filters and its per-route policy (the same
// message) in typed_per_filter_config.
const (
	Name    = "envoy.filters.http.csrf"
	TypeURL = "type.googleapis.com/envoy.extensions.filters.http.csrf.v3.CsrfPolicy"
)

// The answer to a cross-origin request, as Envoy's.
const (
	replyBody    = "Invalid origin"
	replyDetails = "csrf_origin_mismatch"
)

// Stats are the filter's stats (http.<stat_prefix>.csrf.*).
type Stats struct {
	MissingSourceOrigin stats.Counter `stat:"missing_source_origin"`
	RequestInvalid      stats.Counter `stat:"request_invalid"`
	RequestValid        stats.Counter `stat:"request_valid"`
}

// Policy is one compiled CsrfPolicy. Immutable.
type Policy struct {
	enabled, shadow filter.Fraction
	shadowSet       bool
	additional      []headermatch.String
}

// Register registers the filter; its per-route policy is its own message.
func Register(b *registry.Builder) {
	registry.Add(b, filter.HTTPFilters, Name, &csrfv3.CsrfPolicy{}, filter.Extension{
		New:            func(cfg *anypb.Any, ctx *filter.Context) (filter.Filter, error) { return FromAny(cfg, ctx) },
		PerRoute:       func(cfg *anypb.Any) (any, error) { return policyFromAny(cfg, "typed_per_filter_config") },
		PerRouteConfig: &csrfv3.CsrfPolicy{},
	})
}

func policyFromAny(cfg *anypb.Any, path string) (*Policy, error) {
	if cfg.GetTypeUrl() != TypeURL {
		return nil, fmt.Errorf("%s: %s: type %q; want %s", Name, path, cfg.GetTypeUrl(), TypeURL)
	}
	var pb csrfv3.CsrfPolicy
	if err := cfg.UnmarshalTo(&pb); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", Name, path, err)
	}
	p, err := compile(&pb, path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return p, nil
}

func compile(pb *csrfv3.CsrfPolicy, path string) (*Policy, error) {
	if err := pb.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	p := &Policy{shadowSet: pb.GetShadowEnabled() != nil}
	var err error
	if p.enabled, err = filter.FractionFromProto(pb.GetFilterEnabled(), filter.Always, path+".filter_enabled"); err != nil {
		return nil, err
	}
	if p.shadow, err = filter.FractionFromProto(pb.GetShadowEnabled(), filter.Fraction{Denominator: 100}, path+".shadow_enabled"); err != nil {
		return nil, err
	}
	for i, m := range pb.GetAdditionalOrigins() {
		sm, err := headermatch.CompileString(m, fmt.Sprintf("%s.additional_origins[%d]", path, i))
		if err != nil {
			return nil, err
		}
		p.additional = append(p.additional, sm)
	}
	return p, nil
}

// Filter is one configured CSRF filter. Immutable; safe for concurrent use.
type Filter struct {
	name    string
	ctx     *filter.Context
	policy  *Policy
	stats   *Stats
	release func()
}

// FromAny builds the filter from its typed_config, which is required (filter_enabled is).
func FromAny(cfg *anypb.Any, ctx *filter.Context) (*Filter, error) {
	p, err := policyFromAny(cfg, "typed_config")
	if err != nil {
		return nil, err
	}
	if ctx == nil {
		ctx = &filter.Context{}
	}
	f := &Filter{name: ctx.Name, ctx: ctx, policy: p}
	if f.name == "" {
		f.name = Name
	}
	f.stats, f.release = filter.AcquireStats[Stats](ctx.Stats, ctx.StatPrefix+"csrf.")
	return f, nil
}

// Close drops the filter's hold on its stats.
func (f *Filter) Close() error {
	f.release()
	return nil
}

func (f *Filter) policyFor(x *filter.Exchange) *Policy {
	if pc, ok := x.PerFilterConfig(f.name); ok {
		if p, ok := pc.Config.(*Policy); ok {
			return p
		}
	}
	return f.policy
}

func modifies(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch:
		return true
	}
	return false
}

// OnRequest checks a state-changing request's source origin against its destination.
func (f *Filter) OnRequest(x *filter.Exchange) *filter.Reply {
	p := f.policyFor(x)
	enabled := p.enabled.Enabled(f.ctx)
	shadow := p.shadowSet && p.shadow.Enabled(f.ctx)
	if !enabled && !shadow {
		return nil
	}
	req := x.Request
	if !modifies(req.Method) {
		return nil
	}
	valid := true
	source := hostAndPort(headerValue(req.Header, "Origin"))
	if source == "" {
		source = hostAndPort(headerValue(req.Header, "Referer"))
	}
	if source == "" {
		valid = false
		f.stats.MissingSourceOrigin.Inc()
	}
	// The destination is the request's host as sent: Envoy's host and port of
	// <scheme>://<host> is the host itself.
	if !p.accepts(source, req.Authority) {
		valid = false
		f.stats.RequestInvalid.Inc()
	}
	if valid {
		f.stats.RequestValid.Inc()
		return nil
	}
	if !enabled {
		return nil // shadow mode: counted only
	}
	return &filter.Reply{Status: http.StatusForbidden, Body: replyBody, Details: replyDetails}
}

// accepts reports whether source is the destination or one of the additional origins.
func (p *Policy) accepts(source, target string) bool {
	if source == target {
		return true
	}
	for i := range p.additional {
		if p.additional[i].Match(source) {
			return true
		}
	}
	return false
}

func headerValue(h http.Header, key string) string {
	v, _ := headermatch.Value(h[key])
	return v
}

// hostAndPort is the host and port of an absolute URL as written, or the value itself when
// it is not one (Origin: null), as Envoy's.
func hostAndPort(absolute string) string {
	if absolute == "" {
		return ""
	}
	u, err := url.Parse(absolute)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return absolute
	}
	return u.Host
}

// OnResponse does nothing: the filter acts on requests only.
func (f *Filter) OnResponse(*filter.Exchange, http.Header) {}
