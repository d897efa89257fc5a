package headermutation

import (
	"fmt"
	"net/http"
	"net/textproto"
	"strings"

	mutationv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_mutation/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/headermatch"
	"github.com/legateproxy/legate/internal/registry"
)

// Name and the type URLs select the filter in http_filters (TypeURL) and in
// typed_per_filter_config (PerRouteTypeURL).
const (
	Name            = "envoy.filters.http.header_mutation"
	TypeURL         = "type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation"
	PerRouteTypeURL = "type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutationPerRoute"
	maxLevels       = 4 // weighted cluster, route, virtual host, route configuration
)

// op is one compiled HeaderMutation.
type op struct {
	add     *route.HeaderOps // append
	remove  string           // remove: canonical name
	matcher *headermatch.String
}

func (o *op) apply(h http.Header, e *accesslog.Entry) {
	switch {
	case o.add != nil:
		o.add.ApplyEntry(h, e)
	case o.remove != "":
		delete(h, o.remove)
	case o.matcher != nil:
		for k := range h {
			if o.matcher.Match(strings.ToLower(k)) {
				delete(h, k)
			}
		}
	}
}

// Mutations are one level's compiled request and response mutations. Immutable.
type Mutations struct {
	request, response []op
}

func apply(ops []op, h http.Header, e *accesslog.Entry) {
	for i := range ops {
		ops[i].apply(h, e)
	}
}

// entry is what value formatters see: in an upstream filter chain, the attempt's upstream
// host and cluster (%UPSTREAM_HOST%, %UPSTREAM_CLUSTER%); nil otherwise.
func entry(x *filter.Exchange) *accesslog.Entry {
	if x.Upstream == nil {
		return nil
	}
	return &accesslog.Entry{UpstreamHost: x.Upstream.Host, UpstreamCluster: x.Upstream.Cluster}
}

func compileMutations(m *hmv3.Mutations, path string) (*Mutations, error) {
	switch {
	case len(m.GetQueryParameterMutations()) > 0:
		return nil, fmt.Errorf("%s.query_parameter_mutations: not implemented by Legate", path)
	case len(m.GetRequestTrailersMutations()) > 0:
		return nil, fmt.Errorf("%s.request_trailers_mutations: not implemented by Legate", path)
	case len(m.GetResponseTrailersMutations()) > 0:
		return nil, fmt.Errorf("%s.response_trailers_mutations: not implemented by Legate", path)
	case len(m.GetFormatters()) > 0:
		return nil, fmt.Errorf("%s.formatters: not implemented by Legate", path)
	}
	out := &Mutations{}
	var err error
	if out.request, err = compileOps(m.GetRequestMutations(), path+".request_mutations"); err != nil {
		return nil, err
	}
	if out.response, err = compileOps(m.GetResponseMutations(), path+".response_mutations"); err != nil {
		return nil, err
	}
	return out, nil
}

func compileOps(in []*mutationv3.HeaderMutation, path string) ([]op, error) {
	var out []op
	for i, m := range in {
		p := fmt.Sprintf("%s[%d]", path, i)
		var o op
		switch a := m.GetAction().(type) {
		case *mutationv3.HeaderMutation_Append:
			ops, err := route.CompileHeaderOps([]*corev3.HeaderValueOption{a.Append}, nil, p+".", "append")
			if err != nil {
				return nil, err
			}
			o.add = ops
		case *mutationv3.HeaderMutation_Remove:
			if a.Remove == "" || a.Remove[0] == ':' || strings.EqualFold(a.Remove, "host") {
				return nil, fmt.Errorf("%s.remove = %q: pseudo-headers, host and empty names are not implemented by Legate", p, a.Remove)
			}
			o.remove = textproto.CanonicalMIMEHeaderKey(a.Remove)
		case *mutationv3.HeaderMutation_RemoveOnMatch_:
			sm, err := headermatch.CompileString(a.RemoveOnMatch.GetKeyMatcher(), p+".remove_on_match.key_matcher")
			if err != nil {
				return nil, err
			}
			o.matcher = &sm
		default:
			return nil, fmt.Errorf("%s: no action", p)
		}
		out = append(out, o)
	}
	return out, nil
}

