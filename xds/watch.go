package xds

import (
	"errors"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/legateproxy/legate/xds/resource"
	xdswatch "github.com/legateproxy/legate/xds/watch"
)

var (
	_ xdswatch.Client = (*Client)(nil)
	_ xdswatch.States = (*Client)(nil)
)

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
	h := c.watchedHandler(t)
	ref, err := h.subscribe(src, name, t, w.Update)
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
func (r watchRef) InitTarget() string { return r.sub.typ.InitTarget(r.sub.name) }
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

// watchedHandler returns the subscriptions of t's type URL, made on its first watch with t's
// decoder.
func (c *Client) watchedHandler(t xdswatch.Type) *namedHandler {
	url := t.TypeURL()
	c.muxMu.Lock()
	defer c.muxMu.Unlock()
	h := c.watched[url]
	if h == nil {
		h = newNamedHandler(c, &namedKind{typeURL: url, short: t.Short(), decode: t.Decode})
		c.watched[url] = h
	}
	return h
}

// States returns the subscriptions of the watched type typeURL, by name then transport, for
// the config dumps (xds/watch.States).
func (c *Client) States(typeURL string) []xdswatch.State {
	c.muxMu.Lock()
	h := c.watched[typeURL]
	c.muxMu.Unlock()
	if h == nil {
		return nil
	}
	return h.states()
}

// namedHandlers returns the handlers of the watched types.
func (c *Client) namedHandlers() []*namedHandler {
	c.muxMu.Lock()
	defer c.muxMu.Unlock()
	out := make([]*namedHandler, 0, len(c.watched))
	for _, h := range c.watched {
		out = append(out, h)
	}
	return out
}

// observe returns the extra stats of the subscription to name that t makes: its Observer's
// when t is Observed, none otherwise.
func observe(t xdswatch.Type, name string) subExtra {
	ot, ok := t.(xdswatch.Observed)
	if !ok {
		return subExtra{}
	}
	o := ot.Observe(name)
	return subExtra{changed: o.Changed, failed: o.Failed, done: o.Done, observer: o}
}
