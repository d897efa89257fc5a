package xds

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/xds/resource"
)

// srdsHandler is the SRDS state of one transport: a wildcard subscription to every
// ScopedRouteConfiguration it serves, shared by the connection managers whose scoped_rds
// names that source (as each of Envoy's SRDS subscriptions sees every resource of its
// source). Its stats live under http.<stat_prefix>.scoped_rds.<scoped_routes name>. of the
// first subscriber.
//
// Concurrency: mu guards the fields below it (watchers has its own lock); watchers are called
// with no lock held.
type srdsHandler struct {
	c   *Client
	m   *mux
	src resource.Source

	mu       sync.Mutex
	scopes   map[string]*srdsScope
	failures map[string]*failure
	version  string
	updated  time.Time
	ready    bool
	stats    SubscriptionStats
	reg      *stats.Registration
	watchers watcherSet
	timer    clock.Timer
	// initReady ends the init target of a subscription made before Run.
	initReady func()
	// demanded are the on_demand scopes (by name) whose route configuration a request has
	// asked for; an update that changes or removes a scope forgets it, as Envoy does.
	demanded map[string]bool
	extra    srdsStats
	extraReg *stats.Registration
}

// srdsStats are Envoy's scoped RDS stats (ALL_SCOPED_RDS_STATS) next to the subscription
// stats: all_scopes counts the scopes, on_demand_scopes those with on_demand, active_scopes
// those whose route configuration is subscribed to (eager ones and loaded on-demand ones).
type srdsStats struct {
	ConfigReload       stats.Counter `stat:"config_reload"`
	UpdateEmpty        stats.Counter `stat:"update_empty"`
	AllScopes          stats.Gauge   `stat:"all_scopes,accumulate"`
	ConfigReloadTimeMs stats.Gauge   `stat:"config_reload_time_ms,never_import"`
	OnDemandScopes     stats.Gauge   `stat:"on_demand_scopes,accumulate"`
	ActiveScopes       stats.Gauge   `stat:"active_scopes,accumulate"`
}

// srdsScope is one accepted ScopedRouteConfiguration.
type srdsScope struct {
	pb  *routev3.ScopedRouteConfiguration
	raw *anypb.Any
	key string
}

// srdsInitTarget is the init target of the SRDS subscription of scoped_routes
// name.
func srdsInitTarget(name string) string { return "SRDS " + name }

// srdsFor returns the SRDS handler of src, creating it (with its stats under prefix) on first
// use.
func (c *Client) srdsFor(src resource.Source, prefix, initName string) (*srdsHandler, error) {
	m, started, err := c.muxForStarted(src, resource.ScopedRouteType)
	if err != nil {
		return nil, err
	}
	c.srdsMu.Lock()
	defer c.srdsMu.Unlock()
	if h := c.srds[m]; h != nil {
		return h, nil
	}
	h := &srdsHandler{c: c, m: m, src: src, scopes: map[string]*srdsScope{}, failures: map[string]*failure{}, demanded: map[string]bool{}}
	h.reg = c.cfg.Stats.Register(prefix, &h.stats)
	h.extraReg = c.cfg.Stats.Register(prefix, &h.extra)
	h.stats.UpdateAttempt.Inc()
	if t := src.InitialFetchTimeout; t > 0 {
		h.timer = c.clock.AfterFunc(t, h.initTimeout)
	}
	if !started && c.cfg.Init != nil {
		if ready, err := c.cfg.Init(initName); err == nil {
			h.initReady = ready
		}
	}
	c.srds[m] = h
	m.addWatch(resource.ScopedRouteType, h, true)
	return h, nil
}

// markReadyLocked ends the initial fetch.
func (h *srdsHandler) markReadyLocked() func() {
	h.ready = true
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	r := h.initReady
	h.initReady = nil
	return r
}

func (h *srdsHandler) initTimeout() {
	h.mu.Lock()
	if h.ready {
		h.mu.Unlock()
		return
	}
	h.stats.InitFetchTimeout.Inc()
	h.stats.UpdateAttempt.Inc()
	r := h.markReadyLocked()
	ws := h.watchers.list()
	h.mu.Unlock()
	for _, w := range ws {
		w()
	}
	if r != nil {
		r()
	}
}

