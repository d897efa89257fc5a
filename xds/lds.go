package xds

import (
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/xds/resource"
	xdswatch "github.com/legateproxy/legate/xds/watch"
)

// LDSInitTarget is the name of the init target the client registers for LDS: ready once the
// first LDS response (or its initial_fetch_timeout) has been handled and every listener it
// delivered has finished warming or failed.
const LDSInitTarget = "LDS"

// ListenerManager is what LDS drives (listener.Manager implements it). AddOrUpdate replaces
// a listener in place or by draining the old version, so established connections survive.
type ListenerManager interface {
	AddOrUpdate(l *config.Listener, versionInfo string) (bool, error)
	Remove(name string) (bool, error)
	ConfigDump(match func(string) bool) proto.Message
}

// ldsHandler applies LDS responses: a listener warms (its route configurations and SDS
// secrets are subscribed) until every dependency has arrived or timed out, then goes to the
// listener manager, replacing the previous version, which drains. Its state is guarded by
// Client.mu.
type ldsHandler struct {
	c     *Client
	src   resource.Source
	m     *mux
	lm    ListenerManager
	stats SubscriptionStats
	reg   *stats.Registration

	// listeners are the accepted LDS listeners by name: active, or warming (with the active
	// version it replaces in prev).
	listeners map[string]*ldsListener
	failures  map[string]*failure
	version   string

	initReady   func()
	initTimer   clock.Timer
	initFetched bool
	initPending map[string]bool
}

// ldsListener is one accepted version of an LDS listener.
type ldsListener struct {
	rl      *resource.Listener
	version string
	updated time.Time
	deps    []xdswatch.Subscription
	// scoped are the scoped routes it waits for (SRDS and the scopes' RDS); unwatch ends them
	// and the watches of VHDS sources.
	scoped  []*scopedWatch
	unwatch []func()
	// routes are its RDS subscriptions (also in deps); vhds are the VHDS sources of their
	// configurations it watches, by source key.
	routes []watchRef
	vhds   map[string]*vhdsHandler
	active bool
	// prev is the active version this warming one replaces; nil for a new listener.
	prev *ldsListener
}

// SetListeners gives the client the listener manager that LDS (dynamic_resources.lds_config)
// updates, and registers LDSInitTarget. Call it once, after New and before Run; without
// lds_config it does nothing.
func (c *Client) SetListeners(lm ListenerManager) error {
	dr := c.cfg.DynamicResources
	cs := dr.GetLdsConfig()
	if cs == nil {
		return nil
	}
	if dr.GetLdsResourcesLocator() != "" {
		return fmt.Errorf("dynamic_resources.lds_resources_locator = %q; xdstp:// locators are not supported", dr.GetLdsResourcesLocator())
	}
	src, err := resource.SourceFromProto(cs)
	if err != nil {
		return fmt.Errorf("dynamic_resources.lds_config.%w", err)
	}
	if src.Self {
		return errors.New("dynamic_resources.lds_config.self is not valid here; self needs a parent resource")
	}
	m, err := c.muxFor(src, resource.ListenerType)
	if err != nil {
		return fmt.Errorf("dynamic_resources.lds_config: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lds != nil || c.ran {
		return errors.New("xds: SetListeners called twice or after Run")
	}
	h := &ldsHandler{c: c, src: src, m: m, lm: lm, listeners: map[string]*ldsListener{}, failures: map[string]*failure{}, initPending: map[string]bool{}}
	if c.cfg.Init != nil {
		ready, err := c.cfg.Init(LDSInitTarget)
		if err != nil {
			return fmt.Errorf("xds: %w", err)
		}
		h.initReady = ready
	}
	h.reg = c.cfg.Stats.Register("listener_manager.lds.", &h.stats)
	c.lds = h
	return nil
}

// LDSStats returns the listener_manager.lds.* stats, or nil without LDS.
func (c *Client) LDSStats() *SubscriptionStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lds == nil {
		return nil
	}
	return &c.lds.stats
}

func (h *ldsHandler) startLocked() {
	h.stats.UpdateAttempt.Inc()
	h.m.addWatch(resource.ListenerType, h, true)
	if t := h.src.InitialFetchTimeout; t > 0 {
		h.initTimer = h.c.clock.AfterFunc(t, h.initTimeout)
	}
}

