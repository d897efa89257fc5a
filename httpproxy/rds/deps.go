package rds

import (
	"fmt"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/legateproxy/legate/xds/resource"
	"github.com/legateproxy/legate/xds/watch"
)

// RouteDependency is a warming LDS listener's hold on one of its route configurations: the
// RDS subscription and, once the configuration names one, its VHDS source, as Envoy's route
// configurations wait for their first VHDS answer. Its methods are called under LDS's lock
// (listener/lds.Warming).
type RouteDependency struct {
	d        *Discovery
	listener string
	sub      watch.Subscription
	onChange func()
	// vhds is the VHDS source it watches, by the deterministic encoding of its config
	// source; unwatch ends those watches.
	vhds    map[string]*vhdsHandler
	unwatch []func()
}

// WatchRouteDependency subscribes to the route configuration dep (an rds of the LDS listener
// called listener); onChange runs, without the Discovery's locks, after each change of it or
// of its VHDS source. The first value is not reported: the caller asks Ready.
func (d *Discovery) WatchRouteDependency(listener string, dep resource.Dependency, onChange func()) (*RouteDependency, error) {
	sub, err := d.cfg.Client.Watch(rdsType{d: d, prefix: dep.StatPrefix}, dep.Config, dep.Name, watch.Func(func(any) { onChange() }))
	if err != nil {
		return nil, fmt.Errorf("listener %q: rds %q: %w", listener, dep.Name, err)
	}
	return &RouteDependency{d: d, listener: listener, sub: sub, onChange: onChange}, nil
}

// Ready reports whether the route configuration has arrived or timed out and, when it has
// vhds, whether its VHDS source has answered or timed out. It watches that source the first
// time it meets it, so that the answer re-checks the listener.
func (r *RouteDependency) Ready() bool {
	if !r.sub.Ready() {
		return false
	}
	rc, _ := r.sub.Value().(*routev3.RouteConfiguration)
	cs := rc.GetVhds().GetConfigSource()
	if cs == nil {
		return true
	}
	key := string(mustMarshal(cs))
	vh := r.vhds[key]
	if vh == nil {
		var err error
		if vh, err = r.d.vhdsFor(cs); err != nil {
			r.d.log.Errorf("xds: listener %q: route_config %q: vhds: %v", r.listener, rc.GetName(), err)
			return true
		}
		if r.vhds == nil {
			r.vhds = map[string]*vhdsHandler{}
		}
		r.vhds[key] = vh
		r.unwatch = append(r.unwatch, vh.watch(r.onChange))
	}
	return vh.isReady()
}

// PendingTargets names the RDS subscription's init target while the route configuration has
// neither arrived nor timed out ("target <name>", for /init_dump).
func (r *RouteDependency) PendingTargets() []string {
	if r.sub.Ready() {
		return nil
	}
	return []string{"target " + r.sub.InitTarget()}
}

// Release ends the subscription and the VHDS watches. Releasing twice is harmless.
func (r *RouteDependency) Release() {
	r.sub.Cancel()
	for _, u := range r.unwatch {
		u()
	}
	r.unwatch = nil
}

// ScopedDependency is a warming LDS listener's hold on the scoped routes of one of its
// connection managers: the SRDS subscription and the route configurations of its scopes.
type ScopedDependency struct{ w *scopedWatch }

// WatchScopedDependency subscribes to the scoped routes dep (a scoped_rds of the LDS listener
// called listener: dep.Scoped is the connection manager's scoped_routes); onChange runs,
// without the Discovery's locks, after each change of the scopes or their route
// configurations. The first value is not reported: the caller asks Ready.
func (d *Discovery) WatchScopedDependency(listener string, dep resource.Dependency, onChange func()) (*ScopedDependency, error) {
	w, err := d.watchScopes(dep.Scoped, dep.StatPrefix, false, func(uint64, []*routev3.ScopedRouteConfiguration, map[string]*routev3.RouteConfiguration) {
		onChange()
	})
	if err != nil {
		return nil, fmt.Errorf("listener %q: %w", listener, err)
	}
	return &ScopedDependency{w: w}, nil
}

// Ready reports whether the scopes arrived (or timed out), with the route configuration of
// every scope.
func (s *ScopedDependency) Ready() bool { return s.w.ready() }

// PendingTargets names the SRDS init target while the scoped routes are not ready.
func (s *ScopedDependency) PendingTargets() []string {
	if s.w.ready() {
		return nil
	}
	return []string{"target " + ScopedInitTarget(s.w.name)}
}

// Release ends the watch. Releasing twice is harmless.
func (s *ScopedDependency) Release() { s.w.cancel() }
