package lds

import (
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/logging"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/xds/resource"
	"github.com/legateproxy/legate/xds/watch"
)

// InitTarget is the name of the init target LDS registers: ready once the first LDS response
// (or its initial_fetch_timeout) has been handled and every listener it delivered has finished
// warming or failed.
const InitTarget = "LDS"

// ListenerManager is what LDS drives (listener.Manager implements it). AddOrUpdate replaces
// a listener in place or by draining the old version, so established connections survive.
type ListenerManager interface {
	AddOrUpdate(l *config.Listener, versionInfo string) (bool, error)
	Remove(name string) (bool, error)
	ConfigDump(match func(string) bool) proto.Message
}

// Dependencies subscribes to what a listener warms on (its route configurations, scoped
// routes, discovered filter configurations and secrets; Owners.Watch). onChange
// runs, without the subscriptions' locks, after each change of one of them; the first values
// are not reported (the owner asks Warming.Ready). It is called under the LDS lock.
type Dependencies func(rl *resource.Listener, onChange func()) (Warming, error)

// Warming is one listener version's hold on its dependencies. Its methods are called under
// the LDS lock.
type Warming interface {
	// Ready reports whether every dependency has arrived or timed out.
	Ready() bool
	// PendingTargets names, for /init_dump, the init targets of the dependencies still
	// awaited ("target <name>").
	PendingTargets() []string
	// Release ends the subscriptions.
	Release()
}

// Config holds an LDS's configuration and dependencies. Client, Deps, Listeners and Stats are
// required; every other field has the default stated in its comment.
type Config struct {
	// Client is the xDS client the subscription goes through.
	Client watch.Streams
	// Deps subscribes to the listeners' dependencies.
	Deps Dependencies
	// DynamicResources is the bootstrap's dynamic_resources: its lds_config (and
	// lds_resources_locator) are read. Without lds_config, New returns nil.
	DynamicResources *bootstrapv3.Bootstrap_DynamicResources
	// Listeners is the listener manager LDS updates.
	Listeners ListenerManager
	// Stats is the store for listener_manager.lds.*.
	Stats *stats.Store
	// Logger logs rejected updates; nil discards.
	Logger *logging.Logger
	// Init registers the LDS init target (InitTarget); nil means none.
	Init func(name string) (ready func(), err error)
	// Clock schedules the initial fetch timeout; nil means the system clock.
	Clock clock.Clock
	// Extensions decode the listeners' network filters (config.ListenerFromProto); the
	// listener manager's registry.
	Extensions *registry.Registry
}

// LDS is the listener manager's xDS side: a wildcard LDS subscription whose listeners warm
// (their dependencies are subscribed) until every dependency has arrived or timed out, then
// go to the listener manager, replacing the previous version, which drains.
//
// Concurrency: New, Start and Stop are called once by the server. The xDS client calls Apply
// and Failed on its transport goroutine, the initial fetch timer and the dependencies'
// watchers call in on theirs; mu guards every field below and serialises the updates. Lock
// order: mu, the listener manager's, the dependencies' and the xDS client's locks. The dumps
// may be called from any goroutine.
type LDS struct {
	cfg   Config
	log   *logging.Logger
	clock clock.Clock
	src   resource.Source
	lm    ListenerManager

	mu    sync.Mutex
	stats watch.SubscriptionStats
	reg   *stats.Registration

	// listeners are the accepted LDS listeners by name: active, or warming (with the active
	// version it replaces in prev).
	listeners map[string]*ldsListener
	failures  map[string]*adminv3.UpdateFailureState
	version   string

	initReady   func()
	initTimer   clock.Timer
	initFetched bool
	initPending map[string]bool
	stopped     bool
	// cs is lds_config, subscribed to by Start.
	cs *corev3.ConfigSource
}

// ldsListener is one accepted version of an LDS listener.
type ldsListener struct {
	rl      *Listener
	version string
	updated time.Time
	deps    Warming
	active  bool
	// prev is the active version this warming one replaces; nil for a new listener.
	prev *ldsListener
}

