package pool

import (
	"context"
	"strings"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/proxyproto"
	"github.com/legateproxy/legate/internal/sockopt"
)

// maxKeyedPools bounds a host's keyed pools (by authority host, by the downstream's source):
// the keys come from requests, so past the bound a new key evicts pools with nothing in flight.
const maxKeyedPools = 128

// poolKey is what, beside its host, separates an upstream connection from others, as the
// parts Envoy hashes into its connection pool key: the zero key is the host's own pool.
type poolKey struct {
	// name is the authority host the connections are opened for (auto_sni,
	// auto_san_validation): their TLS name.
	name string
	// source is the address the connections bind to (the original_src listener filter's
	// downstream source and mark); zero for the cluster's own binding.
	source sockopt.Source
	// proxy is the downstream the connections' PROXY protocol header describes, as the
	// host's proxy_protocol socket keys it (proxyproto.Upstream.PoolKey); "" for none.
	proxy string
}

// keyOf returns the key of req's pool on h: its authority's host with auto_sni, the
// downstream's source with original_src, the downstream itself when h's transport socket
// sends a PROXY protocol header. A request of none of these kinds has the zero key, found
// without allocating.
func (m *Manager) keyOf(h *host.Host, req *Request) poolKey {
	var k poolKey
	if m.byAuthority {
		k.name = m.authority(req)
	}
	if o := req.Origin; o != nil {
		if s := o.UpstreamSource(); s != nil {
			k.source = *s
		}
		if u := m.wrappersAt(h.SocketMatch()).ProxyProtocol; u != nil {
			k.proxy = u.PoolKey(o.RemoteAddr(), o.LocalAddr(), o.ProxyProtocolTLVs())
		}
	}
	return k
}

// origin is what one upstream connection is opened for: the downstream source it binds to
// (original_src) and the downstream its PROXY protocol header describes; zero for a
// connection of Legate's own.
type origin struct {
	source *sockopt.Source
	down   *proxyproto.Downstream
}

// originOf is the origin a dedicated connection's context carries (the TCP proxy's).
func originOf(ctx context.Context) origin {
	return origin{source: sockopt.SourceFrom(ctx), down: proxyproto.DownstreamFrom(ctx)}
}

// origin is the origin of the pool's connections: its key's.
func (hp *hostPool) origin() origin {
	return origin{source: hp.key.bound(), down: hp.down}
}

// bound returns the source a keyed pool's connections bind to; nil for the cluster's own.
func (k *poolKey) bound() *sockopt.Source {
	if !k.source.Addr.IsValid() {
		return nil
	}
	return &k.source
}

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

// keyed returns the pool of hp's host for requests of key k, creating it on first use, with
// the caller counted in its users (release with leave). Connections are never shared across
// keys: each is opened with its key's name as SNI (and the SAN the certificate must carry),
// and bound to its key's source, as Envoy hashes the SNI and the socket options into its
// pool key.
func (hp *hostPool) keyed(k poolKey, from Origin) *hostPool {
	if v, ok := hp.byKey.Load(k); ok {
		if c := v.(*hostPool); c.enter() {
			return c
		}
	}
	c, evicted := hp.addKeyed(k, from)
	for _, e := range evicted {
		e.drain() // closes its idle connections: not under hp.mu
	}
	return c
}

// addKeyed is keyed's slow path, under hp.mu: the pool of k, entered, and the pools evicted
// to make room for it. from is the downstream a key with proxy describes.
func (hp *hostPool) addKeyed(k poolKey, from Origin) (*hostPool, []*hostPool) {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	if v, ok := hp.byKey.Load(k); ok {
		// Evictions hold hp.mu, so a pool still listed here is not evicted: enter holds.
		if c := v.(*hostPool); c.enter() {
			return c, nil
		}
	}
	var evicted []*hostPool
	if hp.nKeyed >= hp.m.keyedLimit {
		evicted = hp.evictLocked()
	}
	// The name is a view of the request's authority, whose bytes the next request on its
	// downstream connection overwrites: the key kept must own its bytes, or a later request
	// for another name would find this pool (and its TLS name) under it.
	k.name = strings.Clone(k.name)
	c := &hostPool{m: hp.m, host: hp.host, hs: hp.hs, key: k,
		h1: map[*h1conn]struct{}{}, tcp: map[*TCPConn]struct{}{}}
	c.draining.Store(hp.draining.Load())
	if k.proxy != "" {
		c.down = &proxyproto.Downstream{Source: from.RemoteAddr(), Destination: from.LocalAddr(), TLVs: from.ProxyProtocolTLVs()}
	}
	c.users.Add(1)
	if _, had := hp.byKey.Swap(k, c); !had {
		hp.nKeyed++
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

// leave ends what keyed or enter began.
func (hp *hostPool) leave() { hp.users.Add(-1) }

// evictLocked drops the keyed pools that have nothing in flight (no request in RoundTrip,
// no waiter, no dial, no busy connection) and returns them, for the caller to drain once it
// has released hp.mu. Pools in use stay, so past the bound only names with requests in
// flight add pools. hp.mu is held.
func (hp *hostPool) evictLocked() []*hostPool {
	var out []*hostPool
	hp.byKey.Range(func(k, v any) bool {
		if c := v.(*hostPool); c.evict() {
			hp.byKey.Delete(k)
			hp.nKeyed--
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
	if hp.users.Load() != 0 || len(hp.waiters) > 0 || hp.h2dial != nil || hp.idleCount() != len(hp.h1) || len(hp.tcp) > 0 {
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

// eachKeyed runs f on each of hp's keyed pools.
func (hp *hostPool) eachKeyed(f func(*hostPool)) {
	hp.byKey.Range(func(_, v any) bool {
		f(v.(*hostPool))
		return true
	})
}
