package xds

import (
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/xds/resource"
	xdswatch "github.com/legateproxy/legate/xds/watch"
)

// namedKind describes one resource type watched by name (Watch): how its resources decode.
// The stats and init target of each subscription come from the Type that made it.
type namedKind struct {
	typeURL string
	// short names the type in logs ("RDS").
	short string
	// decode validates a resource and returns its name and its value for the watchers.
	decode func(a *anypb.Any) (name string, val any, err error)
}

// vetted is what the watchers' checks found of one resource (vet): err rejects it; discard
// releases what the Builds that accepted it built, for when it is rejected (by err or
// otherwise) or not applied.
type vetted struct {
	err     error
	discard []func()
}

// subExtra is what an Observed type adds to each of its subscriptions: more stats and how to
// record them.
// The functions run under the handler's lock; any may be nil.
type subExtra struct {
	// changed records an accepted change.
	changed func()
	// failed records a rejected resource or an initial fetch timeout.
	failed func()
	// done ends the stats when the subscription ends.
	done func()
	// observer is an Observed type's, for its owner (watch.Subscription.Observer).
	observer xdswatch.Observer
}

// watchFunc receives a subscription's value: after every accepted change, and with
// a nil value when the first fetch times out or the resource is removed. It is called without
// any xds lock held, on a transport or timer goroutine.
type watchFunc func(val any)

// namedHandler keeps the subscriptions of one watched resource type, shared by every user of a
// (transport, name) pair and reference counted by watchers.
//
// Concurrency: mu guards subs and every subscription's fields. Lock order: Client.mu, then
// Client.muxMu, then namedHandler.mu, then a mux's mu. Watchers are called with no lock held.
type namedHandler struct {
	c    *Client
	kind *namedKind

	mu      sync.Mutex
	subs    map[string]*namedSub // by serviceKey(mux, name)
	watched map[*mux]bool
	nextID  uint64
}

// namedSub is one subscribed resource.
type namedSub struct {
	m    *mux
	name string
	// typ is the Type of the watch that made the subscription: it names its stats and init
	// target.
	typ      xdswatch.Type
	watchers map[uint64]watchFunc
	// checks are the checks of the watchers that are watch.Checkers, by watcher id.
	checks map[uint64]xdswatch.Check
	// val, raw, version and updated are the last accepted resource.
	val     any
	raw     *anypb.Any
	version string
	updated time.Time
	failure *adminv3.UpdateFailureState
	// ready is set once the first value arrived or the initial fetch timed out.
	ready     bool
	timer     clock.Timer
	initReady func()
	stats     SubscriptionStats
	reg       *stats.Registration
	extra     subExtra
}

func newNamedHandler(c *Client, kind *namedKind) *namedHandler {
	return &namedHandler{c: c, kind: kind, subs: map[string]*namedSub{}, watched: map[*mux]bool{}}
}

// watchRef identifies one watcher of one subscription; release ends it.
type watchRef struct {
	h   *namedHandler
	sub *namedSub
	id  uint64
}

// subscribe adds fn as a watcher of the resource called name on src, subscribing when it is
// the first, with t naming the subscription's stats and init target.
func (h *namedHandler) subscribe(src resource.Source, name string, t xdswatch.Type, fn watchFunc) (watchRef, error) {
	m, started, err := h.c.muxForStarted(src, h.kind.typeURL)
	if err != nil {
		return watchRef{}, err
	}
	h.mu.Lock()
	if !h.watched[m] {
		h.watched[m] = true
		m.addWatch(h.kind.typeURL, h, false)
	}
	key := serviceKey(m, name)
	sub := h.subs[key]
	if sub == nil {
		sub = &namedSub{m: m, name: name, typ: t, watchers: map[uint64]watchFunc{}}
		sub.reg = h.c.cfg.Stats.Register(t.StatPrefix(name), &sub.stats)
		sub.extra = observe(t, name)
		sub.stats.UpdateAttempt.Inc()
		if d := src.InitialFetchTimeout; d > 0 {
			sub.timer = h.c.clock.AfterFunc(d, func() { h.initTimeout(sub) })
		}
		if target := t.InitTarget(name); !started && h.c.cfg.Init != nil && target != "" {
			if ready, err := h.c.cfg.Init(target); err == nil {
				sub.initReady = ready
			}
		}
		h.subs[key] = sub
		m.setNames(h.kind.typeURL, []string{name}, nil)
	}
	h.nextID++
	id := h.nextID
	sub.watchers[id] = fn
	h.mu.Unlock()
	return watchRef{h: h, sub: sub, id: id}, nil
}

