package cluster

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	dfpclusterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/dynamic_forward_proxy/v3"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/lb"
)

// A dynamic forward proxy cluster (envoy.clusters.dynamic_forward_proxy) has the hosts of its
// DNS cache that requests asked for: the router passes the request's "name:port"
// (ForwardProxyKey) as lb.Context.OverrideHost, the balancer picks the host of that key, and
// a key the cluster lacks becomes a host (the first address its cache resolved, the name as
// its hostname, so a TLS cluster sends it as SNI) when the cache has resolved it. When the
// cache drops a host or its address changes, the cluster drops its host; the next request
// makes it again. The envoy.filters.http.dynamic_forward_proxy filter makes requests wait
// for the cache; without it a request for a name not yet resolved finds no host.

// errUnknownForwardHost: the request's name:port is not (yet) a host of the cluster.
var errUnknownForwardHost = fmt.Errorf("%w: host not in the dynamic forward proxy cluster", lb.ErrNoHealthyHost)

// registerDynamicForwardProxy registers the cluster type's hosts.
func registerDynamicForwardProxy(b *registry.Builder) {
	registry.Add(b, customTypes, config.DynamicForwardProxyClusterType, &dfpclusterv3.ClusterConfig{}, customType{
		dependencies: func(*config.Cluster) []string { return nil },
		build:        buildForwardProxy,
		attach:       attachForwardProxy,
		detach:       detachForwardProxy,
	})
}

// attachForwardProxy binds c to its DNS cache. m.mu is held.
func attachForwardProxy(m *Manager, c *Cluster) error {
	cfg, ok := c.cfg.CustomType.Settings.(*config.DynamicForwardProxyConfig)
	if !ok || cfg == nil {
		return fmt.Errorf("cluster %q: cluster_type.typed_config: no dns_cache_config", c.cfg.Name)
	}
	c.dnsDefaultPort = 80
	if ts := c.cfg.TransportSocket; ts != nil && strings.HasSuffix(ts.GetTypedConfig().GetTypeUrl(), ".UpstreamTlsContext") {
		c.dnsDefaultPort = 443
	}
	if cfg.SubClusters != nil {
		attachSubClusters(m, c, cfg.SubClusters)
		return nil
	}
	cache, err := m.dnsCacheLocked(cfg.DNSCache)
	if err != nil {
		return fmt.Errorf("cluster %q: cluster_type.typed_config.%w", c.cfg.Name, err)
	}
	c.dns = cache
	cache.subscribe(c, c.dropDynamicHost)
	return nil
}

// detachForwardProxy unbinds c from its DNS cache, or removes its sub-clusters. m.mu is held.
func detachForwardProxy(c *Cluster) {
	if c.sub != nil {
		c.sub.detach()
		return
	}
	c.dns.unsubscribe(c)
}

// forwardBalancer picks the host of lb.Context.OverrideHost, a "name:port". Immutable.
type forwardBalancer struct{ byKey map[string]*host.Host }

func buildForwardProxy(_ *Manager, _ *Cluster, ps *host.PrioritySet) (*host.PrioritySet, lb.Balancer) {
	b := &forwardBalancer{byKey: map[string]*host.Host{}}
	for _, s := range ps.Sets() {
		for _, h := range s.Hosts() {
			if ap, err := netip.ParseAddrPort(h.Address()); err == nil {
				b.byKey[config.HostKey(h.Hostname(), uint32(ap.Port()))] = h
			}
		}
	}
	return ps, b
}

func (b *forwardBalancer) Pick(ctx *lb.Context) (*host.Host, error) {
	if ctx == nil || ctx.OverrideHost == "" {
		return nil, lb.ErrNoHealthyHost
	}
	if h := b.byKey[ctx.OverrideHost]; h != nil {
		return h, nil
	}
	return nil, errUnknownForwardHost
}

// IsForwardProxy reports whether c is a dynamic forward proxy cluster.
func (c *Cluster) IsForwardProxy() bool { return c.dns != nil || c.sub != nil }

// ForwardProxyDNSCache returns the DNS cache of a dynamic forward proxy cluster, nil for
// other clusters.
func (c *Cluster) ForwardProxyDNSCache() *DNSCache { return c.dns }

// ForwardProxyKey returns the DNS cache key of a request to authority: "name:port", the port
// the authority's or the cluster's default (443 with a TLS transport socket, else 80), the
// name lower-cased. "" for other clusters.
func (c *Cluster) ForwardProxyKey(authority string) string {
	if !c.IsForwardProxy() || authority == "" {
		return ""
	}
	name, port := authority, c.dnsDefaultPort
	if hp, err := splitHostKey(authority); err == nil {
		name, port = hp.host, uint32(hp.port)
	} else if strings.HasPrefix(name, "[") && strings.HasSuffix(name, "]") {
		name = name[1 : len(name)-1]
	}
	return config.HostKey(strings.ToLower(name), port)
}

// addForwardHost makes the host of key from its DNS cache's answer.
func (c *Cluster) addForwardHost(key string) (*host.Host, error) {
	addrs, err := c.dns.Addresses(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", lb.ErrNoHealthyHost, err)
	}
	if len(addrs) == 0 {
		return nil, errUnknownForwardHost
	}
	hp, err := splitHostKey(key)
	if err != nil {
		return nil, errors.Join(lb.ErrNoHealthyHost, err)
	}
	return c.addDynamicHost(key, host.Config{Address: netip.AddrPortFrom(addrs[0], hp.port).String(), Hostname: hp.host})
}
