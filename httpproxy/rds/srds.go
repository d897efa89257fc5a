package rds

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/xds/resource"
	"github.com/legateproxy/legate/xds/watch"
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
	d *Discovery
	s watch.Stream

	mu       sync.Mutex
	scopes   map[string]*srdsScope
	failures map[string]*adminv3.UpdateFailureState
	version  string
	updated  time.Time
	ready    bool
	stats    watch.SubscriptionStats
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

// srdsFor returns the SRDS handler of the transport of cs, creating it (with its stats under
// prefix, and the init target initName before Start) on first use.
func (d *Discovery) srdsFor(cs *corev3.ConfigSource, prefix, initName string) (*srdsHandler, error) {
	src, err := resource.SourceFromProto(cs)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// Held across Stream, so that the handler is in place before a response can reach it.
	s, err := d.cfg.Client.Stream(watch.ScopedRouteType, cs, true, d.srdsApplier)
	if err != nil {
		return nil, err
	}
	if h := d.srds[s]; h != nil {
		return h, nil
	}
	h := &srdsHandler{d: d, s: s, scopes: map[string]*srdsScope{}, failures: map[string]*adminv3.UpdateFailureState{}, demanded: map[string]bool{}}
	h.reg = d.cfg.Stats.Register(prefix, &h.stats)
	h.extraReg = d.cfg.Stats.Register(prefix, &h.extra)
	h.stats.UpdateAttempt.Inc()
	if t := src.InitialFetchTimeout; t > 0 {
		h.timer = d.clock.AfterFunc(t, h.initTimeout)
	}
	if !d.started && d.cfg.Init != nil {
		if ready, err := d.cfg.Init(initName); err == nil {
			h.initReady = ready
		}
	}
	d.srds[s] = h
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
	for _, name := range slices.Sorted(maps.Keys(h.scopes)) {
		out = append(out, h.scopes[name].pb)
	}
	return out
}

