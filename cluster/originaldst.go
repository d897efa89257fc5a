package cluster

import (
	"context"
	"fmt"
	"github.com/legateproxy/legate/config"
	"maps"
	"net/http"
	"net/netip"
	"net/textproto"
	"slices"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/lb"
)

// OriginalDstHeaders returns the request headers that may override the destination of an
// ORIGINAL_DST cluster (x-envoy-original-dst-host and x-proxy-original-dst-host, or the
// configured http_header_name) in canonical form, the keys of request header maps; nil when
// use_http_header is off.
func (c *Cluster) OriginalDstHeaders() []string { return c.odstHeaders }

func originalDstHeaders(cfg *config.OriginalDstLbConfig) []string {
	if !cfg.UseHTTPHeader {
		return nil
	}
	out := make([]string, len(cfg.HeaderNames))
	for i, name := range cfg.HeaderNames {
		out[i] = textproto.CanonicalMIMEHeaderKey(name)
	}
	return out
}

// OriginalDst returns the destination of one request or connection to an ORIGINAL_DST
// cluster, for lb.Context.OverrideHost: the first override header present (use_http_header),
// else the downstream connection's local address when the listener restored it (an
// original destination), else "" (no destination: no host). header is keyed by canonical
// name and may be nil (the TCP proxy has none). "" for other cluster types.
func (c *Cluster) OriginalDst(header http.Header, local string, restored bool) string {
	if c.cfg.Type != config.OriginalDst {
		return ""
	}
	for _, name := range c.odstHeaders {
		if v := header[name]; len(v) > 0 && v[0] != "" {
			return c.OriginalDestination(v[0])
		}
	}
	if restored {
		return c.OriginalDestination(local)
	}
	return ""
}

// OriginalDestination returns the host address to put in lb.Context.OverrideHost for a
// downstream original destination (or header value) addr, applying upstream_port_override.
func (c *Cluster) OriginalDestination(addr string) string {
	p := c.cfg.OriginalDst.UpstreamPortOverride
	if p == 0 {
		return addr
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return addr
	}
	return netip.AddrPortFrom(ap.Addr(), uint16(p)).String()
}

// addOriginalDst creates the host of a new original destination and publishes it at once (a
// membership change). Invalid addresses count original_dst_host_invalid.
func (c *Cluster) addOriginalDst(addr string) (*host.Host, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		c.stats.stats.OriginalDstHostInvalid.Inc()
		return nil, fmt.Errorf("%w: original destination %q is not ip:port", lb.ErrNoHealthyHost, addr)
	}
	return c.addDynamicHost(ap.String(), host.Config{Address: ap.String()})
}

// addDynamicHost adds the host made of hc under key (an ORIGINAL_DST address, a dynamic
// forward proxy's "name:port"), or returns the one already there, and publishes it at once.
func (c *Cluster) addDynamicHost(key string, hc host.Config) (*host.Host, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, lb.ErrNoHealthyHost
	}
	if c.odst == nil {
		c.odst = map[string]*host.Host{}
	}
	if h, ok := c.odst[key]; ok {
		c.mu.Unlock()
		return h, nil
	}
	h, err := host.New(hc)
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	c.countSocketMatch(h)
	st := &HostStats{}
	st.used.Store(true)
	hostStats := maps.Clone(c.hostStats)
	if hostStats == nil {
		hostStats = map[*host.Host]*HostStats{}
	}
	hostStats[h] = st
	c.pending = &pendingUpdate{hosts: append(slices.Clip(c.hosts), h), settings: c.settings, stats: hostStats}
	warmedNow, err := c.schedule(c.pending, true)
	if err == nil {
		c.odst[key] = h
	}
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	c.afterApply(warmedNow, true)
	return h, nil
}

// dropDynamicHost removes the host added under key, if any, and publishes the change.
func (c *Cluster) dropDynamicHost(key string) {
	c.mu.Lock()
	h := c.odst[key]
	if h == nil || c.closed {
		c.mu.Unlock()
		return
	}
	delete(c.odst, key)
	keep := slices.DeleteFunc(slices.Clone(c.hosts), func(x *host.Host) bool { return x == h })
	hostStats := maps.Clone(c.hostStats)
	delete(hostStats, h)
	c.pending = &pendingUpdate{hosts: keep, settings: c.settings, stats: hostStats}
	warmedNow, err := c.schedule(c.pending, true)
	c.mu.Unlock()
	if err != nil {
		c.m.log.Errorf("cluster %q: removing host %s: %v", c.cfg.Name, key, err)
		return
	}
	c.afterApply(warmedNow, true)
}

// runCleanup is the discovery goroutine of ORIGINAL_DST clusters: every cleanup_interval it
// removes the hosts no request picked since the previous sweep.
func (c *Cluster) runCleanup(ctx context.Context) {
	for c.m.sleep(ctx, c.cfg.CleanupInterval) {
		c.cleanup()
	}
}

// cleanup removes unused ORIGINAL_DST hosts and clears the used marks of the others.
func (c *Cluster) cleanup() {
	c.mu.Lock()
	var keep []*host.Host
	for _, h := range c.hosts {
		if st := c.hostStats[h]; st != nil && st.used.Swap(false) {
			keep = append(keep, h)
			continue
		}
		delete(c.odst, h.Address())
	}
	if len(keep) == len(c.hosts) || c.closed {
		c.mu.Unlock()
		return
	}
	hostStats := make(map[*host.Host]*HostStats, len(keep))
	for _, h := range keep {
		hostStats[h] = c.hostStats[h]
	}
	c.pending = &pendingUpdate{hosts: keep, settings: c.settings, stats: hostStats}
	warmedNow, err := c.schedule(c.pending, true)
	c.mu.Unlock()
	if err != nil {
		c.m.log.Errorf("cluster %q: original destination cleanup: %v", c.cfg.Name, err)
		return
	}
	c.afterApply(warmedNow, true)
}