// New validates lds_config and registers InitTarget; Start subscribes to every listener it
// delivers and starts the initial fetch. Without lds_config it returns nil.
func New(cfg Config) (*LDS, error) {
	dr := cfg.DynamicResources
	cs := dr.GetLdsConfig()
	if cs == nil {
		return nil, nil
	}
	if cfg.Client == nil || cfg.Deps == nil || cfg.Listeners == nil || cfg.Stats == nil {
		return nil, errors.New("lds: Client, Deps, Listeners and Stats are required")
	}
	if dr.GetLdsResourcesLocator() != "" {
		return nil, fmt.Errorf("dynamic_resources.lds_resources_locator = %q; xdstp:// locators are not supported", dr.GetLdsResourcesLocator())
	}
	src, err := resource.SourceFromProto(cs)
	if err != nil {
		return nil, fmt.Errorf("dynamic_resources.lds_config.%w", err)
	}
	if src.Self {
		return nil, errors.New("dynamic_resources.lds_config.self is not valid here; self needs a parent resource")
	}
	h := &LDS{cfg: cfg, log: cfg.Logger, clock: cfg.Clock, src: src, lm: cfg.Listeners, listeners: map[string]*ldsListener{}, failures: map[string]*adminv3.UpdateFailureState{}, initPending: map[string]bool{}}
	if h.clock == nil {
		h.clock = clock.Real()
	}
	if src.ADS && !cfg.Client.HasADS() {
		return nil, errors.New("dynamic_resources.lds_config: ads is set but dynamic_resources.ads_config is not")
	}
	h.cs = cs
	if cfg.Init != nil {
		ready, err := cfg.Init(InitTarget)
		if err != nil {
			return nil, fmt.Errorf("xds: %w", err)
		}
		h.initReady = ready
	}
	h.reg = cfg.Stats.Register("listener_manager.lds.", &h.stats)
	return h, nil
}

// Stats returns the listener_manager.lds.* stats.
func (h *LDS) Stats() *watch.SubscriptionStats { return &h.stats }

// Start subscribes to the listeners (the client sends the request now, or once it runs),
// counts the subscription's start and starts the initial fetch timeout. The server calls it
// once the cluster manager's dynamic clusters are initialized, as Envoy starts LDS: a
// listener's routes may name a CDS cluster, and a route table naming a cluster the cluster
// manager does not know yet would be refused. After Stop it does nothing.
func (h *LDS) Start() {
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return
	}
	h.stats.UpdateAttempt.Inc()
	if t := h.src.InitialFetchTimeout; t > 0 {
		h.initTimer = h.clock.AfterFunc(t, h.initTimeout)
	}
	h.mu.Unlock()
	// Outside mu: the first response may be applied (Apply takes mu) as soon as this returns.
	if _, err := h.cfg.Client.Stream(watch.ListenerType, h.cs, true, h); err != nil {
		h.log.Errorf("xds: dynamic_resources.lds_config: %v", err)
	}
}

// Stop ends the timer and the listeners' subscriptions and unregisters the stats, after the
// client stopped.
func (h *LDS) Stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	if h.initTimer != nil {
		h.initTimer.Stop()
	}
	for _, l := range h.listeners {
		l.release()
	}
	h.reg.Unregister()
}

func (h *LDS) initTimeout() {
	h.mu.Lock()
	defer h.unlockAndReady()
	if !h.initFetched {
		h.stats.InitFetchTimeout.Inc()
		h.stats.UpdateAttempt.Inc()
		h.log.Warnf("xds: LDS initial fetch timed out after %v", h.src.InitialFetchTimeout)
		h.fetchedLocked()
	}
}