// apply applies an SRDS response. Valid scopes replace their previous versions; invalid ones
// are NACKed and keep their previous version. A state-of-the-world response removes the
// scopes it does not list. An update that would give two scopes the same key is NACKed as a
// whole.
func (h *srdsHandler) apply(u watch.Response) error {
	start := h.d.clock.Now()
	h.mu.Lock()
	next := make(map[string]*srdsScope, len(h.scopes))
	if !u.Full {
		for k, v := range h.scopes {
			next[k] = v
		}
		for _, name := range u.Removed {
			delete(next, name)
		}
	}
	var errs []string
	seen := map[string]bool{}
	for i, a := range u.Resources {
		pb, err := DecodeScopedRoute(a)
		name := pb.GetName()
		if name == "" {
			name = ScopedRouteName(a)
			if u.Names != nil {
				name = u.Names[i]
			}
		}
		seen[name] = true
		if err != nil {
			errs = append(errs, err.Error())
			h.failures[name] = watch.FailureState(a, start, err, u.Version)
			if old := h.scopes[name]; old != nil {
				next[name] = old
			}
			continue
		}
		key, _ := ScopeKey("", pb)
		next[name] = &srdsScope{pb: pb, raw: a, key: key}
		delete(h.failures, name)
	}
	if u.Full {
		for name := range h.failures {
			if !seen[name] {
				delete(h.failures, name)
			}
		}
	}
	byKey := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(next)) {
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
		h.d.log.Warnf("xds: SRDS update %q rejected: %v", u.Version, err)
	} else {
		h.version = u.Version
		h.stats.Accepted(u.Version, h.d.clock.Now(), h.d.clock.Now().Sub(start))
		h.extra.ConfigReload.Inc()
		h.extra.ConfigReloadTimeMs.Set(uint64(h.d.clock.Now().UnixMilli()))
	}
	if changed {
		h.updated = h.d.clock.Now()
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

func (h *srdsHandler) failed() {
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
	d      *Discovery
	id     uint64
	name   string
	h      *srdsHandler // nil for scoped_route_configurations_list
	inline []*routev3.ScopedRouteConfiguration
	rds    *corev3.ConfigSource // rds_config_source, valid and not self
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
	// setAt is the generation that first publishes routes[name] as it is now, and shown the
	// highest generation whose update has returned: a route configuration is in the
	// connection manager's tables once setAt[name] <= shown (loadedLocked), and only then may an
	// on-demand request for it go on.
	setAt  map[string]uint64
	shown  uint64
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
func (d *Discovery) WatchScopedRoutes(sr *hcmv3.ScopedRoutes, statPrefix string,
	update func(gen uint64, scopes []*routev3.ScopedRouteConfiguration, routes map[string]*routev3.RouteConfiguration)) (func(), error) {
	w, err := d.watchScopes(sr, statPrefix, true, update)
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
func (d *Discovery) WatchScopedRoutesOnDemand(sr *hcmv3.ScopedRoutes, statPrefix string,
	update func(gen uint64, scopes []*routev3.ScopedRouteConfiguration, routes map[string]*routev3.RouteConfiguration)) (
	cancel func(), load func(key string, done func()) (func(), bool), err error) {
	w, err := d.watchScopes(sr, statPrefix, true, update)
	if err != nil {
		return nil, nil, err
	}
	return w.cancel, w.load, nil
}

// watchScopes is WatchScopedRoutes; with reportFirst false the update the watch makes before
// returning is not reported (a warming LDS listener calls it under LDS's lock and reads ready
// instead).
func (d *Discovery) watchScopes(sr *hcmv3.ScopedRoutes, statPrefix string, reportFirst bool,
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
	w := &scopedWatch{d: d, name: sr.GetName(), rds: sr.GetRdsConfigSource(), prefix: statPrefix, update: report, born: d.clock.Now(),
		refs: map[string]*routeWatch{}, stops: map[string]func(){}, routes: map[string]*routev3.RouteConfiguration{}, setAt: map[string]uint64{}, waiters: map[string]map[uint64]func(){}}
	switch {
	case sr.GetScopedRds() != nil:
		if sr.GetScopedRds().GetSrdsResourcesLocator() != "" {
			return nil, errors.New("scoped_routes.scoped_rds.srds_resources_locator: xdstp:// locators are not supported")
		}
		cs := sr.GetScopedRds().GetScopedRdsConfigSource()
		src, err := resource.SourceFromProto(cs)
		if err != nil {
			return nil, fmt.Errorf("scoped_routes.scoped_rds.scoped_rds_config_source.%w", err)
		}
		if src.Self {
			return nil, errors.New("scoped_routes.scoped_rds.scoped_rds_config_source.self is not supported")
		}
		if w.h, err = d.srdsFor(cs, "http."+statPrefix+".scoped_rds."+sr.GetName()+".", ScopedInitTarget(sr.GetName())); err != nil {
			return nil, fmt.Errorf("scoped_routes %q: %w", sr.GetName(), err)
		}
	default:
		for i, s := range sr.GetScopedRouteConfigurationsList().GetScopedRouteConfigurations() {
			if err := CheckScopedRoute(fmt.Sprintf("scoped_routes.scoped_route_configurations_list.scoped_route_configurations[%d]", i), s, true); err != nil {
				return nil, err
			}
		}
		w.inline = sr.GetScopedRouteConfigurationsList().GetScopedRouteConfigurations()
	}
	d.mu.Lock()
	d.nextScopedID++
	w.id = d.nextScopedID
	d.scoped[w.id] = w
	d.mu.Unlock()
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
		cur, _, rw, stop, err := w.d.watchRoutesFrom(w.rds, name, w.prefix, true, func(_ uint64, rc *routev3.RouteConfiguration) {
			w.routeChanged(name, rc)
		})
		if err != nil {
			w.d.log.Errorf("xds: scoped_routes %q: rds %q: %v", w.name, name, err)
			continue
		}
		w.refs[name], w.stops[name] = rw, stop
		if cur != nil {
			w.routes[name], w.setAt[name] = cur, w.gen+1
		}
	}
	for name := range w.refs {
		if !want[name] {
			w.stops[name]()
			delete(w.refs, name)
			delete(w.stops, name)
			delete(w.routes, name)
			delete(w.setAt, name)
		}
	}
	w.publishLocked(list) // wakes the requests waiting for a route configuration it shows
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
		delete(w.setAt, name)
	} else {
		w.routes[name], w.setAt[name] = rc, w.gen+1
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
// w.mu. Then it lets go the on-demand requests that asked, while update ran, for a route
// configuration this generation brought (load found it set but not yet shown).
func (w *scopedWatch) publishLocked(list []*routev3.ScopedRouteConfiguration) {
	w.gen++
	gen := w.gen
	routes := make(map[string]*routev3.RouteConfiguration, len(w.routes))
	for k, v := range w.routes {
		routes[k] = v
	}
	w.mu.Unlock()
	w.update(gen, list, routes)
	w.mu.Lock()
	w.shown = max(w.shown, gen)
	var wake []func()
	for name, ws := range w.waiters {
		if w.loadedLocked(name) {
			for _, fn := range ws {
				wake = append(wake, fn)
			}
			delete(w.waiters, name)
		}
	}
	w.mu.Unlock()
	for _, fn := range wake {
		fn()
	}
}

// loadedLocked reports whether the route configuration called name is in the tables the
// connection manager was last given.
func (w *scopedWatch) loadedLocked(name string) bool {
	return w.routes[name] != nil && w.setAt[name] <= w.shown
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
		if k, err := ScopeKey("", s); err == nil && k == key {
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
	if w.loadedLocked(name) {
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
	if w.loadedLocked(name) && w.waiters[name][id] != nil {
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
	w.d.mu.Lock()
	delete(w.d.scoped, w.id)
	w.d.mu.Unlock()
}

// ScopedRoutesConfigDump returns the "route_scopes" config dump: an inline_scoped_route_configs
// entry per connection manager with scoped_route_configurations_list and a
// dynamic_scoped_route_configs entry per scoped_rds (with the SRDS version_info and
// last_updated), each named by scoped_routes.name and listing its scopes. match filters by
// scoped_routes name (nil for all). Safe for concurrent use.
func (d *Discovery) ScopedRoutesConfigDump(match func(string) bool) *adminv3.ScopedRoutesConfigDump {
	d.mu.Lock()
	ws := make([]*scopedWatch, 0, len(d.scoped))
	for _, w := range d.scoped {
		ws = append(ws, w)
	}
	d.mu.Unlock()
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
		dc := &adminv3.ScopedRoutesConfigDump_DynamicScopedRouteConfigs{Name: w.name, VersionInfo: w.h.version}
		for _, name := range slices.Sorted(maps.Keys(w.h.scopes)) {
			dc.ScopedRouteConfigs = append(dc.ScopedRouteConfigs, w.h.scopes[name].raw)
		}
		if !w.h.updated.IsZero() {
			dc.LastUpdated = timestamppb.New(w.h.updated)
		}
		w.h.mu.Unlock()
		out.DynamicScopedRouteConfigs = append(out.DynamicScopedRouteConfigs, dc)
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

// stopTimer stops the initial fetch timer (the client has returned).
func (h *srdsHandler) stopTimer() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.timer != nil {
		h.timer.Stop()
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
