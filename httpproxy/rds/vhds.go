package rds

import (
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/xds/resource"
	"github.com/legateproxy/legate/xds/watch"
)

// vhdsHandler is the VHDS state of one (delta) transport, its Stream: every virtual host it
// delivers, by name. Route configurations with vhds take the virtual hosts named "<their name>/…". The
// subscription is a wildcard one, which servers without Envoy's namespace matching (such as
// go-control-plane's) also answer; on-demand requests add "<route config>/<host>" names to it
// (Envoy's requestVirtualHostsUpdate), and a response naming one — as the resource name or
// an alias, with or without a virtual host (a server's "no such host") — answers it.
//
// Concurrency: mu guards the fields below it; watchers and on-demand callbacks are called
// with no lock held, after the route watches have published the update.
type vhdsHandler struct {
	d *Discovery
	s watch.Stream

	mu    sync.Mutex
	hosts map[string]*routev3.VirtualHost
	raw   map[string]*anypb.Any
	// ready is set by the first response or the initial fetch timeout.
	ready    bool
	timer    clock.Timer
	watchers watcherSet
	// routes counts the route watches served, by route configuration name.
	routes map[string]int
	// pending are the on-demand callbacks waiting for an alias, answered the aliases a
	// response has named; nextWaiter numbers the callbacks.
	pending    map[string]map[uint64]func()
	answered   map[string]bool
	nextWaiter uint64
	// stats are the http.<stat_prefix>.rds.vhds.<route config>. stats, by prefix.
	stats map[string]*vhdsStatsRef
	// updates are, by route configuration name, the version_info and time of the last
	// accepted response that named one of its virtual hosts (for the routes dump).
	updates map[string]vhdsUpdate
}

// vhdsUpdate is the last accepted VHDS response for one route configuration.
type vhdsUpdate struct {
	version string
	at      time.Time
}

// vhdsStats are Envoy's VHDS stats of a route configuration (ALL_VHDS_STATS).
type vhdsStats struct {
	ConfigReload stats.Counter `stat:"config_reload"`
	UpdateEmpty  stats.Counter `stat:"update_empty"`
}

// vhdsStatsRef is one registration of vhdsStats and of the subscription stats Envoy keeps in
// the same scope (its VHDS subscription is created on http.<stat_prefix>.rds.vhds.<route
// config>.), shared by the route watches of one connection manager stat prefix and route
// configuration. As in Envoy, where each route configuration's VHDS subscription is a watch
// of one shared delta stream, update_success and the version follow the responses that name
// the route configuration's virtual hosts, while a rejected response and a stream failure
// count on every subscription of the stream.
type vhdsStatsRef struct {
	rc     string
	refs   int
	s      vhdsStats
	reg    *stats.Registration
	sub    watch.SubscriptionStats
	subReg *stats.Registration
}

// vhdsFor returns the VHDS handler of the transport of cs, creating it on first use.
func (d *Discovery) vhdsFor(cs *corev3.ConfigSource) (*vhdsHandler, error) {
	src, err := resource.SourceFromProto(cs)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// Held across Stream, so that the handler is in place before a response can reach it.
	s, err := d.cfg.Client.Stream(watch.VirtualHostType, cs, true, d.vhdsApplier)
	if err != nil {
		return nil, err
	}
	if h := d.vhds[s]; h != nil {
		return h, nil
	}
	h := &vhdsHandler{d: d, s: s, hosts: map[string]*routev3.VirtualHost{}, raw: map[string]*anypb.Any{},
		routes: map[string]int{}, pending: map[string]map[uint64]func(){}, answered: map[string]bool{}, stats: map[string]*vhdsStatsRef{},
		updates: map[string]vhdsUpdate{}}
	if t := src.InitialFetchTimeout; t > 0 {
		h.timer = d.clock.AfterFunc(t, h.initTimeout)
	}
	d.vhds[s] = h
	return h, nil
}

// watch adds fn as a watcher and returns the function that removes it.
func (h *vhdsHandler) watch(fn func()) func() { return h.watchers.add(fn) }

// isReady reports whether the first response arrived or the initial fetch timed out.
func (h *vhdsHandler) isReady() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ready
}

// markReadyLocked ends the initial fetch; it reports whether it was pending.
func (h *vhdsHandler) markReadyLocked() bool {
	if h.ready {
		return false
	}
	h.ready = true
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	return true
}