// watch adds fn as a watcher (called after every change and when the initial fetch ends) and
// returns the function that removes it.
func (h *srdsHandler) watch(fn func()) func() { return h.watchers.add(fn) }

// isReady reports whether the first response arrived or the initial fetch timed out.
func (h *srdsHandler) isReady() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ready
}

// list returns the accepted scopes in name order.
func (h *srdsHandler) list() []*routev3.ScopedRouteConfiguration {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*routev3.ScopedRouteConfiguration, 0, len(h.scopes))
	for _, name := range sortedKeys(h.scopes) {
		out = append(out, h.scopes[name].pb)
	}
	return out
}

// apply applies an SRDS response. Valid scopes replace their previous versions; invalid ones
// are NACKed and keep their previous version. A state-of-the-world response removes the
// scopes it does not list. An update that would give two scopes the same key is NACKed as a
// whole.
func (h *srdsHandler) apply(_ *mux, u update) error {
	start := h.c.clock.Now()
	h.mu.Lock()
	next := make(map[string]*srdsScope, len(h.scopes))
	if !u.full {
		for k, v := range h.scopes {
			next[k] = v
		}
		for _, name := range u.removed {
			delete(next, name)
		}
	}
	var errs []string
	seen := map[string]bool{}
	for i, a := range u.resources {
		pb, err := resource.DecodeScopedRoute(a)
		name := pb.GetName()
		if name == "" {
			name = resource.ScopedRouteName(a)
			if u.names != nil {
				name = u.names[i]
			}
		}
		seen[name] = true
		if err != nil {
			errs = append(errs, err.Error())
			h.failures[name] = &failure{resource: a, at: start, details: err.Error(), version: u.version}
			if old := h.scopes[name]; old != nil {
				next[name] = old
			}
			continue
		}
		key, _ := resource.ScopeKey("", pb)
		next[name] = &srdsScope{pb: pb, raw: a, key: key}
		delete(h.failures, name)
	}
	if u.full {
		for name := range h.failures {
			if !seen[name] {
				delete(h.failures, name)
			}
		}
	}
	byKey := map[string]string{}
	for _, name := range sortedKeys(next) {
		k := next[name].key
		if other, dup := byKey[k]; dup {
			errs = append(errs, fmt.Sprintf("scoped_route %q: key %q is already the key of scoped_route %q; scope keys must be unique", name, strings.ReplaceAll(k, "\x00", ","), other))
			next = nil
			break
		}
		byKey[k] = name
	}
	changed := false
	if next != nil {
		changed = len(next) != len(h.scopes)
		for name, s := range next {
			if old := h.scopes[name]; old == nil || !proto.Equal(old.raw, s.raw) {
				changed = true
				delete(h.demanded, name)
			}
		}
		for name := range h.demanded {
			if next[name] == nil {
				delete(h.demanded, name)
			}
		}
		h.scopes = next
		h.countScopesLocked()
	}
	var err error
	if len(errs) > 0 {
		h.stats.UpdateRejected.Inc()
		h.stats.UpdateAttempt.Inc()
		err = errors.New(strings.Join(errs, "; "))
		h.c.log.Warnf("xds: SRDS update %q rejected: %v", u.version, err)
	} else {
		h.version = u.version
		h.stats.Accepted(u.version, h.c.clock.Now(), h.c.clock.Now().Sub(start))
		h.extra.ConfigReload.Inc()
		h.extra.ConfigReloadTimeMs.Set(uint64(h.c.clock.Now().UnixMilli()))
	}
	if changed {
		h.updated = h.c.clock.Now()
	}
	r := h.markReadyLocked()
	var ws []func()
	if changed {
		ws = h.watchers.list()
	}
	h.mu.Unlock()
	for _, w := range ws {
		w()
	}
	if r != nil {
		r()
	}
	return err
}

// countScopesLocked sets the scope gauges; h.mu is held.
func (h *srdsHandler) countScopesLocked() {
	var onDemand, active uint64
	for name, sc := range h.scopes {
		switch {
		case !sc.pb.GetOnDemand():
			active++
		case h.demanded[name]:
			onDemand++
			active++
		default:
			onDemand++
		}
	}
	h.extra.AllScopes.Set(uint64(len(h.scopes)))
	h.extra.OnDemandScopes.Set(onDemand)
	h.extra.ActiveScopes.Set(active)
}

