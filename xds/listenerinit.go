package xds

import "github.com/legateproxy/legate/xds/resource"

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
