package httpproxy

import (
	"fmt"
	"sync"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/legateproxy/legate/httpproxy/rds"
	"github.com/legateproxy/legate/httpproxy/route"
)

// ScopedRouteProvider serves the scopes of connection managers configured with scoped_routes
// (SRDS, or an inline scoped_route_configurations_list, with the RDS route configuration each
// scope names); httpproxy/rds.Discovery implements it. WatchScopedRoutes calls update with
// every scope and the route configurations that have arrived, by name — first before it
// returns when it can, then after every change with a growing gen — without locks the caller
// could hold; update must not block. cancel ends the watch.
type ScopedRouteProvider interface {
	WatchScopedRoutes(sr *hcmv3.ScopedRoutes, statPrefix string,
		update func(gen uint64, scopes []*routev3.ScopedRouteConfiguration, routes map[string]*routev3.RouteConfiguration)) (cancel func(), err error)
}

// OnDemandScopedRouteProvider is implemented by ScopedRouteProviders that load the route
// configurations of on_demand scopes when a request asks (httpproxy/rds.Discovery). Its watch
// is WatchScopedRoutes's, plus load: load(key, done) finds the scope with key key (string_key
// fragments joined with NUL), subscribes to its route configuration if needed and calls done
// once that has been delivered to update (at once when it has); ok is false when no scope has
// that key. cancel withdraws done; done must not block.
type OnDemandScopedRouteProvider interface {
	WatchScopedRoutesOnDemand(sr *hcmv3.ScopedRoutes, statPrefix string,
		update func(gen uint64, scopes []*routev3.ScopedRouteConfiguration, routes map[string]*routev3.RouteConfiguration)) (
		cancel func(), load func(key string, done func()) (func(), bool), err error)
}

// scopeTable is an immutable set of scopes: a compiled route table per scope key.
type scopeTable struct {
	builder rds.KeyBuilder
	byKey   map[string]*route.Table
}

// srdsRoutes is a connection manager's scoped routes subscription.
type srdsRoutes struct {
	mu     sync.Mutex // guards gen and compiled; serialises builds so an older set never wins
	gen    uint64
	cancel func()
	// load asks for the route configuration of a scope (on_demand scopes); nil when the
	// provider cannot.
	load func(key string, done func()) (func(), bool)
	// compiled caches the tables of route configurations by identity, so an update compiles
	// only what changed.
	compiled map[*routev3.RouteConfiguration]*route.Table
}

// startSRDS subscribes h to its scopes. Requests whose scope key cannot be built, or whose
// scope is unknown or has no route configuration yet, get 404 (NR), as in Envoy — unless the
// on_demand filter first loads the route configuration of their scope (routeDiscovery). A
// scope of scoped_route_configurations_list routes with its inline route_configuration.
func (sh *shared) startSRDS(h *Handler, sr *hcmv3.ScopedRoutes) error {
	d := &sh.deps
	builder, err := rds.NewKeyBuilder("scoped_routes.scope_key_builder", sr.GetScopeKeyBuilder())
	if err != nil {
		return fmt.Errorf("http_connection_manager %q: %w", h.cfg.StatPrefix, err)
	}
	st := &srdsRoutes{compiled: map[*routev3.RouteConfiguration]*route.Table{}}
	if err := st.compileInline(sr, d.routeOptions(h.cfg)); err != nil {
		return fmt.Errorf("http_connection_manager %q: %w", h.cfg.StatPrefix, err)
	}
	if d.ScopedRoutes == nil {
		return fmt.Errorf("http_connection_manager %q: scoped_routes %q: scoped routes need the xDS client (no ScopedRouteProvider)", h.cfg.StatPrefix, sr.GetName())
	}
	update := func(gen uint64, scopes []*routev3.ScopedRouteConfiguration, routes map[string]*routev3.RouteConfiguration) {
		st.mu.Lock()
		defer st.mu.Unlock()
		if gen <= st.gen {
			return
		}
		st.gen = gen
		next := &scopeTable{builder: builder, byKey: make(map[string]*route.Table, len(scopes))}
		compiled := make(map[*routev3.RouteConfiguration]*route.Table, len(routes))
		for _, s := range scopes {
			rc := s.GetRouteConfiguration() // inline scoped routes carry theirs
			if rc == nil {
				rc = routes[s.GetRouteConfigurationName()]
			}
			if rc == nil {
				continue
			}
			t := st.compiled[rc]
			if t == nil {
				if t = compiled[rc]; t == nil {
					t, err = route.Compile(rc, d.routeOptions(h.cfg))
					if err != nil {
						d.Logger.Warnf("http_connection_manager %q: scope %q: route configuration %q: %v", h.cfg.StatPrefix, s.GetName(), rc.GetName(), err)
						continue
					}
				}
			}
			compiled[rc] = t
			key, _ := rds.ScopeKey("", s) // SRDS and the inline list have checked it
			next.byKey[key] = t
		}
		st.compiled = compiled
		h.scopes.Store(next)
	}
	h.scopes.Store(&scopeTable{builder: builder}) // no scope until the first update
	var cancel func()
	if od, ok := d.ScopedRoutes.(OnDemandScopedRouteProvider); ok {
		cancel, st.load, err = od.WatchScopedRoutesOnDemand(sr, h.cfg.StatPrefix, update)
	} else {
		cancel, err = d.ScopedRoutes.WatchScopedRoutes(sr, h.cfg.StatPrefix, update)
	}
	if err != nil {
		return fmt.Errorf("http_connection_manager %q: %w", h.cfg.StatPrefix, err)
	}
	st.cancel = cancel
	h.srds = st
	return nil
}

// compileInline compiles the inline route configurations of scoped_route_configurations_list
// up front: one that does not compile is an error of the connection manager's configuration,
// as Envoy rejects the listener (a static one fails the load, an LDS one is NACKed), rather
// than a scope without routes. The tables seed the cache the updates compile from.
func (st *srdsRoutes) compileInline(sr *hcmv3.ScopedRoutes, opts route.Options) error {
	for i, s := range sr.GetScopedRouteConfigurationsList().GetScopedRouteConfigurations() {
		rc := s.GetRouteConfiguration()
		if rc == nil {
			continue
		}
		path := fmt.Sprintf("scoped_routes %q: scoped_route_configurations_list.scoped_route_configurations[%d] (scope %q): route_configuration %q", sr.GetName(), i, s.GetName(), rc.GetName())
		if rc.GetVhds() != nil {
			return fmt.Errorf("%s: vhds is set; virtual host discovery needs a route configuration delivered by RDS", path)
		}
		t, err := route.Compile(rc, opts)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		st.compiled[rc] = t
	}
	return nil
}

// route finds the route of a request: in the table of its scope with scoped routes, else in
// the connection manager's table.
func (h *Handler) route(req *route.Request) *route.Match {
	sc := h.scopes.Load()
	if sc == nil {
		return h.table.Load().Route(req)
	}
	key, ok := sc.builder.Key(req)
	if !ok {
		return nil
	}
	t := sc.byKey[key]
	if t == nil {
		return nil
	}
	return t.Route(req)
}

// disablesFilters reports whether a request's route may disable some of h's filters, so that
// the route must be looked up before they run: the route table says so; with scoped routes
// the route is always looked up (scopes and filters together are rare).
func (h *Handler) disablesFilters() bool {
	if h.scopes.Load() != nil {
		return true
	}
	return h.table.Load().DisablesFilters()
}

// stopSRDS ends h's scoped routes subscription, if any.
func (h *Handler) stopSRDS() {
	if h.srds != nil && h.srds.cancel != nil {
		h.srds.cancel()
	}
}