// loaded reports whether the route configuration of scope is to be subscribed to: it is not
// on_demand, or a request has asked for it.
func (h *srdsHandler) loaded(scope *routev3.ScopedRouteConfiguration) bool {
	if !scope.GetOnDemand() {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.demanded[scope.GetName()]
}

// demand marks the on_demand scope called name as asked for and, the first time, tells the
// watchers (which then subscribe to its route configuration). It reports whether the scope
// exists.
func (h *srdsHandler) demand(name string) bool {
	h.mu.Lock()
	sc := h.scopes[name]
	if sc == nil {
		h.mu.Unlock()
		return false
	}
	if !sc.pb.GetOnDemand() || h.demanded[name] {
		h.mu.Unlock()
		return true
	}
	h.demanded[name] = true
	h.countScopesLocked()
	ws := h.watchers.list()
	h.mu.Unlock()
	for _, w := range ws {
		w()
	}
	return true
}

func (h *srdsHandler) failed(*mux) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stats.UpdateFailure.Inc()
	h.stats.UpdateAttempt.Inc()
}

// scopedWatch is one connection manager's scoped routes: the scopes (from SRDS or inline)
// and the RDS subscriptions of their route configurations.
//
// Concurrency: mu guards the fields below it and is taken before the SRDS handler's; update is
// called without it.
type scopedWatch struct {
	c      *Client
	id     uint64
	name   string
	h      *srdsHandler // nil for scoped_route_configurations_list
	inline []*routev3.ScopedRouteConfiguration
	rds    resource.Source
	prefix string
	update func(gen uint64, scopes []*routev3.ScopedRouteConfiguration, routes map[string]*routev3.RouteConfiguration)
	born   time.Time
	// unwatch ends the watch of h; set once before the first refresh.
	unwatch func()

	mu sync.Mutex
	// refs are the RDS subscriptions of the scopes' route configurations (for readiness);
	// stops end them and their VHDS watches. Both by route configuration name.
	refs   map[string]*routeWatch
	stops  map[string]func()
	routes map[string]*routev3.RouteConfiguration
	gen    uint64
	closed bool
	// waiters are the on-demand callbacks waiting for a route configuration, by name;
	// nextWaiter numbers them.
	waiters    map[string]map[uint64]func()
	nextWaiter uint64
}

// WatchScopedRoutes implements httpproxy.ScopedRouteProvider: it serves a connection
// manager's scoped_routes — the scopes of scoped_rds (a wildcard SRDS subscription shared per
// source, stats under http.<statPrefix>.scoped_rds.<name>.) or of
// scoped_route_configurations_list — and subscribes over rds_config_source to the route
// configuration each scope names. update receives every scope and the route configurations
// that arrived (by name), at once and after every change (gen grows); it runs on an xDS
// goroutine (or the caller's, for the first call) without locks and must not block. cancel
// ends the watch. Safe for concurrent use.
func (c *Client) WatchScopedRoutes(sr *hcmv3.ScopedRoutes, statPrefix string,
	update func(gen uint64, scopes []*routev3.ScopedRouteConfiguration, routes map[string]*routev3.RouteConfiguration)) (func(), error) {
	w, err := c.watchScopes(sr, statPrefix, true, update)
	if err != nil {
		return nil, err
	}
	return w.cancel, nil
}

// WatchScopedRoutesOnDemand is WatchScopedRoutes that also returns load, the on-demand half
// of the watch (httpproxy.OnDemandScopedRouteProvider): load(key, done) finds the scope whose
// key is key (its string_key fragments joined with NUL), subscribes to its route
// configuration if it is an on_demand scope not yet loaded, and calls done — on an xDS
// goroutine or the caller's, after update has been called with it — once the route
// configuration has arrived (at once when it already has). Requests for one scope share one
// subscription; a loaded scope stays loaded until an SRDS update changes or removes it.
// load's ok is false when no scope has that key or the scopes are inline (done is then never
// called); its cancel withdraws done.
func (c *Client) WatchScopedRoutesOnDemand(sr *hcmv3.ScopedRoutes, statPrefix string,
	update func(gen uint64, scopes []*routev3.ScopedRouteConfiguration, routes map[string]*routev3.RouteConfiguration)) (
	cancel func(), load func(key string, done func()) (func(), bool), err error) {
	w, err := c.watchScopes(sr, statPrefix, true, update)
	if err != nil {
		return nil, nil, err
	}
	return w.cancel, w.load, nil
}