// Register registers the filter and its per-route configuration (HeaderMutationPerRoute).
func Register(b *registry.Builder) {
	registry.Add(b, filter.HTTPFilters, Name, &hmv3.HeaderMutation{}, filter.Extension{
		New:            func(cfg *anypb.Any, ctx *filter.Context) (filter.Filter, error) { return FromAny(cfg, ctx) },
		PerRoute:       func(cfg *anypb.Any) (any, error) { return PerRouteFromAny(cfg) },
		PerRouteConfig: &hmv3.HeaderMutationPerRoute{},
	})
}

// PerRouteFromAny compiles a typed_per_filter_config entry (HeaderMutationPerRoute).
func PerRouteFromAny(cfg *anypb.Any) (*Mutations, error) {
	if cfg.GetTypeUrl() != PerRouteTypeURL {
		return nil, fmt.Errorf("%s: typed_per_filter_config: type %q; want %s", Name, cfg.GetTypeUrl(), PerRouteTypeURL)
	}
	var pb hmv3.HeaderMutationPerRoute
	if err := cfg.UnmarshalTo(&pb); err != nil {
		return nil, fmt.Errorf("%s: typed_per_filter_config: %w", Name, err)
	}
	if err := pb.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: typed_per_filter_config: %w", Name, err)
	}
	m, err := compileMutations(pb.GetMutations(), "typed_per_filter_config.mutations")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return m, nil
}

// Filter is one configured header mutation filter. Immutable; safe for concurrent use.
type Filter struct {
	name         string
	mutations    *Mutations
	specificLast bool // most_specific_header_mutations_wins
}

// FromAny builds the filter from its typed_config (nil is no filter-level mutations).
func FromAny(cfg *anypb.Any, ctx *filter.Context) (*Filter, error) {
	var pb hmv3.HeaderMutation
	if cfg != nil {
		if cfg.GetTypeUrl() != TypeURL {
			return nil, fmt.Errorf("%s: typed_config: type %q; want %s", Name, cfg.GetTypeUrl(), TypeURL)
		}
		if err := cfg.UnmarshalTo(&pb); err != nil {
			return nil, fmt.Errorf("%s: typed_config: %w", Name, err)
		}
	}
	if err := pb.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	m, err := compileMutations(pb.GetMutations(), "mutations")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	f := &Filter{name: Name, mutations: m, specificLast: pb.GetMostSpecificHeaderMutationsWins()}
	if ctx != nil && ctx.Name != "" {
		f.name = ctx.Name
	}
	return f, nil
}

// levels calls fn with the mutations of the request's levels in the order they apply.
func (f *Filter) levels(x *filter.Exchange, fn func(*Mutations)) {
	var buf [maxLevels]*route.FilterConfig
	cfgs := x.PerFilterConfigs(f.name, buf[:0]) // most specific first
	if f.specificLast {
		fn(f.mutations)
		for i := len(cfgs) - 1; i >= 0; i-- {
			if m, ok := cfgs[i].Config.(*Mutations); ok {
				fn(m)
			}
		}
		return
	}
	for _, c := range cfgs {
		if m, ok := c.Config.(*Mutations); ok {
			fn(m)
		}
	}
	fn(f.mutations)
}

// OnRequest mutates the request headers.
func (f *Filter) OnRequest(x *filter.Exchange) *filter.Reply {
	e := entry(x)
	f.levels(x, func(m *Mutations) { apply(m.request, x.Request.Header, e) })
	return nil
}

// OnResponse mutates the response headers.
func (f *Filter) OnResponse(x *filter.Exchange, h http.Header) {
	e := entry(x)
	f.levels(x, func(m *Mutations) { apply(m.response, h, e) })
}