// release ends the watch; the last watcher unsubscribes. Releasing twice is harmless.
func (r watchRef) release() {
	if r.h == nil {
		return
	}
	h, sub := r.h, r.sub
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := sub.watchers[r.id]; !ok {
		return
	}
	delete(sub.watchers, r.id)
	delete(sub.checks, r.id)
	if len(sub.watchers) > 0 {
		return
	}
	key := serviceKey(sub.m, sub.name)
	if h.subs[key] != sub {
		return
	}
	delete(h.subs, key)
	if sub.timer != nil {
		sub.timer.Stop()
	}
	sub.reg.Unregister()
	if sub.extra.done != nil {
		sub.extra.done()
	}
	if sub.initReady != nil {
		go sub.initReady() // never block initialization on a subscription nobody wants
		sub.initReady = nil
	}
	sub.m.setNames(h.kind.typeURL, nil, []string{sub.name})
}

// ready reports whether the watched resource arrived or its first fetch timed out.
func (r watchRef) ready() bool {
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	return r.sub.ready
}

// value returns the subscription's current value (nil until one arrives).
func (r watchRef) value() any {
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	return r.sub.val
}

// notice is a pending watcher call.
type notice struct {
	fn  watchFunc
	val any
}

func (sub *namedSub) noticesLocked() []notice {
	out := make([]notice, 0, len(sub.watchers))
	for _, fn := range sub.watchers {
		out = append(out, notice{fn, sub.val})
	}
	return out
}

// markReadyLocked ends the initial fetch of sub.
func (sub *namedSub) markReadyLocked() (initReady func()) {
	sub.ready = true
	if sub.timer != nil {
		sub.timer.Stop()
		sub.timer = nil
	}
	initReady, sub.initReady = sub.initReady, nil
	return initReady
}

func (h *namedHandler) initTimeout(sub *namedSub) {
	h.mu.Lock()
	if sub.ready || h.subs[serviceKey(sub.m, sub.name)] != sub {
		h.mu.Unlock()
		return
	}
	sub.stats.InitFetchTimeout.Inc()
	sub.stats.UpdateAttempt.Inc()
	if sub.extra.failed != nil {
		sub.extra.failed()
	}
	h.c.log.Warnf("xds: %s %q: initial fetch timed out", h.kind.short, sub.name)
	initReady := sub.markReadyLocked()
	ns := sub.noticesLocked()
	h.mu.Unlock()
	runNotices(ns, initReady)
}

func runNotices(ns []notice, initReady ...func()) {
	for _, n := range ns {
		n.fn(n.val)
	}
	for _, f := range initReady {
		if f != nil {
			f()
		}
	}
}

// apply applies a response: each subscribed resource that decodes replaces the previous
// value; one that does not is NACKed while the previous value keeps serving. Resources nobody
// subscribed are ignored. A delta removal hands the watchers a nil value.
func (h *namedHandler) apply(src *mux, u update) error {
	start := h.c.clock.Now()
	decoded := h.decodeAll(u)
	vetoes := h.vet(src, u, decoded)
	var errs []string
	var ns []notice
	var readies, discards []func()
	h.mu.Lock()
	for i, a := range u.resources {
		name, val, err := decoded[i].name, decoded[i].val, decoded[i].err
		if err == nil && vetoes[i].err != nil {
			err = vetoes[i].err
		}
		sub := h.subs[serviceKey(src, name)]
		if err != nil || sub == nil {
			// What the checks built for a resource that is not applied goes at once.
			discards = append(discards, vetoes[i].discard...)
		}
		if err != nil {
			errs = append(errs, err.Error())
			if sub != nil {
				sub.stats.UpdateRejected.Inc()
				sub.stats.UpdateAttempt.Inc()
				sub.failure = xdswatch.FailureState(a, start, err, u.version)
				if sub.extra.failed != nil {
					sub.extra.failed()
				}
				// A rejected first answer ends the initial fetch, so that what waits for it (a
				// listener, the server's initialization) proceeds without it, as every one of
				// Envoy's subscriptions does in onConfigUpdateFailed ("allow server startup to
				// continue even if we have a bad config").
				if !sub.ready {
					readies = append(readies, sub.markReadyLocked())
					ns = append(ns, sub.noticesLocked()...)
				}
			}
			continue
		}
		if sub == nil {
			continue
		}
		sub.failure = nil
		now := h.c.clock.Now()
		sub.stats.Accepted(u.version, now, now.Sub(start))
		sub.version = u.version
		readies = append(readies, sub.markReadyLocked())
		if sub.raw != nil && proto.Equal(sub.raw, a) {
			discards = append(discards, vetoes[i].discard...)
			continue
		}
		sub.val, sub.raw, sub.updated = val, a, now
		if sub.extra.changed != nil {
			sub.extra.changed()
		}
		ns = append(ns, sub.noticesLocked()...)
	}
	for _, name := range u.removed {
		sub := h.subs[serviceKey(src, name)]
		if sub == nil {
			continue
		}
		// A (delta) response that removes the resource is a successful update of the
		// subscription, as Envoy's gRPC subscriptions count it (update_success, version_text).
		now := h.c.clock.Now()
		sub.stats.Accepted(u.version, now, now.Sub(start))
		if sub.val == nil {
			continue
		}
		sub.val, sub.raw, sub.updated = nil, nil, now
		ns = append(ns, sub.noticesLocked()...)
	}
	h.mu.Unlock()
	for _, d := range discards {
		d()
	}
	runNotices(ns, readies...)
	if len(errs) > 0 {
		err := errors.New(strings.Join(errs, "; "))
		h.c.log.Warnf("xds: %s update %q rejected: %v", h.kind.short, u.version, err)
		return err
	}
	return nil
}