func (h *ldsHandler) stopLocked() {
	if h.initTimer != nil {
		h.initTimer.Stop()
	}
	for _, l := range h.listeners {
		l.release()
	}
	h.reg.Unregister()
}

func (h *ldsHandler) initTimeout() {
	c := h.c
	c.mu.Lock()
	if !h.initFetched {
		h.stats.InitFetchTimeout.Inc()
		h.stats.UpdateAttempt.Inc()
		c.log.Warnf("xds: LDS initial fetch timed out after %v", h.src.InitialFetchTimeout)
		h.fetchedLocked()
	}
	ready := h.takeReadyLocked()
	c.mu.Unlock()
	if ready != nil {
		ready()
	}
}

func (h *ldsHandler) fetchedLocked() {
	if h.initFetched {
		return
	}
	h.initFetched = true
	if h.initTimer != nil {
		h.initTimer.Stop()
	}
	for name, l := range h.listeners {
		if !l.active {
			h.initPending[name] = true
		}
	}
}

func (h *ldsHandler) takeReadyLocked() func() {
	if h.initReady == nil || !h.initFetched || len(h.initPending) != 0 {
		return nil
	}
	r := h.initReady
	h.initReady = nil
	return r
}

// release ends l's dependency subscriptions (and its predecessor's).
func (l *ldsListener) release() {
	for _, d := range l.deps {
		d.Cancel()
	}
	for _, u := range l.unwatch {
		u()
	}
	l.unwatch = nil
	l.deps = nil
	if l.prev != nil {
		l.prev.release()
		l.prev = nil
	}
}

func (h *ldsHandler) apply(_ *mux, u update) error {
	c := h.c
	c.mu.Lock()
	err := h.applyLocked(u)
	h.publishWarmingLocked()
	ready := h.takeReadyLocked()
	c.mu.Unlock()
	if ready != nil {
		ready()
	}
	return err
}

// applyLocked is apply under Client.mu. Valid listeners are applied even when others are
// rejected; a rejected listener keeps its previous version and shows in error_state.
func (h *ldsHandler) applyLocked(u update) error {
	c := h.c
	start := c.clock.Now()
	var errs []string
	seen := make(map[string]bool, len(u.resources))
	ignored := map[string]int{}
	defer xdswatch.LogIgnored(c.log, "LDS", "listener", ignored)
	for i, a := range u.resources {
		rl, err := resource.DecodeListener(a)
		if rl != nil {
			for _, f := range rl.Config.Ignored {
				ignored[f]++
			}
		}
		name := ""
		switch {
		case rl != nil:
			name = rl.Name
		case u.names != nil:
			name = u.names[i]
		default:
			name = resource.ListenerName(a)
		}
		if err == nil && u.names != nil && u.names[i] != name {
			err = fmt.Errorf("listener %q: resource name %q differs from the listener's name", name, u.names[i])
		}
		if err == nil && seen[name] {
			err = fmt.Errorf("listener %q: listed more than once in the response; listener names must be unique", name)
		}
		seen[name] = true
		if err == nil {
			err = h.offerLocked(rl, u.version, start)
		}
		if err != nil {
			errs = append(errs, err.Error())
			h.failures[name] = &failure{resource: a, at: start, details: err.Error(), version: u.version}
			continue
		}
		delete(h.failures, name)
	}
	removed := u.removed
	if u.full {
		removed = nil
		for name := range h.listeners {
			if !seen[name] {
				removed = append(removed, name)
			}
		}
		for name := range h.failures {
			if !seen[name] {
				delete(h.failures, name)
			}
		}
	}
	for _, name := range removed {
		h.removeLocked(name)
	}
	if len(errs) > 0 {
		h.stats.UpdateRejected.Inc()
		h.stats.UpdateAttempt.Inc()
		err := errors.New(strings.Join(errs, "; "))
		c.log.Warnf("xds: LDS update %q rejected: %v", u.version, err)
		h.fetchedLocked()
		return err
	}
	h.version = u.version
	h.stats.Accepted(u.version, c.clock.Now(), c.clock.Now().Sub(start))
	h.fetchedLocked()
	return nil
}