func (h *vhdsHandler) initTimeout() {
	h.mu.Lock()
	first := h.markReadyLocked()
	if first {
		for _, ref := range h.stats {
			ref.sub.InitFetchTimeout.Inc()
			ref.sub.UpdateAttempt.Inc()
		}
	}
	h.mu.Unlock()
	if first {
		h.d.log.Warnf("xds: VHDS: initial fetch timed out")
		for _, w := range h.watchers.list() {
			w()
		}
	}
}

// hostsOf returns the virtual hosts of the route configuration called rc, in name order.
func (h *vhdsHandler) hostsOf(rc string) []*routev3.VirtualHost {
	h.mu.Lock()
	defer h.mu.Unlock()
	prefix := rc + "/"
	var names []string
	for name := range h.hosts {
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	out := make([]*routev3.VirtualHost, len(names))
	for i, n := range names {
		out[i] = h.hosts[n]
	}
	return out
}

// apply applies a VHDS response: added virtual hosts replace those of the same name, removed
// names go; invalid ones are NACKed and the previous version stays. A resource without a
// virtual host only answers the on-demand requests for its name and aliases. The watchers
// run first, so that the route tables hold the update when the on-demand callbacks run.
func (h *vhdsHandler) apply(u watch.Response) error {
	start := h.d.clock.Now()
	var errs []string
	changed := map[string]bool{} // route configurations whose virtual hosts changed
	named := map[string]bool{}   // route configurations the response names
	for i, a := range u.Resources {
		if u.Names != nil {
			named[routeConfigOf(u.Names[i])] = true
		} else if a != nil {
			named[routeConfigOf(VirtualHostName(a))] = true
		}
		if u.Aliases != nil {
			for _, alias := range u.Aliases[i] {
				named[routeConfigOf(alias)] = true
			}
		}
	}
	for _, name := range u.Removed {
		named[routeConfigOf(name)] = true
	}
	h.mu.Lock()
	drop := func(name string) {
		delete(h.hosts, name)
		delete(h.raw, name)
		changed[routeConfigOf(name)] = true
	}
	if u.Full {
		seen := map[string]bool{}
		for i, a := range u.Resources {
			name := VirtualHostName(a)
			if u.Names != nil {
				name = u.Names[i]
			}
			seen[name] = true
		}
		for name := range h.hosts {
			if !seen[name] {
				drop(name)
			}
		}
	}
	for _, name := range u.Removed {
		if _, ok := h.hosts[name]; ok {
			drop(name)
		}
	}
	var answered []string
	for i, a := range u.Resources {
		if u.Names != nil {
			answered = append(answered, u.Names[i])
		}
		if u.Aliases != nil {
			answered = append(answered, u.Aliases[i]...)
		}
		if a == nil {
			continue // the server's answer for a host it does not have
		}
		vh, err := DecodeVirtualHost(a)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if old := h.raw[vh.GetName()]; old != nil && proto.Equal(old, a) {
			continue
		}
		h.hosts[vh.GetName()], h.raw[vh.GetName()] = vh, a
		changed[routeConfigOf(vh.GetName())] = true
	}
	now := h.d.clock.Now()
	for _, ref := range h.stats {
		if changed[ref.rc] {
			ref.s.ConfigReload.Inc()
		}
		switch {
		case len(errs) > 0:
			ref.sub.UpdateRejected.Inc()
			ref.sub.UpdateAttempt.Inc()
		case named[ref.rc] || changed[ref.rc]:
			ref.sub.Accepted(u.Version, now, now.Sub(start))
		}
	}
	if len(errs) == 0 {
		for rc := range named {
			h.updates[rc] = vhdsUpdate{version: u.Version, at: now}
		}
		for rc := range changed {
			h.updates[rc] = vhdsUpdate{version: u.Version, at: now}
		}
	}
	var ws, wake []func()
	if h.markReadyLocked() || len(changed) > 0 {
		ws = h.watchers.list()
	}
	h.mu.Unlock()
	for _, w := range ws {
		w()
	}
	// Only now, with the route tables holding the update, is an alias answered: a request
	// that looked for its host before the watchers ran and asks for it now must wait for
	// this wake, not be let go at once (requestHost) to a table that still lacks the host.
	if len(answered) > 0 {
		h.mu.Lock()
		for _, alias := range answered {
			h.answered[alias] = true
			for _, fn := range h.pending[alias] {
				wake = append(wake, fn)
			}
			delete(h.pending, alias)
		}
		h.mu.Unlock()
	}
	for _, fn := range wake {
		fn()
	}
	if len(errs) > 0 {
		err := errors.New(strings.Join(errs, "; "))
		h.d.log.Warnf("xds: VHDS update %q rejected: %v", u.Version, err)
		return err
	}
	return nil
}

// routeConfigOf is the route configuration a VHDS name belongs to: the part before "/".
func routeConfigOf(name string) string {
	rc, _, _ := strings.Cut(name, "/")
	return rc
}

// serve records a route watch of the route configuration rc (its stats under prefix) and
// returns the function that ends it.
func (h *vhdsHandler) serve(rc, prefix string) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.routes[rc]++
	ref := h.stats[prefix]
	if ref == nil {
		ref = &vhdsStatsRef{rc: rc}
		ref.reg = h.d.cfg.Stats.Register(prefix, &ref.s)
		ref.subReg = h.d.cfg.Stats.Register(prefix, &ref.sub)
		ref.sub.UpdateAttempt.Inc() // the subscription starts
		h.stats[prefix] = ref
		// A shared transport may have delivered this route configuration's virtual hosts
		// already; Envoy's per-route-configuration subscription would have counted them.
		for name := range h.hosts {
			if routeConfigOf(name) == rc {
				ref.s.ConfigReload.Inc()
				break
			}
		}
		if upd, ok := h.updates[rc]; ok {
			ref.sub.Accepted(upd.version, upd.at, 0)
		}
	}
	ref.refs++
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.routes[rc]--; h.routes[rc] == 0 {
			delete(h.routes, rc)
		}
		if ref.refs--; ref.refs == 0 {
			ref.reg.Unregister()
			ref.subReg.Unregister()
			delete(h.stats, prefix)
		}
	}
}

