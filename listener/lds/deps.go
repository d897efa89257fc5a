package lds

import (
	"errors"
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/legateproxy/legate/xds/resource"
	"github.com/legateproxy/legate/xds/watch"
)

// Owners are the owners of what an LDS listener warms on, each watching its kind of
// dependency: the route table's side (httpproxy/rds: route configurations with their VHDS,
// scoped routes), the connection manager's ECDS and TLS's SDS. Its Watch is LDS's
// Dependencies; a nil owner refuses the listeners that need it.
type Owners struct {
	Routes       DependencyWatcher
	ScopedRoutes DependencyWatcher
	Extensions   ExtensionWatcher
	Secrets      SecretWatcher
}

// DependencyWatcher subscribes to the dependency d of the listener called listener; onChange
// runs after each change, the first value not reported.
type DependencyWatcher func(listener string, d resource.Dependency, onChange func()) (Warming, error)

// Watcher makes a DependencyWatcher of an owner's method returning its concrete Warming
// (rds.Discovery.WatchRouteDependency).
func Watcher[W Warming](watch func(listener string, d resource.Dependency, onChange func()) (W, error)) DependencyWatcher {
	return func(listener string, d resource.Dependency, onChange func()) (Warming, error) {
		w, err := watch(listener, d, onChange)
		if err != nil {
			return nil, err
		}
		return w, nil
	}
}

// ExtensionWatcher watches the ECDS configurations a warming listener's HTTP filters
// discover (httpproxy.ECDS.WatchWarming): each new configuration must suit typeURLs and the
// filter factories, as the filters will check it once built; onChange runs after each change.
type ExtensionWatcher interface {
	WatchWarming(cs *corev3.ConfigSource, name string, typeURLs []string, onChange func()) (watch.Subscription, error)
}

// SecretWatcher watches SDS secrets (tlsutil.SDS.Watch): onChange runs after each change.
type SecretWatcher interface {
	Watch(cs *corev3.ConfigSource, name string, onChange func()) (watch.Subscription, error)
}

// listenerDeps are one listener version's dependencies, by kind.
type listenerDeps struct {
	routes, extensions, secrets, scoped []Warming
}

// Watch subscribes to the dependencies of the listener rl (Dependencies): its route
// configurations, discovered filter configurations, scoped routes and secrets, in that order.
func (o Owners) Watch(rl *resource.Listener, onChange func()) (Warming, error) {
	l := &listenerDeps{}
	for _, d := range rl.Routes {
		w, err := watchWith(o.Routes, "route configurations (RDS)", rl.Name, d, onChange)
		if err != nil {
			l.Release()
			return nil, err
		}
		l.routes = append(l.routes, w)
	}
	for _, d := range rl.Extensions {
		sub, err := o.watchExtension(d, onChange)
		if err != nil {
			l.Release()
			return nil, fmt.Errorf("listener %q: extension config %q: %w", rl.Name, d.Name, err)
		}
		l.extensions = append(l.extensions, subscription{sub})
	}
	for _, d := range rl.ScopedRoutes {
		w, err := watchWith(o.ScopedRoutes, "scoped routes (SRDS)", rl.Name, d, onChange)
		if err != nil {
			l.Release()
			return nil, err
		}
		l.scoped = append(l.scoped, w)
	}
	for _, d := range rl.Secrets {
		sub, err := o.watchSecret(d, onChange)
		if err != nil {
			l.Release()
			return nil, fmt.Errorf("listener %q: sds secret %q: %w", rl.Name, d.Name, err)
		}
		l.secrets = append(l.secrets, subscription{sub})
	}
	return l, nil
}

func watchWith(w DependencyWatcher, what, listener string, d resource.Dependency, onChange func()) (Warming, error) {
	if w == nil {
		return nil, fmt.Errorf("listener %q: %s are not available", listener, what)
	}
	return w(listener, d, onChange)
}

func (o Owners) watchExtension(d resource.Dependency, onChange func()) (watch.Subscription, error) {
	if o.Extensions == nil {
		return nil, errors.New("ECDS is not available (no extension config watcher)")
	}
	return o.Extensions.WatchWarming(d.Config, d.Name, d.TypeURLs, onChange)
}

func (o Owners) watchSecret(d resource.Dependency, onChange func()) (watch.Subscription, error) {
	if o.Secrets == nil {
		return nil, errors.New("SDS is not available (no secret watcher)")
	}
	return o.Secrets.Watch(d.Config, d.Name, onChange)
}

// Ready reports whether every dependency has arrived or timed out. The route configurations
// come last: they watch the VHDS sources they name as they meet them, which waits for the
// rest, as Envoy's listener subscribes to VHDS once its route configuration is there.
func (l *listenerDeps) Ready() bool {
	for _, ws := range [][]Warming{l.extensions, l.secrets, l.scoped, l.routes} {
		for _, w := range ws {
			if !w.Ready() {
				return false
			}
		}
	}
	return true
}

// PendingTargets names the dependencies that have neither arrived nor timed out, with the
// init target names the server's init manager uses ("target <name>"), for /init_dump.
func (l *listenerDeps) PendingTargets() []string {
	var out []string
	for _, ws := range [][]Warming{l.routes, l.extensions, l.secrets, l.scoped} {
		for _, w := range ws {
			out = append(out, w.PendingTargets()...)
		}
	}
	return out
}

// Release ends the subscriptions. Releasing twice is harmless.
func (l *listenerDeps) Release() {
	for _, ws := range [][]Warming{l.routes, l.extensions, l.scoped, l.secrets} {
		for _, w := range ws {
			w.Release()
		}
	}
	*l = listenerDeps{}
}

// subscription is a watched dependency (ECDS, SDS) as a Warming: its init target is pending
// until it is ready.
type subscription struct{ watch.Subscription }

func (s subscription) PendingTargets() []string {
	if t := s.InitTarget(); !s.Ready() && t != "" {
		return []string{"target " + t}
	}
	return nil
}

func (s subscription) Release() { s.Cancel() }