// offerLocked takes a decoded listener: unchanged ones are left alone; others subscribe to
// their dependencies and warm, or go to the listener manager at once when nothing is missing.
func (h *ldsHandler) offerLocked(rl *resource.Listener, version string, now time.Time) error {
	cur := h.listeners[rl.Name]
	if cur != nil && proto.Equal(cur.rl.Config.Proto, rl.Config.Proto) {
		return nil
	}
	if h.skipStoppedLocked(rl.Config) {
		return nil
	}
	nl := &ldsListener{rl: rl, version: version, updated: now}
	for _, d := range rl.Routes {
		ref, _, _, _, err := h.c.rds.subscribe(d.Source, d.Name, d.StatPrefix, func(uint64, any) { h.depChanged(nl) })
		if err != nil {
			nl.release()
			return fmt.Errorf("listener %q: rds %q: %w", rl.Name, d.Name, err)
		}
		nl.deps = append(nl.deps, ref)
		nl.routes = append(nl.routes, ref)
	}
	for _, d := range rl.Extensions {
		sub, err := h.c.watchExtension(d, func() { h.depChanged(nl) })
		if err != nil {
			nl.release()
			return fmt.Errorf("listener %q: extension config %q: %w", rl.Name, d.Name, err)
		}
		nl.deps = append(nl.deps, sub)
	}
	for _, d := range rl.ScopedRoutes {
		// The first update comes before watchScopes returns, under c.mu: it is not reported.
		w, err := h.c.watchScopes(d.Scoped, d.StatPrefix, false, func(uint64, []*routev3.ScopedRouteConfiguration, map[string]*routev3.RouteConfiguration) {
			h.depChanged(nl)
		})
		if err != nil {
			nl.release()
			return fmt.Errorf("listener %q: %w", rl.Name, err)
		}
		nl.scoped = append(nl.scoped, w)
		nl.unwatch = append(nl.unwatch, w.cancel)
	}
	for _, d := range rl.Secrets {
		sub, err := h.c.watchSecret(d, func() { h.depChanged(nl) })
		if err != nil {
			nl.release()
			return fmt.Errorf("listener %q: sds secret %q: %w", rl.Name, d.Name, err)
		}
		nl.deps = append(nl.deps, sub)
	}
	switch {
	case cur == nil:
	case cur.active:
		nl.prev = cur
	default: // replaced while warming: keep what it replaced
		nl.prev, cur.prev = cur.prev, nil
		cur.release()
	}
	h.listeners[rl.Name] = nl
	if !h.warmLocked(nl) {
		return nil
	}
	return h.activateLocked(nl)
}

// warmLocked reports whether every dependency of l has arrived or timed out.
func (h *ldsHandler) warmLocked(l *ldsListener) bool {
	for _, d := range l.deps {
		if !d.Ready() {
			return false
		}
	}
	for _, s := range l.scoped {
		if !s.ready() {
			return false
		}
	}
	return h.vhdsWarmLocked(l)
}

// vhdsWarmLocked reports whether the VHDS sources of l's route configurations (those with
// vhds) have answered or timed out, as Envoy's route configurations wait for their first VHDS
// update. It watches each source it meets, so that its answer re-checks l.
func (h *ldsHandler) vhdsWarmLocked(l *ldsListener) bool {
	for _, r := range l.routes {
		rc, _ := r.value().(*routev3.RouteConfiguration)
		cs := rc.GetVhds().GetConfigSource()
		if cs == nil {
			continue
		}
		key := string(mustMarshal(cs))
		vh := l.vhds[key]
		if vh == nil {
			var err error
			if vh, err = h.c.vhdsFor(cs); err != nil {
				h.c.log.Errorf("xds: listener %q: route_config %q: vhds: %v", l.rl.Name, rc.GetName(), err)
				continue
			}
			if l.vhds == nil {
				l.vhds = map[string]*vhdsHandler{}
			}
			l.vhds[key] = vh
			l.unwatch = append(l.unwatch, vh.watch(func() { h.depChanged(l) }))
		}
		if !vh.isReady() {
			return false
		}
	}
	return true
}

