package xds

import (
	"errors"
	"sort"
	"strings"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/xds/resource"
)

// vhdsHandler is the VHDS state of one (delta) transport: every virtual host it delivers, by
// name. Route configurations with vhds take the virtual hosts named "<their name>/…". The
// subscription is a wildcard one, which servers without Envoy's namespace matching (such as
// go-control-plane's) also answer.
//
// Concurrency: mu guards the fields below it; watchers are called with no lock held.
type vhdsHandler struct {
	c *Client

	mu    sync.Mutex
	hosts map[string]*routev3.VirtualHost
	raw   map[string]*anypb.Any
	// ready is set by the first response or the initial fetch timeout.
	ready    bool
	timer    clock.Timer
	watchers watcherSet
}

// vhdsFor returns the VHDS handler of the transport of cs, creating it on first use.
func (c *Client) vhdsFor(cs *corev3.ConfigSource) (*vhdsHandler, error) {
	src, err := resource.SourceFromProto(cs)
	if err != nil {
		return nil, err
	}
	m, err := c.muxFor(src, resource.VirtualHostType)
	if err != nil {
		return nil, err
	}
	c.srdsMu.Lock()
	defer c.srdsMu.Unlock()
	if h := c.vhds[m]; h != nil {
		return h, nil
	}
	h := &vhdsHandler{c: c, hosts: map[string]*routev3.VirtualHost{}, raw: map[string]*anypb.Any{}}
	if t := src.InitialFetchTimeout; t > 0 {
		h.timer = c.clock.AfterFunc(t, h.initTimeout)
	}
	c.vhds[m] = h
	m.addWatch(resource.VirtualHostType, h, true)
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
	h.mu.Unlock()
	if first {
		h.c.log.Warnf("xds: VHDS: initial fetch timed out")
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
// names go; invalid ones are NACKed and the previous version stays.
func (h *vhdsHandler) apply(_ *mux, u update) error {
	var errs []string
	changed := false
	h.mu.Lock()
	if u.full {
		seen := map[string]bool{}
		for i, a := range u.resources {
			name := resource.VirtualHostName(a)
			if u.names != nil {
				name = u.names[i]
			}
			seen[name] = true
		}
		for name := range h.hosts {
			if !seen[name] {
				delete(h.hosts, name)
				delete(h.raw, name)
				changed = true
			}
		}
	}
	for _, name := range u.removed {
		if _, ok := h.hosts[name]; ok {
			delete(h.hosts, name)
			delete(h.raw, name)
			changed = true
		}
	}
	for _, a := range u.resources {
		vh, err := resource.DecodeVirtualHost(a)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if old := h.raw[vh.GetName()]; old != nil && proto.Equal(old, a) {
			continue
		}
		h.hosts[vh.GetName()], h.raw[vh.GetName()] = vh, a
		changed = true
	}
	var ws []func()
	if h.markReadyLocked() || changed {
		ws = h.watchers.list()
	}
	h.mu.Unlock()
	for _, w := range ws {
		w()
	}
	if len(errs) > 0 {
		err := errors.New(strings.Join(errs, "; "))
		h.c.log.Warnf("xds: VHDS update %q rejected: %v", u.version, err)
		return err
	}
	return nil
}

func (h *vhdsHandler) failed(*mux) {}

// routeWatch is one WatchRoutes caller: the RDS configuration, with the VHDS virtual hosts
// merged in when it has vhds. mu guards the fields below it; update is called without it.
type routeWatch struct {
	c      *Client
	update func(gen uint64, rc *routev3.RouteConfiguration)

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
	var key string
	if v := rc.GetVhds(); v != nil {
		key = string(mustMarshal(v.GetConfigSource()))
	}
	if key != w.vhKey {
		if w.unwatch != nil {
			w.unwatch()
		}
		w.vh, w.unwatch, w.vhKey = nil, nil, key
		if key != "" {
			h, err := w.c.vhdsFor(rc.GetVhds().GetConfigSource())
			if err != nil {
				w.c.log.Errorf("xds: route_config %q: vhds: %v", rc.GetName(), err)
			} else {
				w.vh, w.unwatch = h, h.watch(w.vhostsChanged)
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

// stopVHDS stops the VHDS initial fetch timers (Run's end).
func (c *Client) stopVHDS() {
	c.srdsMu.Lock()
	defer c.srdsMu.Unlock()
	for _, h := range c.vhds {
		h.mu.Lock()
		if h.timer != nil {
			h.timer.Stop()
		}
		h.mu.Unlock()
	}
}