// requestHost asks for the virtual host of alias ("<route config>/<host>") and calls done
// once a response names it (at once when one already has). It returns the function that
// withdraws done.
func (h *vhdsHandler) requestHost(alias string, done func()) func() {
	h.mu.Lock()
	if h.answered[alias] {
		h.mu.Unlock()
		done()
		return func() {}
	}
	first := h.pending[alias] == nil
	if first {
		h.pending[alias] = map[uint64]func(){}
	}
	h.nextWaiter++
	id := h.nextWaiter
	h.pending[alias][id] = done
	h.mu.Unlock()
	if first {
		h.s.SetNames([]string{alias}, nil)
	}
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if ws := h.pending[alias]; ws != nil {
			delete(ws, id)
		}
	}
}

// vhdsServing returns the VHDS handler that serves a route watch of the route configuration
// called rc, or nil.
func (d *Discovery) vhdsServing(rc string) *vhdsHandler {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, vh := range d.vhds {
		vh.mu.Lock()
		n := vh.routes[rc]
		vh.mu.Unlock()
		if n > 0 {
			return vh
		}
	}
	return nil
}

// RequestVirtualHost implements httpproxy.VirtualHostRequester, the on-demand half of VHDS
// (Envoy's requestVirtualHostsUpdate, which envoy.filters.http.on_demand drives): it asks the
// VHDS source of the route configuration called routeConfig for the virtual host of host (the
// request's lower-cased Host header) by subscribing to "<routeConfig>/<host>", and calls done
// once a response names it — with the virtual host, or without one when the server has none —
// after the route watches have published it; at once when a response already has. Many
// requests for one host share one subscription. ok is false when no watched route
// configuration of that name has vhds (done is then never called). cancel withdraws done.
// Safe for concurrent use; done runs on an xDS goroutine (or the caller's) and must not block.
func (d *Discovery) RequestVirtualHost(routeConfig, host string, done func()) (cancel func(), ok bool) {
	h := d.vhdsServing(routeConfig)
	if h == nil {
		return nil, false
	}
	return h.requestHost(routeConfig+"/"+host, done), true
}

// failed counts a stream failure on every VHDS subscription of the transport.
func (h *vhdsHandler) failed() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ref := range h.stats {
		ref.sub.UpdateFailure.Inc()
		ref.sub.UpdateAttempt.Inc()
	}
}