// decodedResource is one resource of a response, decoded: the name it goes by and its value,
// or why it is rejected.
type decodedResource struct {
	name string
	val  any
	err  error
}

// decodeAll decodes the resources of u (without locks: decoders keep no state of the
// handler's), naming each by its decoder, else its delta name.
func (h *namedHandler) decodeAll(u update) []decodedResource {
	out := make([]decodedResource, len(u.resources))
	for i, a := range u.resources {
		name, val, err := h.kind.decode(a)
		if name == "" && u.names != nil {
			name = u.names[i]
		}
		if name == "" {
			name = resource.NamedResourceName(a)
		}
		if err == nil && u.names != nil && u.names[i] != name {
			err = errors.New(h.kind.short + " resource name " + u.names[i] + " differs from the resource's name " + name)
		}
		out[i] = decodedResource{name: name, val: val, err: err}
	}
	return out
}

// vet runs the watchers' checks (watch.Checker) on the new values of a response before it is
// applied, and returns their outcome by resource index: for each decoded resource whose
// subscription has checks and whose value changed, first every watcher's Accept, then every
// Build, so that nothing is built for a value some watcher refuses. Checks run without
// locks, in the order the watches were made.
func (h *namedHandler) vet(src *mux, u update, decoded []decodedResource) map[int]vetted {
	type job struct {
		i      int
		checks []xdswatch.Check
	}
	var jobs []job
	h.mu.Lock()
	for i, d := range decoded {
		if d.err != nil {
			continue
		}
		sub := h.subs[serviceKey(src, d.name)]
		if sub == nil || len(sub.checks) == 0 || (sub.raw != nil && proto.Equal(sub.raw, u.resources[i])) {
			continue
		}
		ids := make([]uint64, 0, len(sub.checks))
		for id := range sub.checks {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
		j := job{i: i}
		for _, id := range ids {
			j.checks = append(j.checks, sub.checks[id])
		}
		jobs = append(jobs, j)
	}
	h.mu.Unlock()
	var out map[int]vetted
	for _, j := range jobs {
		v := vetChecks(j.checks, decoded[j.i].val)
		if v.err != nil || v.discard != nil {
			if out == nil {
				out = map[int]vetted{}
			}
			out[j.i] = v
		}
	}
	return out
}

// vetChecks runs checks on val: the Accepts, then the Builds (a StandIn one only when no
// other has one). When one refuses, what the Builds before it built is released at once,
// and the error returned.
func vetChecks(checks []xdswatch.Check, val any) vetted {
	for _, c := range checks {
		if c.Accept == nil {
			continue
		}
		if err := c.Accept(val); err != nil {
			return vetted{err: err}
		}
	}
	own := false
	for _, c := range checks {
		own = own || (c.Build != nil && !c.StandIn)
	}
	var v vetted
	for _, c := range checks {
		if c.Build == nil || (c.StandIn && own) {
			continue
		}
		discard, err := c.Build(val)
		if err != nil {
			for _, d := range v.discard {
				d()
			}
			return vetted{err: err}
		}
		if discard != nil {
			v.discard = append(v.discard, discard)
		}
	}
	return v
}

// failed counts a transport failure on every subscription of src.
func (h *namedHandler) failed(src *mux) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, sub := range h.subs {
		if sub.m == src {
			sub.stats.UpdateFailure.Inc()
			sub.stats.UpdateAttempt.Inc()
		}
	}
}

// states returns the subscriptions sorted by name (then transport), for the config dumps.
func (h *namedHandler) states() []xdswatch.State {
	h.mu.Lock()
	defer h.mu.Unlock()
	keys := make([]string, 0, len(h.subs))
	for k := range h.subs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := h.subs[keys[i]], h.subs[keys[j]]
		if a.name != b.name {
			return a.name < b.name
		}
		return keys[i] < keys[j]
	})
	out := make([]xdswatch.State, 0, len(keys))
	for _, k := range keys {
		s := h.subs[k]
		out = append(out, xdswatch.State{Name: s.name, Version: s.version, Resource: s.raw, Updated: s.updated, ErrorState: s.failure})
	}
	return out
}

// stop ends the subscriptions' timers and unregisters their stats (Run's end).
func (h *namedHandler) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.subs {
		if s.timer != nil {
			s.timer.Stop()
		}
	}
}