// watchScopes is WatchScopedRoutes; with reportFirst false the update the watch makes before
// returning is not reported (LDS calls it under Client.mu and reads ready instead).
func (c *Client) watchScopes(sr *hcmv3.ScopedRoutes, statPrefix string, reportFirst bool,
	update func(gen uint64, scopes []*routev3.ScopedRouteConfiguration, routes map[string]*routev3.RouteConfiguration)) (*scopedWatch, error) {
	rds, err := resource.SourceFromProto(sr.GetRdsConfigSource())
	if err != nil {
		return nil, fmt.Errorf("scoped_routes.rds_config_source.%w", err)
	}
	if rds.Self {
		return nil, errors.New("scoped_routes.rds_config_source.self is not supported")
	}
	report := update
	if !reportFirst {
		report = func(uint64, []*routev3.ScopedRouteConfiguration, map[string]*routev3.RouteConfiguration) {}
	}
	w := &scopedWatch{c: c, name: sr.GetName(), rds: rds, prefix: statPrefix, update: report, born: c.clock.Now(),
		refs: map[string]*routeWatch{}, stops: map[string]func(){}, routes: map[string]*routev3.RouteConfiguration{}, waiters: map[string]map[uint64]func(){}}
	switch {
	case sr.GetScopedRds() != nil:
		if sr.GetScopedRds().GetSrdsResourcesLocator() != "" {
			return nil, errors.New("scoped_routes.scoped_rds.srds_resources_locator: xdstp:// locators are not supported")
		}
		src, err := resource.SourceFromProto(sr.GetScopedRds().GetScopedRdsConfigSource())
		if err != nil {
			return nil, fmt.Errorf("scoped_routes.scoped_rds.scoped_rds_config_source.%w", err)
		}
		if src.Self {
			return nil, errors.New("scoped_routes.scoped_rds.scoped_rds_config_source.self is not supported")
		}
		if w.h, err = c.srdsFor(src, "http."+statPrefix+".scoped_rds."+sr.GetName()+".", srdsInitTarget(sr.GetName())); err != nil {
			return nil, fmt.Errorf("scoped_routes %q: %w", sr.GetName(), err)
		}
	default:
		for i, s := range sr.GetScopedRouteConfigurationsList().GetScopedRouteConfigurations() {
			if err := resource.CheckScopedRoute(fmt.Sprintf("scoped_routes.scoped_route_configurations_list.scoped_route_configurations[%d]", i), s, true); err != nil {
				return nil, err
			}
		}
		w.inline = sr.GetScopedRouteConfigurationsList().GetScopedRouteConfigurations()
	}
	c.srdsMu.Lock()
	c.nextScopedID++
	w.id = c.nextScopedID
	c.scoped[w.id] = w
	c.srdsMu.Unlock()
	if w.h != nil {
		w.unwatch = w.h.watch(w.refresh)
	}
	w.refresh()
	if !reportFirst {
		w.mu.Lock()
		w.update = update
		w.mu.Unlock()
	}
	return w, nil
}