func (h *LDS) fetchedLocked() {
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

// unlockAndReady releases mu, then completes the init target when initialization just
// completed (exactly once).
func (h *LDS) unlockAndReady() {
	var ready func()
	if h.initReady != nil && h.initFetched && len(h.initPending) == 0 {
		ready, h.initReady = h.initReady, nil
	}
	h.mu.Unlock()
	if ready != nil {
		ready()
	}
}

// release ends l's dependency subscriptions (and its predecessor's).
func (l *ldsListener) release() {
	if l.deps != nil {
		l.deps.Release()
	}
	if l.prev != nil {
		l.prev.release()
		l.prev = nil
	}
}

// Apply applies an LDS response. Valid listeners are applied even when others are rejected;
// a rejected listener keeps its previous version and shows in error_state.
func (h *LDS) Apply(_ watch.Stream, u watch.Response) error {
	h.mu.Lock()
	defer h.unlockAndReady()
	err := h.applyLocked(u)
	h.publishWarmingLocked()
	return err
}

// Failed counts a transport failure on LDS.
func (h *LDS) Failed(watch.Stream) {
	h.stats.UpdateFailure.Inc()
	h.stats.UpdateAttempt.Inc()
}

// applyLocked is Apply under mu.
func (h *LDS) applyLocked(u watch.Response) error {
	start := h.clock.Now()
	var errs []string
	names := watch.NewNaming("listener", &u)
	ignored := map[string]int{}
	defer watch.LogIgnored(h.log, "LDS", "listener", ignored)
	for i, a := range u.Resources {
		rl, err := DecodeListener(a, h.cfg.Extensions)
		if rl != nil {
			for _, f := range rl.Config.Ignored {
				ignored[f]++
			}
		}
		decoded := ""
		if rl != nil {
			decoded = rl.Name
		}
		name, err := names.Name(i, decoded, resource.ListenerName, err)
		if err == nil {
			err = h.offerLocked(rl, u.Version, start)
		}
		if err != nil {
			errs = append(errs, err.Error())
			h.failures[name] = watch.FailureState(a, start, err, u.Version)
			continue
		}
		delete(h.failures, name)
	}
	removed := u.Removed
	if u.Full {
		removed = nil
		for name := range h.listeners {
			if !names.Seen(name) {
				removed = append(removed, name)
			}
		}
		for name := range h.failures {
			if !names.Seen(name) {
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
		h.log.Warnf("xds: LDS update %q rejected: %v", u.Version, err)
		h.fetchedLocked()
		return err
	}
	h.version = u.Version
	h.stats.Accepted(u.Version, h.clock.Now(), h.clock.Now().Sub(start))
	h.fetchedLocked()
	return nil
}

// offerLocked takes a decoded listener: unchanged ones are left alone; others subscribe to
// their dependencies and warm, or go to the listener manager at once when nothing is missing.
func (h *LDS) offerLocked(rl *Listener, version string, now time.Time) error {
	cur := h.listeners[rl.Name]
	if cur != nil && proto.Equal(cur.rl.Config.Proto, rl.Config.Proto) {
		return nil
	}
	if h.skipStoppedLocked(rl.Config) {
		return nil
	}
	nl := &ldsListener{rl: rl, version: version, updated: now}
	deps, err := h.cfg.Deps(rl.Listener, func() { h.depChanged(nl) })
	if err != nil {
		return err
	}
	nl.deps = deps
	switch {
	case cur == nil:
	case cur.active:
		nl.prev = cur
	default: // replaced while warming: keep what it replaced
		nl.prev, cur.prev = cur.prev, nil
		cur.release()
	}
	h.listeners[rl.Name] = nl
	if !nl.deps.Ready() {
		return nil
	}
	return h.activateLocked(nl)
}

// activateLocked hands l to the listener manager. On failure the previous version (if any)
// stays active.
func (h *LDS) activateLocked(l *ldsListener) error {
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
func (h *LDS) depChanged(l *ldsListener) {
	h.mu.Lock()
	defer h.unlockAndReady()
	if h.stopped || h.listeners[l.rl.Name] != l || l.active || !l.deps.Ready() {
		return
	}
	if err := h.activateLocked(l); err != nil {
		h.log.Errorf("xds: LDS: %v", err)
		a, _ := anypb.New(l.rl.Config.Proto)
		h.failures[l.rl.Name] = watch.FailureState(a, h.clock.Now(), err, l.version)
	}
	h.publishWarmingLocked()
}

// removeLocked removes an LDS listener: the active version drains in the listener manager.
func (h *LDS) removeLocked(name string) {
	l := h.listeners[name]
	if l == nil {
		return
	}
	delete(h.listeners, name)
	delete(h.initPending, name)
	if l.active || l.prev != nil {
		if _, err := h.lm.Remove(name); err != nil {
			h.log.Errorf("xds: LDS: %v", err)
		}
	}
	l.release()
}

// ConfigDump is the listener manager's ListenersConfigDump (tracker key "listeners") with
// what LDS adds: version_info, the warming_state of listeners waiting for their routes or
// secrets, and the error_state of rejected ones (on the listener's entry, or an entry of its
// own). Safe for concurrent use.
func (h *LDS) ConfigDump(match func(string) bool) proto.Message {
	if match == nil {
		match = func(string) bool { return true }
	}
	base := h.lm.ConfigDump(match)
	dump, ok := base.(*adminv3.ListenersConfigDump)
	if !ok {
		return base
	}
	h.mu.Lock()
	defer h.mu.Unlock()
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
	for _, name := range slices.Sorted(maps.Keys(h.listeners)) {
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
	for _, name := range slices.Sorted(maps.Keys(h.failures)) {
		if !match(name) {
			continue
		}
		entry(name).ErrorState = proto.Clone(h.failures[name]).(*adminv3.UpdateFailureState)
	}
	return dump
}

// stoppedSkipper is implemented by a listener manager whose traffic
// directions /drain_listeners can stop (listener.Manager does).
type stoppedSkipper interface {
	SkipIfStopped(l *config.Listener) bool
}

// skipStoppedLocked reports whether l belongs to a stopped traffic direction:
// Envoy skips such a listener and accepts the rest of the update, where a
// refusal would NACK listeners that have nothing to do with the stop.
func (h *LDS) skipStoppedLocked(l *config.Listener) bool {
	s, ok := h.lm.(stoppedSkipper)
	if !ok || !s.SkipIfStopped(l) {
		return false
	}
	h.log.Infof("xds: LDS: listener %q skipped: listeners in its traffic direction are stopped", l.Name)
	return true
}

// warmingCounter is implemented by a listener manager that publishes
// listener_manager.total_listeners_warming (listener.Manager does).
type warmingCounter interface{ SetWarming(n int) }

// publishWarmingLocked gives the listener manager the number of listeners
// warming here, after every change of it.
func (h *LDS) publishWarmingLocked() {
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

// InitDumps is the listener part of /init_dump: one entry per warming LDS listener, or per
// LDS listener while the server initializes (started false: Envoy dumps its active listeners
// until the workers start, and every listener added by then is active), named as Envoy names
// a listener's init manager ("init manager Listener-local-init-manager <name> <config
// hash>"), with the dependencies it still waits for as Envoy names their init targets. A
// listener waiting on nothing named here (a VHDS answer, or nothing at all) has no targets.
// Safe for concurrent use.
func (h *LDS) InitDumps(started bool) []*adminv3.UnreadyTargetsDumps_UnreadyTargetsDump {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*adminv3.UnreadyTargetsDumps_UnreadyTargetsDump
	for _, name := range slices.Sorted(maps.Keys(h.listeners)) {
		l := h.listeners[name]
		if l.active && started {
			continue
		}
		out = append(out, &adminv3.UnreadyTargetsDumps_UnreadyTargetsDump{
			Name:        InitManagerName(name, l.rl.Config.Proto),
			TargetNames: l.deps.PendingTargets(),
		})
	}
	return out
}

// InitManagerName is Envoy's name of a listener's init manager in /init_dump.
func InitManagerName(name string, config proto.Message) string {
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
