package xds

import (
	"fmt"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/legateproxy/legate/xds/resource"
	xdswatch "github.com/legateproxy/legate/xds/watch"
)

// ListenerDeps are the subscriptions an LDS listener warms on: its route configurations (RDS,
// and the VHDS sources they name), scoped routes (SRDS), discovered HTTP filter configurations
// (ECDS) and SDS secrets. The LDS owner (listener/lds) holds them for as long as the listener
// version lives and calls them under its own lock.
type ListenerDeps struct {
	c    *Client
	name string
	// onChange re-checks the listener when a dependency changes.
	onChange func()
	deps     []xdswatch.Subscription
	// scoped are the scoped routes it waits for (SRDS and the scopes' RDS); unwatch ends them
	// and the watches of VHDS sources.
	scoped  []*scopedWatch
	unwatch []func()
	// routes are its RDS subscriptions (also in deps); vhds are the VHDS sources of their
	// configurations it watches, by source key.
	routes []watchRef
	vhds   map[string]*vhdsHandler
}

// WatchListener subscribes to the dependencies of the listener rl; onChange runs, without the
// client's locks, after each change of one of them. The first values are not reported: the
// caller asks Ready.
func (c *Client) WatchListener(rl *resource.Listener, onChange func()) (*ListenerDeps, error) {
	l := &ListenerDeps{c: c, name: rl.Name, onChange: onChange}
	changed := func(uint64, any) { onChange() }
	for _, d := range rl.Routes {
		ref, _, _, _, err := c.rds.subscribe(d.Source, d.Name, d.StatPrefix, changed)
		if err != nil {
			l.Release()
			return nil, fmt.Errorf("listener %q: rds %q: %w", rl.Name, d.Name, err)
		}
		l.deps = append(l.deps, ref)
		l.routes = append(l.routes, ref)
	}
	for _, d := range rl.Extensions {
		sub, err := c.watchExtension(d, onChange)
		if err != nil {
			l.Release()
			return nil, fmt.Errorf("listener %q: extension config %q: %w", rl.Name, d.Name, err)
		}
		l.deps = append(l.deps, sub)
	}
	for _, d := range rl.ScopedRoutes {
		// The first update comes before watchScopes returns: it is not reported.
		w, err := c.watchScopes(d.Scoped, d.StatPrefix, false, func(uint64, []*routev3.ScopedRouteConfiguration, map[string]*routev3.RouteConfiguration) {
			onChange()
		})
		if err != nil {
			l.Release()
			return nil, fmt.Errorf("listener %q: %w", rl.Name, err)
		}
		l.scoped = append(l.scoped, w)
		l.unwatch = append(l.unwatch, w.cancel)
	}
	for _, d := range rl.Secrets {
		sub, err := c.watchSecret(d, onChange)
		if err != nil {
			l.Release()
			return nil, fmt.Errorf("listener %q: sds secret %q: %w", rl.Name, d.Name, err)
		}
		l.deps = append(l.deps, sub)
	}
	return l, nil
}

// Release ends the subscriptions. Releasing twice is harmless.
func (l *ListenerDeps) Release() {
	for _, d := range l.deps {
		d.Cancel()
	}
	for _, u := range l.unwatch {
		u()
	}
	l.unwatch = nil
	l.deps = nil
}

// Ready reports whether every dependency has arrived or timed out. It watches the VHDS
// sources of the route configurations that arrived, as it meets them.
func (l *ListenerDeps) Ready() bool {
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
	return l.vhdsReady()
}

// vhdsReady reports whether the VHDS sources of the route configurations (those with vhds)
// have answered or timed out, as Envoy's route configurations wait for their first VHDS
// update. It watches each source it meets, so that its answer re-checks the listener.
func (l *ListenerDeps) vhdsReady() bool {
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
			if vh, err = l.c.vhdsFor(cs); err != nil {
				l.c.log.Errorf("xds: listener %q: route_config %q: vhds: %v", l.name, rc.GetName(), err)
				continue
			}
			if l.vhds == nil {
				l.vhds = map[string]*vhdsHandler{}
			}
			l.vhds[key] = vh
			l.unwatch = append(l.unwatch, vh.watch(l.onChange))
		}
		if !vh.isReady() {
			return false
		}
	}
	return true
}

// PendingTargets names the dependencies that have neither arrived nor timed out, with the init
// target names the server's init manager uses ("target <name>"), for /init_dump.
func (l *ListenerDeps) PendingTargets() []string {
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