// activateLocked hands l to the listener manager. On failure the previous version (if any)
// stays active.
func (h *ldsHandler) activateLocked(l *ldsListener) error {
	name := l.rl.Name
	delete(h.initPending, name)
	if _, err := h.lm.AddOrUpdate(l.rl.Config, l.version); err != nil {
		prev := l.prev
		l.prev = nil
		l.release()
		if prev != nil {
			h.listeners[name] = prev
		} else {
			delete(h.listeners, name)
		}
		if h.skipStoppedLocked(l.rl.Config) {
			return nil // its direction stopped while it warmed
		}
		return fmt.Errorf("listener %q: %w", name, err)
	}
	l.active = true
	if l.prev != nil {
		l.prev.release()
		l.prev = nil
	}
	return nil
}

// depChanged re-checks a warming listener when one of its dependencies changes.
func (h *ldsHandler) depChanged(l *ldsListener) {
	c := h.c
	c.mu.Lock()
	if c.lds != h || h.listeners[l.rl.Name] != l || l.active || !h.warmLocked(l) {
		c.mu.Unlock()
		return
	}
	if err := h.activateLocked(l); err != nil {
		c.log.Errorf("xds: LDS: %v", err)
		a, _ := anypb.New(l.rl.Config.Proto)
		h.failures[l.rl.Name] = &failure{resource: a, at: c.clock.Now(), details: err.Error(), version: l.version}
	}
	h.publishWarmingLocked()
	ready := h.takeReadyLocked()
	c.mu.Unlock()
	if ready != nil {
		ready()
	}
}

// removeLocked removes an LDS listener: the active version drains in the listener manager.
func (h *ldsHandler) removeLocked(name string) {
	l := h.listeners[name]
	if l == nil {
		return
	}
	delete(h.listeners, name)
	delete(h.initPending, name)
	if l.active || l.prev != nil {
		if _, err := h.lm.Remove(name); err != nil {
			h.c.log.Errorf("xds: LDS: %v", err)
		}
	}
	l.release()
}

// failed counts a transport failure on LDS.
func (h *ldsHandler) failed(*mux) {
	h.stats.UpdateFailure.Inc()
	h.stats.UpdateAttempt.Inc()
}

