package pool

import (
	"strings"
)

// maxNamedPools bounds a host's pools by authority host (auto_sni): the names come from
// requests, so past the bound a new name evicts pools with nothing in flight.
const maxNamedPools = 128

// authority returns the host of req's authority as auto_sni reads it: the override header's
// value when the cluster names one and the request carries it non-empty, else the Host, with
// the port removed. "" when there is none (the host's own pool then serves).
func (m *Manager) authority(req *Request) string {
	override := ""
	if m.sniHeader != "" {
		for i := range req.Header {
			if req.Header[i].Value != "" && strings.EqualFold(req.Header[i].Name, m.sniHeader) {
				override = req.Header[i].Value
				break
			}
		}
	}
	return nameOf(req.Host, override)
}

// nameOf is the TLS name of a request: the override header's value when not empty, else
// its authority, port removed.
func nameOf(authority, override string) string {
	if override != "" {
		authority = override
	}
	return authorityHost(authority)
}

// authorityHost removes the port of an authority ("a.example:8443", "[::1]:443"); an IPv6
// address without brackets stays whole.
func authorityHost(a string) string {
	if strings.HasPrefix(a, "[") {
		if i := strings.IndexByte(a, ']'); i > 0 {
			return a[1:i]
		}
		return a
	}
	if i := strings.IndexByte(a, ':'); i >= 0 && strings.LastIndexByte(a, ':') == i {
		return a[:i]
	}
	return a
}

// named returns the pool of hp's host for requests whose authority's host is name, creating
// it on first use, with the caller counted in its users (release with leave). Connections
// are never shared across names: each is opened with its name as SNI (and the SAN the
// certificate must carry), as Envoy hashes the SNI into its pool key.
func (hp *hostPool) named(name string) *hostPool {
	if v, ok := hp.byName.Load(name); ok {
		if c := v.(*hostPool); c.enter() {
			return c
		}
	}
	c, evicted := hp.addNamed(name)
	for _, e := range evicted {
		e.drain() // closes its idle connections: not under hp.mu
	}
	return c
}

// addNamed is named's slow path, under hp.mu: the pool of name, entered, and the pools evicted
// to make room for it.
func (hp *hostPool) addNamed(name string) (*hostPool, []*hostPool) {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	if v, ok := hp.byName.Load(name); ok {
		// Evictions hold hp.mu, so a pool still listed here is not evicted: enter holds.
		if c := v.(*hostPool); c.enter() {
			return c, nil
		}
	}
	var evicted []*hostPool
	if hp.nNamed >= hp.m.namedLimit {
		evicted = hp.evictLocked()
	}
	c := &hostPool{m: hp.m, host: hp.host, hs: hp.hs, name: name, draining: hp.draining,
		h1: map[*h1conn]struct{}{}, tcp: map[*TCPConn]struct{}{}}
	c.users.Add(1)
	if _, had := hp.byName.Swap(name, c); !had {
		hp.nNamed++
	}
	return c, evicted
}

// enter counts a request in the pool's users, unless the pool was evicted.
func (hp *hostPool) enter() bool {
	hp.users.Add(1)
	if hp.evicted.Load() {
		hp.users.Add(-1)
		return false
	}
	return true
}

// leave ends what named or enter began.
func (hp *hostPool) leave() { hp.users.Add(-1) }

// evictLocked drops the named pools that have nothing in flight (no request in RoundTrip,
// no waiter, no dial, no busy connection) and returns them, for the caller to drain once it
// has released hp.mu. Pools in use stay, so past the bound only names with requests in
// flight add pools. hp.mu is held.
func (hp *hostPool) evictLocked() []*hostPool {
	var out []*hostPool
	hp.byName.Range(func(k, v any) bool {
		if c := v.(*hostPool); c.evict() {
			hp.byName.Delete(k)
			hp.nNamed--
			out = append(out, c)
		}
		return true
	})
	return out
}

// evict marks the pool evicted if nothing is in flight on it.
func (hp *hostPool) evict() bool {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	if hp.users.Load() != 0 || len(hp.waiters) > 0 || hp.h2dial != nil || len(hp.idle) != len(hp.h1) || len(hp.tcp) > 0 {
		return false
	}
	for _, c := range hp.h2 {
		if c.uc.rqActive.Load() > 0 {
			return false
		}
	}
	hp.evicted.Store(true)
	if hp.users.Load() != 0 { // a request entered as the flag was set: it keeps the pool
		hp.evicted.Store(false)
		return false
	}
	return true
}

// eachNamed runs f on each of hp's named pools.
func (hp *hostPool) eachNamed(f func(*hostPool)) {
	hp.byName.Range(func(_, v any) bool {
		f(v.(*hostPool))
		return true
	})
}
