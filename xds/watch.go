package xds

import (
	"errors"
	"fmt"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/stats"

	"github.com/legateproxy/legate/xds/resource"
	xdswatch "github.com/legateproxy/legate/xds/watch"
)

var _ xdswatch.Client = (*Client)(nil)

// Watch subscribes w to the resource of type t called name, delivered by the config source
// cs: the watch API of package xds/watch, through which the owners of resource types (the
// runtime's RTDS) subscribe. Subscriptions made before Run register t's init target.
func (c *Client) Watch(t xdswatch.Type, cs *corev3.ConfigSource, name string, w xdswatch.Watcher) (xdswatch.Subscription, error) {
	src, err := resource.SourceFromProto(cs)
	if err != nil {
		return nil, err
	}
	if src.Self {
		return nil, errors.New("self is not supported")
	}
	h, err := c.watchedHandler(t)
	if err != nil {
		return nil, err
	}
	ref, _, _, _, err := h.subscribe(src, name, "", func(_ uint64, v any) { w.Update(v) })
	if err != nil {
		return nil, err
	}
	if ck, ok := w.(xdswatch.Checker); ok {
		ref.setCheck(ck.Check())
	}
	return ref, nil
}

// Ready, Value, InitTarget, Observer and Cancel make a watchRef a watch.Subscription.
func (r watchRef) Ready() bool        { return r.ready() }
func (r watchRef) Value() any         { return r.value() }
func (r watchRef) InitTarget() string { return r.h.initTarget(r.sub.name) }
func (r watchRef) Cancel()            { r.release() }

// Observer returns the subscription's Observer; it is set when the subscription is made and
// never changes.
func (r watchRef) Observer() xdswatch.Observer { return r.sub.extra.observer }

// setCheck adds check to the checks of r's subscription, which vet runs on every new value
// before the watchers see it.
func (r watchRef) setCheck(check xdswatch.Check) {
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	if _, live := r.sub.watchers[r.id]; live && (check.Accept != nil || check.Build != nil) {
		if r.sub.checks == nil {
			r.sub.checks = map[uint64]xdswatch.Check{}
		}
		r.sub.checks[r.id] = check
	}
}

// watchedHandler returns the subscriptions of t, made on its first watch. A type the client
// still handles itself cannot be watched: two handlers of one type would share its streams.
func (c *Client) watchedHandler(t xdswatch.Type) (*namedHandler, error) {
	url := t.TypeURL()
	for _, h := range []*namedHandler{c.rds} {
		if h.kind.typeURL == url {
			return nil, fmt.Errorf("xds: %s resources are handled by the client; they cannot be watched", resource.ShortType(url))
		}
	}
	c.muxMu.Lock()
	defer c.muxMu.Unlock()
	h := c.watched[url]
	if h == nil {
		h = newNamedHandler(c, &namedKind{
			typeURL:    url,
			short:      t.Short(),
			decode:     func(_ *Client, a *anypb.Any) (string, any, error) { return t.Decode(a) },
			statPrefix: func(name, _ string) string { return t.StatPrefix(name) },
			initTarget: t.InitTarget,
			extra:      observe(t),
		})
		c.watched[url] = h
	}
	return h, nil
}

// watchedStates returns the subscriptions of the watched type typeURL, for the config dumps.
func (c *Client) watchedStates(typeURL string) []namedState {
	c.muxMu.Lock()
	h := c.watched[typeURL]
	c.muxMu.Unlock()
	if h == nil {
		return nil
	}
	return h.states()
}

// namedHandlers returns every named-resource handler: the client's own and the watched types'.
func (c *Client) namedHandlers() []*namedHandler {
	out := []*namedHandler{c.rds}
	c.muxMu.Lock()
	for _, h := range c.watched {
		out = append(out, h)
	}
	c.muxMu.Unlock()
	return out
}

// observe returns the extra stats of t's subscriptions: its Observers when t is Observed.
func observe(t xdswatch.Type) func(*stats.Store, string, string) subExtra {
	ot, ok := t.(xdswatch.Observed)
	if !ok {
		return nil
	}
	return func(_ *stats.Store, name, _ string) subExtra {
		o := ot.Observe(name)
		return subExtra{
			changed:  func(time.Time, time.Duration) { o.Changed() },
			failed:   o.Failed,
			done:     o.Done,
			observer: o,
		}
	}
}
