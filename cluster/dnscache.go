package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/stats"
)

// DNSCacheStats are the dns_cache.<name>.* stats of a dynamic forward proxy DNS cache, as
// Envoy's DnsCacheStats.
type DNSCacheStats struct {
	DNSQueryAttempt      stats.Counter `stat:"dns_query_attempt"`
	DNSQuerySuccess      stats.Counter `stat:"dns_query_success"`
	DNSQueryFailure      stats.Counter `stat:"dns_query_failure"`
	DNSQueryTimeout      stats.Counter `stat:"dns_query_timeout"`
	HostAddressChanged   stats.Counter `stat:"host_address_changed"`
	HostAdded            stats.Counter `stat:"host_added"`
	HostRemoved          stats.Counter `stat:"host_removed"`
	HostOverflow         stats.Counter `stat:"host_overflow"`
	DNSRqPendingOverflow stats.Counter `stat:"dns_rq_pending_overflow"`
	NumHosts             stats.Gauge   `stat:"num_hosts,never_import"`
}

// Errors of DNSCache.Load.
var (
	// ErrDNSCacheOverflow: the cache holds max_hosts hosts and the key is not one of them.
	ErrDNSCacheOverflow = errors.New("DNS cache overflow")
	// ErrDNSPendingOverflow: max_pending_requests requests already wait for resolutions.
	ErrDNSPendingOverflow = errors.New("DNS cache pending request overflow")
)

// DNSCache is one named dynamic forward proxy DNS cache (Envoy's DnsCacheImpl): hosts by
// "name:port", each resolved when first asked for, refreshed by its own goroutine and
// dropped once no request used it for host_ttl. The dynamic forward proxy filters and
// clusters naming it share it; it lives as long as its manager runs.
//
// Concurrency: safe for concurrent use. mu guards hosts, pending and subs; it is taken by
// the requests of dynamic forward proxy clusters (the request path's only lock besides
// jwt_authn's), held for map lookups only, never across a resolution.
type DNSCache struct {
	cfg config.DNSCacheConfig
	m   *Manager
	st  DNSCacheStats
	reg *stats.Registration

	mu      sync.Mutex
	hosts   map[string]*dnsHost
	pending uint32
	// subs are told the key of a host whose address changed or that left the cache (the
	// dynamic forward proxy clusters drop their host of that key).
	subs map[*Cluster]func(key string)
}

// dnsHost is one cached host. addrs and err are written by its resolver goroutine before it
// closes resolved (the first time) and read under the cache's mu.
type dnsHost struct {
	key, name string
	port      uint16
	addrs     []netip.Addr
	err       error
	resolved  chan struct{}
	lastUsed  atomic.Int64 // the clock's UnixNano of the last request that used the host
}

// DNSCache returns the DNS cache cfg names, made (and its preresolve_hostnames resolving)
// on first use. A cache of that name made with another configuration is an error, as in
// Envoy.
func (m *Manager) DNSCache(cfg config.DNSCacheConfig) (*DNSCache, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dnsCacheLocked(cfg)
}

func (m *Manager) dnsCacheLocked(cfg config.DNSCacheConfig) (*DNSCache, error) {
	if c := m.dnsCaches[cfg.Name]; c != nil {
		if !c.cfg.Equal(&cfg) {
			return nil, fmt.Errorf("dns_cache_config %q: configured differently elsewhere; every configuration of a DNS cache must be the same", cfg.Name)
		}
		return c, nil
	}
	c := &DNSCache{cfg: cfg, m: m, hosts: map[string]*dnsHost{}, subs: map[*Cluster]func(string){}}
	c.reg = m.store.Register("dns_cache."+cfg.Name+".", &c.st)
	if m.dnsCaches == nil {
		m.dnsCaches = map[string]*DNSCache{}
	}
	m.dnsCaches[cfg.Name] = c
	c.mu.Lock()
	for _, key := range cfg.Preresolve {
		if _, err := c.addLocked(key); err != nil {
			m.log.Warnf("dns_cache %q: preresolve_hostnames %q: %v", cfg.Name, key, err)
		}
	}
	c.mu.Unlock()
	return c, nil
}

// Config returns the cache's configuration.
func (c *DNSCache) Config() *config.DNSCacheConfig { return &c.cfg }