// ready reports whether the scopes arrived (or their initial fetch timed out) and so did the
// route configuration of every scope, with the first VHDS answer of those that have vhds.
func (w *scopedWatch) ready() bool {
	if w.h != nil && !w.h.isReady() {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ref := range w.refs {
		if !ref.ready() {
			return false
		}
	}
	return true
}

// scopes returns the current scope list.
func (w *scopedWatch) scopes() []*routev3.ScopedRouteConfiguration {
	if w.h == nil {
		return w.inline
	}
	return w.h.list()
}

// refresh follows the scope list: it subscribes to new route configurations, ends the
// subscriptions nobody names any more, and publishes.
func (w *scopedWatch) refresh() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	// Read under w.mu, so that a later list never publishes before an earlier one.
	list := w.scopes()
	want := map[string]bool{}
	for _, s := range list {
		name := s.GetRouteConfigurationName()
		if w.h == nil || !w.h.loaded(s) {
			continue // inline scopes carry their routes; on_demand ones wait for a request
		}
		want[name] = true
		if _, ok := w.refs[name]; ok {
			continue
		}
		// A route watch, so that a route configuration with vhds gets its VHDS virtual hosts
		// merged in, as Envoy's scoped RDS uses its RDS route config providers.
		cur, _, rw, stop, err := w.c.watchRoutesFrom(w.rds, name, w.prefix, true, func(_ uint64, rc *routev3.RouteConfiguration) {
			w.routeChanged(name, rc)
		})
		if err != nil {
			w.c.log.Errorf("xds: scoped_routes %q: rds %q: %v", w.name, name, err)
			continue
		}
		w.refs[name], w.stops[name] = rw, stop
		if cur != nil {
			w.routes[name] = cur
		}
	}
	for name := range w.refs {
		if !want[name] {
			w.stops[name]()
			delete(w.refs, name)
			delete(w.stops, name)
			delete(w.routes, name)
		}
	}
	var wake []func()
	for name, ws := range w.waiters {
		if w.routes[name] != nil {
			for _, fn := range ws {
				wake = append(wake, fn)
			}
			delete(w.waiters, name)
		}
	}
	w.publishLocked(list)
	for _, fn := range wake {
		fn()
	}
}

// routeChanged records a scope's route configuration (nil when removed or timed out).
func (w *scopedWatch) routeChanged(name string, rc *routev3.RouteConfiguration) {
	w.mu.Lock()
	if w.closed || w.refs[name] == nil {
		w.mu.Unlock()
		return
	}
	list := w.scopes()
	if rc == nil {
		delete(w.routes, name)
	} else {
		w.routes[name] = rc
	}
	// The callbacks waiting for name run after the publication, also when the route
	// configuration is gone or timed out (the request then finds no route).
	wake := w.waiters[name]
	delete(w.waiters, name)
	w.publishLocked(list)
	for _, fn := range wake {
		fn()
	}
}

// publishLocked bumps the generation and calls update with a copy of the state; it unlocks
// w.mu.
func (w *scopedWatch) publishLocked(list []*routev3.ScopedRouteConfiguration) {
	w.gen++
	gen := w.gen
	routes := make(map[string]*routev3.RouteConfiguration, len(w.routes))
	for k, v := range w.routes {
		routes[k] = v
	}
	w.mu.Unlock()
	w.update(gen, list, routes)
}

// load is the on-demand half of the watch (Envoy's onDemandRdsUpdate): it finds the scope
// whose key is key (fragments joined with NUL), subscribes to its route configuration if it
// is an on_demand scope not yet loaded, and calls done once that route configuration has
// arrived (at once when it has already). ok is false when no scope has that key or the
// scope's routes are inline (done is then never called); cancel withdraws done.
func (w *scopedWatch) load(key string, done func()) (cancel func(), ok bool) {
	if w.h == nil {
		return nil, false
	}
	var scope *routev3.ScopedRouteConfiguration
	for _, s := range w.h.list() {
		if k, err := resource.ScopeKey("", s); err == nil && k == key {
			scope = s
			break
		}
	}
	if scope == nil {
		return nil, false
	}
	name := scope.GetRouteConfigurationName()
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil, false
	}
	if w.routes[name] != nil {
		w.mu.Unlock()
		done()
		return func() {}, true
	}
	if w.waiters[name] == nil {
		w.waiters[name] = map[uint64]func(){}
	}
	w.nextWaiter++
	id := w.nextWaiter
	w.waiters[name][id] = done
	w.mu.Unlock()
	if !w.h.demand(scope.GetName()) {
		w.withdraw(name, id)
		return nil, false
	}
	// The subscription may have delivered a route configuration another connection manager
	// had already fetched before the waiter could be woken by it.
	w.mu.Lock()
	var now func()
	if w.routes[name] != nil && w.waiters[name][id] != nil {
		now = done
		delete(w.waiters[name], id)
	}
	w.mu.Unlock()
	if now != nil {
		now()
	}
	return func() { w.withdraw(name, id) }, true
}