// ListenersConfigDump is the listener manager's ListenersConfigDump (tracker key
// "listeners") with what LDS adds: version_info, the warming_state of listeners waiting for
// their routes or secrets, and the error_state of rejected ones (on the listener's entry, or an
// entry of its own). Without LDS it is the listener manager's dump. Safe for concurrent use.
func (c *Client) ListenersConfigDump(lm ListenerManager) func(match func(string) bool) proto.Message {
	return func(match func(string) bool) proto.Message {
		if match == nil {
			match = func(string) bool { return true }
		}
		base := lm.ConfigDump(match)
		dump, ok := base.(*adminv3.ListenersConfigDump)
		c.mu.Lock()
		defer c.mu.Unlock()
		h := c.lds
		if !ok || h == nil {
			return base
		}
		dump.VersionInfo = h.version
		byName := map[string]*adminv3.ListenersConfigDump_DynamicListener{}
		for _, d := range dump.DynamicListeners {
			byName[d.GetName()] = d
		}
		entry := func(name string) *adminv3.ListenersConfigDump_DynamicListener {
			d := byName[name]
			if d == nil {
				d = &adminv3.ListenersConfigDump_DynamicListener{Name: name}
				byName[name] = d
				dump.DynamicListeners = append(dump.DynamicListeners, d)
			}
			return d
		}
		for _, name := range sortedKeys(h.listeners) {
			l := h.listeners[name]
			if l.active || !match(name) {
				continue
			}
			a, err := anypb.New(l.rl.Config.Proto)
			if err != nil {
				continue
			}
			entry(name).WarmingState = &adminv3.ListenersConfigDump_DynamicListenerState{VersionInfo: l.version, Listener: a, LastUpdated: timestamppb.New(l.updated)}
		}
		for _, name := range sortedKeys(h.failures) {
			if !match(name) {
				continue
			}
			entry(name).ErrorState = h.failures[name].state()
		}
		return dump
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// stoppedSkipper is implemented by a listener manager whose traffic
// directions /drain_listeners can stop (listener.Manager does).
type stoppedSkipper interface {
	SkipIfStopped(l *config.Listener) bool
}

// skipStoppedLocked reports whether l belongs to a stopped traffic direction:
// Envoy skips such a listener and accepts the rest of the update, where a
// refusal would NACK listeners that have nothing to do with the stop.
func (h *ldsHandler) skipStoppedLocked(l *config.Listener) bool {
	s, ok := h.lm.(stoppedSkipper)
	if !ok || !s.SkipIfStopped(l) {
		return false
	}
	h.c.log.Infof("xds: LDS: listener %q skipped: listeners in its traffic direction are stopped", l.Name)
	return true
}

// warmingCounter is implemented by a listener manager that publishes
// listener_manager.total_listeners_warming (listener.Manager does).
type warmingCounter interface{ SetWarming(n int) }

// publishWarmingLocked gives the listener manager the number of listeners
// warming here, after every change of it.
func (h *ldsHandler) publishWarmingLocked() {
	w, ok := h.lm.(warmingCounter)
	if !ok {
		return
	}
	n := 0
	for _, l := range h.listeners {
		if !l.active {
			n++
		}
	}
	w.SetWarming(n)
}

// ListenerInitDumps is the listener part of /init_dump: one entry per
// warming LDS listener, or per LDS listener while the server initializes
// (started false: Envoy dumps its active listeners until the workers start,
// and every listener added by then is active), named as Envoy names a
// listener's init manager ("init manager Listener-local-init-manager <name>
// <config hash>"), with the dependencies it still waits for as Envoy names
// their init targets. A listener waiting on nothing named here (a VHDS
// answer, or nothing at all) has no targets. Without LDS it is empty. Safe
// for concurrent use.
func (c *Client) ListenerInitDumps(started bool) []*adminv3.UnreadyTargetsDumps_UnreadyTargetsDump {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.lds
	if h == nil {
		return nil
	}
	var out []*adminv3.UnreadyTargetsDumps_UnreadyTargetsDump
	for _, name := range sortedKeys(h.listeners) {
		l := h.listeners[name]
		if l.active && started {
			continue
		}
		out = append(out, &adminv3.UnreadyTargetsDumps_UnreadyTargetsDump{
			Name:        ListenerInitManagerName(name, l.rl.Config.Proto),
			TargetNames: l.pendingTargets(),
		})
	}
	return out
}

// pendingTargets names l's dependencies that have neither arrived nor timed
// out, with the init target names the server's init manager uses.
func (l *ldsListener) pendingTargets() []string {
	var out []string
	for _, d := range l.deps {
		if t := d.InitTarget(); !d.Ready() && t != "" {
			out = append(out, "target "+t)
		}
	}
	for _, s := range l.scoped {
		if !s.ready() {
			out = append(out, "target "+srdsInitTarget(s.name))
		}
	}
	return out
}

// ListenerInitTargets names the init targets l's dependencies on the client's own types
// register while the server initializes (a static listener's RDS and SRDS subscriptions; its
// ECDS configurations are the connection manager's, httpproxy.ECDSInitTarget, and its SDS
// secrets TLS's, tlsutil.SDSInitTarget), in /init_dump's spelling
// ("target <name>"); ready reports whether the server's target of that name is done.
func ListenerInitTargets(l *resource.Listener, ready func(target string) bool) []string {
	var out []string
	add := func(target string) {
		if !ready(target) {
			out = append(out, "target "+target)
		}
	}
	for _, d := range l.Routes {
		add(rdsKind.initTarget(d.Name))
	}
	for _, d := range l.ScopedRoutes {
		add(srdsInitTarget(d.Name))
	}
	return out
}

// ListenerInitManagerName is Envoy's name of a listener's init manager in
// /init_dump.
func ListenerInitManagerName(name string, config proto.Message) string {
	return "init manager Listener-local-init-manager " + name + " " + strconv.FormatUint(configHash(config), 10)
}

// configHash identifies a listener's configuration in its init manager's
// name, as Envoy's hash of the listener message does.
func configHash(m proto.Message) uint64 {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	f := fnv.New64a()
	f.Write(b)
	return f.Sum64()
}