// routeWatch is one WatchRoutes caller: the RDS configuration, with the VHDS virtual hosts
// merged in when it has vhds. mu guards the fields below it; update is called without it.
type routeWatch struct {
	d      *Discovery
	update func(gen uint64, rc *routev3.RouteConfiguration)

	// prefix is the connection manager's stat_prefix.
	prefix string
	// sub is the RDS subscription; set before the watch is shared, then read-only.
	sub watch.Subscription

	mu      sync.Mutex
	gen     uint64
	rc      *routev3.RouteConfiguration
	vh      *vhdsHandler
	vhKey   string
	unwatch func()
	closed  bool
}

// setLocked takes a new RDS configuration (subscribing to its VHDS source when it names one)
// and returns the configuration to serve.
func (w *routeWatch) setLocked(rc *routev3.RouteConfiguration) *routev3.RouteConfiguration {
	w.rc = rc
	if rc == nil {
		if w.unwatch != nil {
			w.unwatch()
		}
		w.vh, w.unwatch, w.vhKey = nil, nil, ""
		return nil
	}
	var key string
	if v := rc.GetVhds(); v != nil {
		key = rc.GetName() + "\x00" + string(mustMarshal(v.GetConfigSource()))
	}
	if key != w.vhKey {
		if w.unwatch != nil {
			w.unwatch()
		}
		w.vh, w.unwatch, w.vhKey = nil, nil, key
		if key != "" {
			h, err := w.d.vhdsFor(rc.GetVhds().GetConfigSource())
			if err != nil {
				w.d.log.Errorf("xds: route_config %q: vhds: %v", rc.GetName(), err)
			} else {
				unwatch := h.watch(w.vhostsChanged)
				unserve := h.serve(rc.GetName(), "http."+w.prefix+".rds.vhds."+rc.GetName()+".")
				w.vh, w.unwatch = h, func() { unwatch(); unserve() }
			}
		}
	}
	return w.mergedLocked()
}

// mergedLocked is the RDS configuration with the VHDS virtual hosts added (and vhds cleared,
// so that the route table compiles it as a whole).
func (w *routeWatch) mergedLocked() *routev3.RouteConfiguration {
	if w.rc.GetVhds() == nil {
		return w.rc
	}
	out := proto.Clone(w.rc).(*routev3.RouteConfiguration)
	out.Vhds = nil
	if w.vh != nil {
		out.VirtualHosts = append(out.VirtualHosts, w.vh.hostsOf(w.rc.GetName())...)
	}
	return out
}

func (w *routeWatch) rdsChanged(rc *routev3.RouteConfiguration) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	merged := w.setLocked(rc)
	w.gen++
	gen := w.gen
	w.mu.Unlock()
	w.update(gen, merged)
}

func (w *routeWatch) vhostsChanged() {
	w.mu.Lock()
	if w.closed || w.rc == nil {
		w.mu.Unlock()
		return
	}
	merged := w.mergedLocked()
	w.gen++
	gen := w.gen
	w.mu.Unlock()
	w.update(gen, merged)
}

// ready reports whether the route configuration arrived (or its first fetch timed out) and,
// when it has vhds, whether its VHDS source has answered or timed out too: as in Envoy, whose
// RDS subscription registers the VHDS subscription's init target with its own init manager
// while it warms, a listener waits for the first VHDS answer of its route configurations.
func (w *routeWatch) ready() bool {
	if !w.sub.Ready() {
		return false
	}
	w.mu.Lock()
	vh := w.vh
	w.mu.Unlock()
	if vh == nil {
		// The subscription is marked ready before its watchers run, and rdsChanged (a watcher)
		// is what subscribes the VHDS source: until it has, a route configuration with vhds
		// is not ready, or a listener checking in between would go live before VHDS answers.
		rc, _ := w.sub.Value().(*routev3.RouteConfiguration)
		return rc.GetVhds() == nil
	}
	return vh.isReady()
}

func (w *routeWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.unwatch != nil {
		w.unwatch()
		w.unwatch = nil
	}
}

// mustMarshal is the deterministic encoding of a config source, to key VHDS sources by.
func mustMarshal(cs *corev3.ConfigSource) []byte {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(cs)
	return b
}

// stopTimer stops the initial fetch timer (the client has returned).
func (h *vhdsHandler) stopTimer() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.timer != nil {
		h.timer.Stop()
	}
}