func (w *scopedWatch) withdraw(name string, id uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ws := w.waiters[name]; ws != nil {
		delete(ws, id)
		if len(ws) == 0 {
			delete(w.waiters, name)
		}
	}
}

// cancel ends the watch and its RDS subscriptions.
func (w *scopedWatch) cancel() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	for _, stop := range w.stops {
		stop()
	}
	w.refs, w.stops = nil, nil
	var wake []func()
	for _, ws := range w.waiters {
		for _, fn := range ws {
			wake = append(wake, fn)
		}
	}
	w.waiters = nil
	w.mu.Unlock()
	for _, fn := range wake {
		fn() // the requests find no route
	}
	if w.unwatch != nil {
		w.unwatch()
	}
	w.c.srdsMu.Lock()
	delete(w.c.scoped, w.id)
	w.c.srdsMu.Unlock()
}

// ScopedRoutesConfigDump returns the "route_scopes" config dump: an inline_scoped_route_configs
// entry per connection manager with scoped_route_configurations_list and a
// dynamic_scoped_route_configs entry per scoped_rds (with the SRDS version_info and
// last_updated), each named by scoped_routes.name and listing its scopes. match filters by
// scoped_routes name (nil for all). Safe for concurrent use.
func (c *Client) ScopedRoutesConfigDump(match func(string) bool) *adminv3.ScopedRoutesConfigDump {
	c.srdsMu.Lock()
	ws := make([]*scopedWatch, 0, len(c.scoped))
	for _, w := range c.scoped {
		ws = append(ws, w)
	}
	c.srdsMu.Unlock()
	sort.Slice(ws, func(i, j int) bool {
		return ws[i].name < ws[j].name || (ws[i].name == ws[j].name && ws[i].id < ws[j].id)
	})
	out := &adminv3.ScopedRoutesConfigDump{}
	seen := map[string]bool{}
	for _, w := range ws {
		if seen[w.name] || (match != nil && !match(w.name)) {
			continue
		}
		seen[w.name] = true
		if w.h == nil {
			out.InlineScopedRouteConfigs = append(out.InlineScopedRouteConfigs, &adminv3.ScopedRoutesConfigDump_InlineScopedRouteConfigs{
				Name: w.name, ScopedRouteConfigs: anys(w.inline), LastUpdated: timestamppb.New(w.born),
			})
			continue
		}
		w.h.mu.Lock()
		d := &adminv3.ScopedRoutesConfigDump_DynamicScopedRouteConfigs{Name: w.name, VersionInfo: w.h.version}
		for _, name := range sortedKeys(w.h.scopes) {
			d.ScopedRouteConfigs = append(d.ScopedRouteConfigs, w.h.scopes[name].raw)
		}
		if !w.h.updated.IsZero() {
			d.LastUpdated = timestamppb.New(w.h.updated)
		}
		w.h.mu.Unlock()
		out.DynamicScopedRouteConfigs = append(out.DynamicScopedRouteConfigs, d)
	}
	return out
}

func anys(list []*routev3.ScopedRouteConfiguration) []*anypb.Any {
	out := make([]*anypb.Any, 0, len(list))
	for _, s := range list {
		if a, err := anypb.New(s); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// stopSRDS stops the SRDS initial fetch timers (Run's end).
func (c *Client) stopSRDS() {
	c.srdsMu.Lock()
	defer c.srdsMu.Unlock()
	for _, h := range c.srds {
		h.mu.Lock()
		if h.timer != nil {
			h.timer.Stop()
		}
		h.mu.Unlock()
	}
}

// watcherSet is a set of change callbacks, safe for concurrent use. Its mutex is taken last.
type watcherSet struct {
	mu   sync.Mutex
	fns  map[uint64]func()
	next uint64
}

// add adds fn and returns the function that removes it.
func (s *watcherSet) add(fn func()) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fns == nil {
		s.fns = map[uint64]func(){}
	}
	s.next++
	id := s.next
	s.fns[id] = fn
	return func() {
		s.mu.Lock()
		delete(s.fns, id)
		s.mu.Unlock()
	}
}

// list returns the callbacks, to be called with no lock held.
func (s *watcherSet) list() []func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]func(), 0, len(s.fns))
	for _, fn := range s.fns {
		out = append(out, fn)
	}
	return out
}
