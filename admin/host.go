package admin

import (
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
)

// AllowedHostsEnv names the environment variable that lists the extra Host
// names the admin answers to, separated by commas ("*" answers any Host).
// It is an environment variable rather than a flag so that a command line
// stays valid for Envoy, which has no such option.
const AllowedHostsEnv = "LEGATE_ADMIN_ALLOWED_HOSTS"

// ParseAllowedHosts splits the value of AllowedHostsEnv: names separated by
// commas, spaces trimmed, empty entries dropped.
func ParseAllowedHosts(v string) []string {
	var names []string
	for _, n := range strings.Split(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	return names
}

// hostPolicy decides which Host headers the admin answers. A page that an
// attacker's DNS name rebinds to 127.0.0.1 is same-origin with that name, so
// the Origin check cannot see it; only the Host it names gives it away.
// Addresses cannot be rebound, so the policy accepts the addresses the admin
// is reachable at, loopback names, this machine's hostname and what the
// operator lists.
type hostPolicy struct {
	any   bool
	names map[string]bool // lower case
	ips   []net.IP        // the bound address, or every interface address when bound to all
}

// newHostPolicy builds the policy for an admin bound to bound, with the
// operator's extra names.
func newHostPolicy(bound net.Addr, extra []string) *hostPolicy {
	p := &hostPolicy{names: map[string]bool{"localhost": true}}
	for _, n := range extra {
		if n == "*" {
			p.any = true
		}
		p.names[strings.ToLower(strings.Trim(n, "[]"))] = true
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		p.names[strings.ToLower(h)] = true
	}
	tcp, ok := bound.(*net.TCPAddr)
	if !ok {
		return p
	}
	if !tcp.IP.IsUnspecified() {
		p.ips = []net.IP{tcp.IP}
		return p
	}
	addrs, _ := net.InterfaceAddrs() // none known: loopback and names still work
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			p.ips = append(p.ips, n.IP)
		}
	}
	return p
}

// allows reports whether a request whose Host header is host may be served.
// An absent Host (an HTTP/1.0 client) comes from no browser and passes.
func (p *hostPolicy) allows(host string) bool {
	name, _ := splitHostPort(host, "")
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if name == "" || p.any || p.names[name] {
		return true
	}
	ip := net.ParseIP(name)
	if ip == nil {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	for _, b := range p.ips {
		if b.Equal(ip) {
			return true
		}
	}
	return false
}

// refuseForeignHost wraps next so that a request whose Host is not one the
// policy accepts gets 403 with a one-line reason, whatever its method: a
// rebound page could otherwise read /config_dump or post /quitquitquit.
// onRefuse, when not nil, is called before the reply is written.
func refuseForeignHost(next http.Handler, p *hostPolicy, onRefuse func(r *http.Request)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.allows(r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		if onRefuse != nil {
			onRefuse(r)
		}
		forbid(w, "admin request refused: Host "+quoteLine(r.Host)+" is not an address of this admin (allow it with "+AllowedHostsEnv+")\n")
	})
}

// quoteLine quotes s so that a hostile Host cannot break the one-line reply.
func quoteLine(s string) string {
	const max = 256
	if len(s) > max {
		s = s[:max] + "..."
	}
	return strconv.Quote(s)
}
