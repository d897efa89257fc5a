package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/nettest"
	"github.com/legateproxy/legate/lb"
)

func dfpTestCluster(dnsAddr, extra string) string {
	return `name: dfp
lb_policy: CLUSTER_PROVIDED
cluster_type:
  name: envoy.clusters.dynamic_forward_proxy
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.clusters.dynamic_forward_proxy.v3.ClusterConfig
    dns_cache_config:
      name: c
      dns_lookup_family: V4_ONLY
      host_ttl: 60s
      max_hosts: 1
      typed_dns_resolver_config:
        name: envoy.network.dns_resolver.cares
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.network.dns_resolver.cares.v3.CaresDnsResolverConfig
          resolvers: [{socket_address: {address: 127.0.0.1, port_value: ` + portOf(dnsAddr) + `}}]
` + extra
}

// waitReady waits for a Load's resolution.
func waitReady(t *testing.T, ready <-chan struct{}, release func()) {
	t.Helper()
	defer release()
	waitClosed(t, ready, "the DNS cache's resolution")
}

// waitClosed waits up to 10 s for ch, what it stands for, to be closed.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not end within 10s", what)
	}
}

// TestForwardProxyCacheLifecycle: a resolved name becomes the cluster's host of its
// name:port; a new address at the TTL's refresh replaces it; a host unused for host_ttl
// leaves cache and cluster; max_hosts bounds the cache.
func TestForwardProxyCacheLifecycle(t *testing.T) {
	s := nettest.StartDNS(t)
	s.Set("web.test.", "web.test. 30 IN A 10.0.0.1")
	e := newEnv(t, nil)
	if err := e.m.AddStatic([]*config.Cluster{parseCluster(t, dfpTestCluster(s.Addr, ""))}); err != nil {
		t.Fatal(err)
	}
	runManager(t, e)
	c := e.m.Get("dfp")
	cache := c.ForwardProxyDNSCache()
	key := c.ForwardProxyKey("Web.test")
	if key != "web.test:80" {
		t.Fatalf("ForwardProxyKey(Web.test) = %q; want web.test:80", key)
	}
	if _, err := c.Pick(&lb.Context{OverrideHost: key}); !errors.Is(err, lb.ErrNoHealthyHost) {
		t.Fatalf("Pick before resolution = %v; want no healthy host", err)
	}
	_, ready, release, err := cache.Load(key)
	if err != nil || ready == nil {
		t.Fatalf("Load = %v, %v; want a resolution to wait for", ready, err)
	}
	waitReady(t, ready, release)
	e.clock.waitTimer(t) // the refresh is scheduled
	pick := func(want string) {
		t.Helper()
		h, err := c.Pick(&lb.Context{OverrideHost: key})
		if err != nil || h.Address() != want || h.Hostname() != "web.test" {
			t.Fatalf("Pick = %v, %v; want %s named web.test", h, err, want)
		}
	}
	pick("10.0.0.1:80")
	e.wantStats(t, map[string]uint64{"dns_cache.c.host_added": 1, "dns_cache.c.num_hosts": 1, "dns_cache.c.dns_query_success": 1, "cluster.dfp.membership_total": 1})

	if _, _, _, err := cache.Load("other.test:80"); !errors.Is(err, ErrDNSCacheOverflow) {
		t.Errorf("Load of a second host = %v; want ErrDNSCacheOverflow (max_hosts 1)", err)
	}

	s.Set("web.test.", "web.test. 30 IN A 10.0.0.5")
	e.clock.Advance(30 * time.Second) // the TTL
	e.clock.waitTimer(t)
	pick("10.0.0.5:80")
	e.wantStats(t, map[string]uint64{"dns_cache.c.host_address_changed": 1, "cluster.dfp.membership_total": 1})

	published := make(chan struct{}, 1)
	defer e.m.OnSnapshot(func(cl *Cluster) {
		if cl == c {
			select {
			case published <- struct{}{}:
			default:
			}
		}
	})()
	e.clock.Advance(30 * time.Second) // refreshed; the pick above used it 30 s ago
	e.clock.waitTimer(t)
	e.wantStats(t, map[string]uint64{"dns_cache.c.num_hosts": 1})
	e.clock.Advance(30 * time.Second) // 60 s unused: host_ttl
	select {
	case <-published:
	case <-time.After(10 * time.Second):
		t.Fatal("the cluster published no host set after host_ttl")
	}
	e.wantStats(t, map[string]uint64{"dns_cache.c.host_removed": 1, "dns_cache.c.num_hosts": 0,
		"dns_cache.c.host_overflow": 1, "cluster.dfp.membership_total": 0})
}

// TestForwardProxyKey: the port of the authority, else the cluster's default.
func TestForwardProxyKey(t *testing.T) {
	s := nettest.StartDNS(t)
	e := newEnv(t, nil)
	tls := `transport_socket: {name: envoy.transport_sockets.tls, typed_config: {"@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext}}`
	if err := e.m.AddStatic([]*config.Cluster{parseCluster(t, dfpTestCluster(s.Addr, tls))}); err != nil {
		t.Fatal(err)
	}
	c := e.m.Get("dfp")
	for in, want := range map[string]string{"a.test": "a.test:443", "a.test:8080": "a.test:8080", "[::1]:81": "[::1]:81", "[::1]": "[::1]:443", "": ""} {
		if got := c.ForwardProxyKey(in); got != want {
			t.Errorf("ForwardProxyKey(%q) = %q; want %q", in, got, want)
		}
	}
}
