package cluster

import (
	"context"
	"net/netip"
	"time"

	"github.com/legateproxy/legate/config"
)

// runDNS is the discovery goroutine of STRICT_DNS and LOGICAL_DNS clusters: it resolves every
// target, publishes the hosts, and waits for the next refresh (dns_refresh_rate, the record TTL
// with respect_dns_ttl, or dns_failure_refresh_rate after a failure). A failed target keeps the
// hosts of its last good resolution. The first round warms the cluster even when it fails.
func (c *Cluster) runDNS(ctx context.Context) {
	var last [][]netip.Addr
	for ctx.Err() == nil {
		next := c.resolveRound(ctx, &last)
		if !c.m.sleep(ctx, next) {
			return
		}
	}
}

// sleep waits d on the manager's clock; false when ctx ended first.
func (m *Manager) sleep(ctx context.Context, d time.Duration) bool {
	tick := make(chan struct{}, 1)
	t := m.clock.AfterFunc(d, func() { tick <- struct{}{} })
	select {
	case <-ctx.Done():
		t.Stop()
		return false
	case <-tick:
		return true
	}
}

// targets lists the (locality, endpoint) pairs to resolve.
type dnsTarget struct {
	l config.LocalityEndpoints
	e config.Endpoint
}

func (c *Cluster) dnsTargets() []dnsTarget {
	var out []dnsTarget
	for _, l := range c.cfg.LoadAssignment.Localities {
		for _, e := range l.Endpoints {
			out = append(out, dnsTarget{l, e})
		}
	}
	return out
}

// resolveRound resolves every target once, publishes the result and returns the delay until the
// next round.
func (c *Cluster) resolveRound(ctx context.Context, last *[][]netip.Addr) time.Duration {
	targets := c.dnsTargets()
	if len(*last) != len(targets) {
		*last = make([][]netip.Addr, len(targets))
	}
	st := &c.stats.stats
	st.UpdateAttempt.Inc()
	failed := false
	var ttl time.Duration
	for i, t := range targets {
		addrs, recTTL, err := c.m.resolver.Resolve(ctx, t.e.Address.Host, c.cfg.DNSLookupFamily, &c.cfg.DNSResolution)
		if err != nil {
			if ctx.Err() != nil {
				return c.cfg.DNSRefreshRate
			}
			failed = true
			c.m.log.Warnf("cluster %q: DNS resolution of %q failed: %v; keeping the last hosts", c.cfg.Name, t.e.Address.Host, err)
			continue
		}
		(*last)[i] = addrs
		ttl = minTTL(ttl, recTTL)
	}
	u := hostUpdate{settings: assignmentSettings(c.cfg.LoadAssignment)}
	for i, t := range targets {
		addrs := (*last)[i]
		if c.cfg.Type == config.LogicalDNS {
			addrs = logicalAddrs(addrs)
		}
		for _, a := range addrs {
			hc := endpointHost(c.cfg, t.l, t.e, netip.AddrPortFrom(a, uint16(t.e.Address.Port)).String())
			if hc.Hostname == "" {
				hc.Hostname = t.e.Address.Host
			}
			u.hosts = append(u.hosts, hc)
		}
	}
	u.keepStatsByHostname = c.cfg.Type == config.LogicalDNS
	if err := c.update(u); err != nil {
		failed = true
		c.m.log.Errorf("%v", err)
	}
	if failed {
		st.UpdateFailure.Inc()
		if c.cfg.DNSFailureRefreshRate > 0 {
			return c.cfg.DNSFailureRefreshRate
		}
		return c.cfg.DNSRefreshRate
	}
	st.UpdateSuccess.Inc()
	if c.cfg.RespectDNSTTL && ttl > 0 {
		return ttl
	}
	return c.cfg.DNSRefreshRate
}