// Load looks key ("name:port") up. A resolved host's addresses come back at once (nil
// ready). Otherwise ready is closed once its first resolution ends, and release must be
// called when the caller stops waiting (it holds one of max_pending_requests until then);
// Addresses then tells the outcome. A key the cache does not hold is added and resolved,
// unless the cache is full.
func (c *DNSCache) Load(key string) (addrs []netip.Addr, ready <-chan struct{}, release func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.hosts[key]
	if h == nil {
		if h, err = c.addLocked(key); err != nil {
			return nil, nil, nil, err
		}
	}
	c.touch(h)
	select {
	case <-h.resolved:
		return h.addrs, nil, nil, nil
	default:
	}
	if c.pending >= c.cfg.MaxPendingRequests {
		c.st.DNSRqPendingOverflow.Inc()
		return nil, nil, nil, ErrDNSPendingOverflow
	}
	c.pending++
	var once sync.Once
	return nil, h.resolved, func() {
		once.Do(func() {
			c.mu.Lock()
			c.pending--
			c.mu.Unlock()
		})
	}, nil
}

// Addresses returns the addresses of key as last resolved, or the error of its resolution;
// a key the cache does not hold (or not yet resolved) has neither.
func (c *DNSCache) Addresses(key string) ([]netip.Addr, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.hosts[key]
	if h == nil {
		return nil, fmt.Errorf("%s: not in DNS cache %q", key, c.cfg.Name)
	}
	c.touch(h)
	if len(h.addrs) == 0 && h.err != nil {
		return nil, h.err
	}
	return h.addrs, nil
}

func (c *DNSCache) touch(h *dnsHost) { h.lastUsed.Store(c.m.clock.Now().UnixNano()) }

// addLocked adds key and starts resolving it. mu is held.
func (c *DNSCache) addLocked(key string) (*dnsHost, error) {
	if uint32(len(c.hosts)) >= c.cfg.MaxHosts {
		c.st.HostOverflow.Inc()
		return nil, ErrDNSCacheOverflow
	}
	ap, err := splitHostKey(key)
	if err != nil {
		return nil, err
	}
	h := &dnsHost{key: key, name: ap.host, port: ap.port, resolved: make(chan struct{})}
	c.touch(h)
	c.hosts[key] = h
	c.st.HostAdded.Inc()
	c.st.NumHosts.Set(uint64(len(c.hosts)))
	c.m.goBackground(func(ctx context.Context) { c.run(ctx, h) })
	return h, nil
}

type hostPort struct {
	host string
	port uint16
}

// splitHostKey splits "name:port" (IPv6 literals bracketed).
func splitHostKey(key string) (hostPort, error) {
	i := len(key) - 1
	for i >= 0 && key[i] != ':' {
		i--
	}
	if i <= 0 {
		return hostPort{}, fmt.Errorf("%q: not host:port", key)
	}
	var port uint64
	for _, r := range key[i+1:] {
		if r < '0' || r > '9' || port > 65535 {
			return hostPort{}, fmt.Errorf("%q: bad port", key)
		}
		port = port*10 + uint64(r-'0')
	}
	if port == 0 || port > 65535 {
		return hostPort{}, fmt.Errorf("%q: bad port", key)
	}
	name := key[:i]
	if len(name) > 2 && name[0] == '[' && name[len(name)-1] == ']' {
		name = name[1 : len(name)-1]
	}
	return hostPort{host: name, port: uint16(port)}, nil
}

// run is one host's resolver goroutine: it resolves the host, then again at each refresh
// (the answer's TTL, bounded below by dns_min_refresh_rate, else dns_refresh_rate; after a
// failure dns_failure_refresh_rate), and removes the host once no request used it for
// host_ttl, or when the manager stops.
func (c *DNSCache) run(ctx context.Context, h *dnsHost) {
	first := true
	for {
		next := c.resolve(ctx, h)
		if first {
			close(h.resolved)
			first = false
		}
		if !c.m.sleep(ctx, next) {
			return
		}
		idle := c.m.clock.Now().Sub(time.Unix(0, h.lastUsed.Load()))
		if idle >= c.cfg.HostTTL {
			c.remove(h)
			return
		}
	}
}

