package route

import (
	"fmt"
	"slices"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// filterConfigType is the message name of envoy.config.route.v3.FilterConfig, the wrapper a
// typed_per_filter_config entry may use to mark a filter optional or disabled.
const filterConfigType = "envoy.config.route.v3.FilterConfig"

// FilterConfig is one typed_per_filter_config entry of a route configuration, virtual host,
// route or weighted cluster (Envoy's PerFilterConfigs entry). Immutable.
type FilterConfig struct {
	// Config is what Options.PerFilterConfig made of the entry's typed config: nil for an
	// entry that only enables or disables the filter (a FilterConfig without a typed config)
	// and for an optional entry the hook ignored; the *anypb.Any itself when Compile had no
	// hook.
	Config any
	// Disabled is FilterConfig.disabled: the filter is off for this level.
	Disabled bool
}

// perFilter maps filter names to their entries at one level; nil when the level has none.
type perFilter map[string]*FilterConfig

// PerFilterConfig returns the typed_per_filter_config entry called name (the filter's name
// in http_filters) that applies to this match, the most specific level winning: the weighted
// cluster, then the route, the virtual host and the route configuration, as Envoy's
// resolveMostSpecificPerFilterConfig. ok is false when no level has an entry of that name.
func (m *Match) PerFilterConfig(name string) (cfg *FilterConfig, ok bool) {
	if m == nil {
		return nil, false
	}
	if m.Weighted != nil {
		if cfg, ok = m.Weighted.filters[name]; ok {
			return cfg, true
		}
	}
	if m.Route != nil {
		if cfg, ok = m.Route.filters[name]; ok {
			return cfg, true
		}
	}
	vh := m.VirtualHost
	if vh == nil && m.Route != nil {
		vh = m.Route.vhost
	}
	if vh == nil {
		return nil, false
	}
	if cfg, ok = vh.filters[name]; ok {
		return cfg, true
	}
	cfg, ok = vh.configFilters[name]
	return cfg, ok
}

// PerFilterConfigs appends to dst every level's typed_per_filter_config entry called name,
// most specific first (weighted cluster, route, virtual host, route configuration): Envoy's
// getAllPerFilterConfig in reverse, for filters that merge the levels (CORS). m may be nil.
func (m *Match) PerFilterConfigs(name string, dst []*FilterConfig) []*FilterConfig {
	if m == nil {
		return dst
	}
	if m.Weighted != nil {
		if cfg, ok := m.Weighted.filters[name]; ok {
			dst = append(dst, cfg)
		}
	}
	vh := m.VirtualHost
	if m.Route != nil {
		if cfg, ok := m.Route.filters[name]; ok {
			dst = append(dst, cfg)
		}
		if vh == nil {
			vh = m.Route.vhost
		}
	}
	if vh != nil {
		if cfg, ok := vh.filters[name]; ok {
			dst = append(dst, cfg)
		}
		if cfg, ok := vh.configFilters[name]; ok {
			dst = append(dst, cfg)
		}
	}
	return dst
}

// LegacyCors returns the deprecated cors policies of the route (RouteAction.cors) and of its
// virtual host, as Options.PerFilterConfig made them (nil where unset), which Envoy's CORS
// filter reads when no typed_per_filter_config level has its entry. m may be nil.
func (m *Match) LegacyCors() (routeLevel, vhostLevel any) {
	if m == nil {
		return nil, nil
	}
	vh := m.VirtualHost
	if m.Route != nil {
		routeLevel = m.Route.cors
		if vh == nil {
			vh = m.Route.vhost
		}
	}
	if vh != nil {
		vhostLevel = vh.cors
	}
	return routeLevel, vhostLevel
}

// compileLegacyCors hands a deprecated cors field to Options.PerFilterConfig as the CORS
// filter's own per-route policy (envoy.extensions.filters.http.cors.v3.CorsPolicy, which has
// the same fields); without a hook, or without that filter, it is kept unused.
func compileLegacyCors(p *routev3.CorsPolicy, path string, opts *Options) (any, error) {
	if p == nil || opts.PerFilterConfig == nil {
		return nil, nil
	}
	pol := &corsv3.CorsPolicy{
		AllowOriginStringMatch:       p.GetAllowOriginStringMatch(),
		AllowMethods:                 p.GetAllowMethods(),
		AllowHeaders:                 p.GetAllowHeaders(),
		ExposeHeaders:                p.GetExposeHeaders(),
		MaxAge:                       p.GetMaxAge(),
		AllowCredentials:             p.GetAllowCredentials(),
		FilterEnabled:                p.GetFilterEnabled(),
		ShadowEnabled:                p.GetShadowEnabled(),
		AllowPrivateNetworkAccess:    p.GetAllowPrivateNetworkAccess(),
		ForwardNotMatchingPreflights: p.GetForwardNotMatchingPreflights(),
	}
	a, err := anypb.New(pol)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	v, err := opts.PerFilterConfig(LegacyCorsName, a, false)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// LegacyCorsName is the name deprecated cors fields are compiled under.
const LegacyCorsName = "envoy.filters.http.cors"

// FilterDisabled reports whether the most specific typed_per_filter_config entry for the filter
// called name disables it for this request (FilterConfig.disabled); m may be nil.
func (m *Match) FilterDisabled(name string) bool {
	cfg, ok := m.PerFilterConfig(name)
	return ok && cfg.Disabled
}

// noteDisabled records whether pf disables a filter.
func (c *compiler) noteDisabled(pf perFilter) {
	for _, cfg := range pf {
		if cfg.Disabled {
			c.disables = true
			return
		}
	}
}

// compilePerFilter converts one level's typed_per_filter_config, as Envoy's PerFilterConfigs
// does: an entry is the filter's per-route typed config, or a FilterConfig wrapping it
// (disabled, is_optional, or an empty config that only enables the filter). path is the
// level's field path with its trailing dot.
func compilePerFilter(in map[string]*anypb.Any, path string, opts *Options) (perFilter, error) {
	if len(in) == 0 {
		return nil, nil
	}
	names := make([]string, 0, len(in))
	for name := range in {
		names = append(names, name)
	}
	slices.Sort(names) // the first error is the same from run to run
	out := make(perFilter, len(in))
	for _, name := range names {
		a := in[name]
		epath := fmt.Sprintf("%styped_per_filter_config[%q]", path, name)
		if typeName(a.GetTypeUrl()) != filterConfigType {
			cfg, err := perFilterValue(name, a, false, opts)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", epath, err)
			}
			out[name] = &FilterConfig{Config: cfg}
			continue
		}
		var fc routev3.FilterConfig
		if err := a.UnmarshalTo(&fc); err != nil {
			return nil, fmt.Errorf("%s: %w", epath, err)
		}
		switch {
		case fc.GetDisabled():
			out[name] = &FilterConfig{Disabled: true} // the config, if any, is ignored
		case fc.GetConfig() == nil:
			return nil, fmt.Errorf("%s.config: missing; a FilterConfig needs config or disabled", epath)
		case fc.GetConfig().GetTypeUrl() == "":
			out[name] = &FilterConfig{} // enables the filter without a configuration
		default:
			cfg, err := perFilterValue(name, fc.GetConfig(), fc.GetIsOptional(), opts)
			if err != nil {
				return nil, fmt.Errorf("%s.config: %w", epath, err)
			}
			out[name] = &FilterConfig{Config: cfg}
		}
	}
	return out, nil
}

func perFilterValue(name string, a *anypb.Any, optional bool, opts *Options) (any, error) {
	if opts.PerFilterConfig == nil {
		return a, nil
	}
	return opts.PerFilterConfig(name, a, optional)
}

// typeName is the message name of a type URL (what follows its last '/').
func typeName(url string) string {
	return url[strings.LastIndexByte(url, '/')+1:]
}
