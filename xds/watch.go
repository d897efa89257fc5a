package xds

import (
	"errors"
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/anypb"

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
	return ref, nil
}

// Ready, Value, InitTarget and Cancel make a watchRef a watch.Subscription.
func (r watchRef) Ready() bool        { return r.ready() }
func (r watchRef) Value() any         { return r.value() }
func (r watchRef) InitTarget() string { return r.h.initTarget(r.sub.name) }
func (r watchRef) Cancel()            { r.release() }

// watchedHandler returns the subscriptions of t, made on its first watch. A type the client
// still handles itself cannot be watched: two handlers of one type would share its streams.
func (c *Client) watchedHandler(t xdswatch.Type) (*namedHandler, error) {
	url := t.TypeURL()
	for _, h := range []*namedHandler{c.rds, c.ecds} {
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
	out := []*namedHandler{c.rds, c.ecds}
	c.muxMu.Lock()
	for _, h := range c.watched {
		out = append(out, h)
	}
	c.muxMu.Unlock()
	return out
}