// resolve resolves h once, records the outcome and returns when to resolve it again.
func (c *DNSCache) resolve(ctx context.Context, h *dnsHost) time.Duration {
	c.st.DNSQueryAttempt.Inc()
	qctx, cancel := context.WithTimeout(ctx, c.cfg.QueryTimeout)
	addrs, ttl, err := c.m.resolver.Resolve(qctx, h.name, c.cfg.LookupFamily, &c.cfg.Resolution)
	timedOut := qctx.Err() == context.DeadlineExceeded
	cancel()
	if err == nil {
		addrs, err = c.filterAddrs(addrs)
	}
	if err != nil {
		if timedOut {
			c.st.DNSQueryTimeout.Inc()
		} else {
			c.st.DNSQueryFailure.Inc()
		}
		c.mu.Lock()
		h.err = fmt.Errorf("resolving %q: %w", h.name, err)
		c.mu.Unlock()
		if c.cfg.DisableRefreshOnFailure {
			return c.cfg.RefreshRate
		}
		return c.cfg.FailureRefreshRate
	}
	c.st.DNSQuerySuccess.Inc()
	c.mu.Lock()
	changed := len(h.addrs) > 0 && !slices.Equal(h.addrs, addrs)
	h.addrs, h.err = addrs, nil
	var notify []func(string)
	if changed {
		c.st.HostAddressChanged.Inc()
		notify = c.subscribersLocked()
	}
	c.mu.Unlock()
	for _, f := range notify {
		f(h.key)
	}
	if ttl > 0 {
		return max(ttl, c.cfg.MinRefreshRate)
	}
	return c.cfg.RefreshRate
}

// errAllFiltered: resolved_address_filter dropped every address of an answer.
var errAllFiltered = errors.New("resolved_address_filter dropped every address")

// filterAddrs drops the addresses resolved_address_filter matches; none left is a failure, so
// the host keeps the addresses it had, as Envoy's cache does.
func (c *DNSCache) filterAddrs(addrs []netip.Addr) ([]netip.Addr, error) {
	f := &c.cfg.ResolvedAddressFilter
	addrs = slices.DeleteFunc(addrs, f.Drops)
	if len(addrs) == 0 {
		return nil, errAllFiltered
	}
	return addrs, nil
}

// remove drops h from the cache and tells the subscribers.
func (c *DNSCache) remove(h *dnsHost) {
	c.mu.Lock()
	if c.hosts[h.key] == h {
		delete(c.hosts, h.key)
		c.st.HostRemoved.Inc()
		c.st.NumHosts.Set(uint64(len(c.hosts)))
	}
	notify := c.subscribersLocked()
	c.mu.Unlock()
	for _, f := range notify {
		f(h.key)
	}
}

func (c *DNSCache) subscribersLocked() []func(string) {
	out := make([]func(string), 0, len(c.subs))
	for _, f := range c.subs {
		out = append(out, f)
	}
	return out
}

// subscribe makes cl hear of hosts that changed or left; unsubscribe ends it.
func (c *DNSCache) subscribe(cl *Cluster, f func(key string)) {
	c.mu.Lock()
	c.subs[cl] = f
	c.mu.Unlock()
}

func (c *DNSCache) unsubscribe(cl *Cluster) {
	c.mu.Lock()
	delete(c.subs, cl)
	c.mu.Unlock()
}

// goBackground runs f under Run's context, owned by the manager's wait group: at once while
// Run runs, when Run starts before it, never after it ended. Lock order: a DNSCache.mu may be
// held, never bgMu before it.
func (m *Manager) goBackground(f func(ctx context.Context)) {
	m.bgMu.Lock()
	defer m.bgMu.Unlock()
	switch {
	case m.bgStopped:
	case m.bgCtx == nil:
		m.bgQueue = append(m.bgQueue, f)
	default:
		m.startBackgroundLocked(f)
	}
}

func (m *Manager) startBackgroundLocked(f func(ctx context.Context)) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f(m.bgCtx)
	}()
}

// startBackground starts the queued background work under ctx (Run).
func (m *Manager) startBackground(ctx context.Context) {
	m.bgMu.Lock()
	defer m.bgMu.Unlock()
	m.bgCtx = ctx
	for _, f := range m.bgQueue {
		m.startBackgroundLocked(f)
	}
	m.bgQueue = nil
}

// stopBackground refuses background work from now on (Run is ending).
func (m *Manager) stopBackground() {
	m.bgMu.Lock()
	m.bgStopped = true
	m.bgMu.Unlock()
}
