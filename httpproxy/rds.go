package httpproxy

import (
	"fmt"
	"strings"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/legateproxy/legate/httpproxy/route"
)

// RouteProvider serves the route configurations of connection managers configured with rds
// (HttpConnectionManager.rds: route_config_name and config_source); the route table's xDS
// side implements it (httpproxy/rds.Discovery). WatchRoutes subscribes (shared per route_config_name and source; statPrefix is the
// connection manager's stat_prefix, for http.<stat_prefix>.rds.<name>.*) and returns the
// current configuration (nil until the first arrives), its generation, and cancel, which ends
// the watch. update is called with each later accepted configuration, with a growing gen, on
// another goroutine and without locks the caller could hold; it must not block.
type RouteProvider interface {
	WatchRoutes(name string, source *corev3.ConfigSource, statPrefix string,
		update func(gen uint64, rc *routev3.RouteConfiguration)) (*routev3.RouteConfiguration, uint64, func(), error)
}

// VirtualHostRequester is implemented by RouteProviders that fetch virtual hosts on demand
// (VHDS; httpproxy/rds.Discovery). RequestVirtualHost asks the VHDS source of the route configuration
// called routeConfig for the virtual host of host and calls done once the answer has been
// applied to the configurations WatchRoutes delivers (at once when it already has); ok is
// false when that route configuration has no vhds. cancel withdraws done. done must not block.
type VirtualHostRequester interface {
	RequestVirtualHost(routeConfig, host string, done func()) (cancel func(), ok bool)
}

// rdsRoutes is a connection manager's RDS subscription. The handler's table pointer is
// swapped on every accepted configuration; requests in flight keep the table they loaded.
type rdsRoutes struct {
	mu     sync.Mutex // guards gen; serialises compiles so an older table never wins
	gen    uint64
	cancel func()
	// name is rds.route_config_name; vhds, when the provider has on-demand VHDS, asks for
	// missing virtual hosts.
	name string
	vhds VirtualHostRequester
}

// startRDS subscribes h to its route configuration. Until one arrives the handler serves an
// empty table (404 for every request), as Envoy does after an initial fetch timeout. A
// configuration that does not compile for this connection manager is logged and the previous
// table keeps serving (RDS has already NACKed those that fail to compile at all).
func (sh *shared) startRDS(h *Handler, rds *hcmv3.Rds) error {
	d := &sh.deps
	if d.Routes == nil {
		return fmt.Errorf("http_connection_manager %q: rds %q: dynamic route configurations need the xDS client (no RouteProvider)", h.cfg.StatPrefix, rds.GetRouteConfigName())
	}
	st := &rdsRoutes{name: rds.GetRouteConfigName()}
	st.vhds, _ = d.Routes.(VirtualHostRequester)
	update := func(gen uint64, rc *routev3.RouteConfiguration) {
		st.mu.Lock()
		defer st.mu.Unlock()
		if gen <= st.gen {
			return
		}
		t, err := route.Compile(rc, d.routeOptions(h.cfg))
		if err != nil {
			d.Logger.Warnf("http_connection_manager %q: rds %q: %v; the previous routes stay", h.cfg.StatPrefix, rc.GetName(), err)
			return
		}
		st.gen = gen
		h.table.Store(t)
	}
	cur, gen, cancel, err := d.Routes.WatchRoutes(rds.GetRouteConfigName(), rds.GetConfigSource(), h.cfg.StatPrefix, update)
	if err != nil {
		return fmt.Errorf("http_connection_manager %q: %w", h.cfg.StatPrefix, err)
	}
	st.cancel = cancel
	h.rds = st
	if cur != nil {
		update(gen, cur)
	}
	return nil
}

// stopRDS ends h's RDS subscription, if any.
func (h *Handler) stopRDS() {
	if h.rds != nil && h.rds.cancel != nil {
		h.rds.cancel()
	}
}

// routeDiscovery is a Handler's filter.RouteDiscovery: the on_demand filter's way to ask
// for the virtual host (VHDS) or the scope's route configuration (SRDS) a request lacks.
// It is one pointer, so that storing it in each stream's Exchange does not allocate.
type routeDiscovery struct{ h *Handler }

// HasRoute reports whether req has a route in the current tables.
func (d routeDiscovery) HasRoute(req *route.Request) bool { return d.h.route(req) != nil }

// RequestUpdate asks for the route configuration of req's on_demand scope with scoped routes,
// else for the virtual host of its Host (lower-cased, as Envoy names VHDS aliases
// "<route_config_name>/<host>") when the RDS route configuration has vhds. Without either there
// is nothing to ask for: Envoy's connection manager then lets the request go on at once too.
func (d routeDiscovery) RequestUpdate(req *route.Request) (<-chan struct{}, func(), bool) {
	h := d.h
	var ask func(done func()) (func(), bool)
	switch {
	case h.srds != nil && h.srds.load != nil:
		sc := h.scopes.Load()
		key, ok := sc.builder.Key(req)
		if !ok {
			return nil, nil, false
		}
		ask = func(done func()) (func(), bool) { return h.srds.load(key, done) }
	case h.rds != nil && h.rds.vhds != nil:
		host := strings.ToLower(req.Authority)
		ask = func(done func()) (func(), bool) { return h.rds.vhds.RequestVirtualHost(h.rds.name, host, done) }
	default:
		return nil, nil, false
	}
	ch := make(chan struct{})
	var once sync.Once
	cancel, ok := ask(func() { once.Do(func() { close(ch) }) })
	if !ok {
		return nil, nil, false
	}
	return ch, cancel, true
}
