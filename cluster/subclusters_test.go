package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/nettest"
)

// subClusterParent is a dynamic forward proxy cluster with sub_clusters_config whose
// sub-clusters resolve through the DNS server at dnsAddr.
func subClusterParent(dnsAddr string) string {
	return `name: dfp
lb_policy: CLUSTER_PROVIDED
dns_lookup_family: V4_ONLY
dns_refresh_rate: 60s
dns_resolvers: [{socket_address: {address: 127.0.0.1, port_value: ` + portOf(dnsAddr) + `}}]
cluster_type:
  name: envoy.clusters.dynamic_forward_proxy
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.clusters.dynamic_forward_proxy.v3.ClusterConfig
    sub_clusters_config:
      lb_policy: ROUND_ROBIN
      max_sub_clusters: 2
      sub_cluster_ttl: 10s
      preresolve_clusters: [{address: pre.test, port_value: 80}]
`
}

// waitTimerAt waits until a timer is due at when.
func (c *fakeClock) waitTimerAt(t *testing.T, when time.Time) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		for _, tm := range c.timers {
			if tm.when.Equal(when) {
				c.mu.Unlock()
				return
			}
		}
		c.mu.Unlock()
		select {
		case <-c.added:
		case <-deadline:
			t.Fatalf("no timer due at %v within 10s", when)
		}
	}
}

// loadActive loads the sub-cluster of key and waits until it is active.
func loadActive(t *testing.T, c *Cluster, key string) {
	t.Helper()
	ready, err := c.LoadSubCluster(key)
	if err != nil {
		t.Fatalf("LoadSubCluster(%s): %v", key, err)
	}
	waitActive(t, ready)
}

// waitActive waits for a whenActive or LoadSubCluster channel.
func waitActive(t *testing.T, ready <-chan struct{}) {
	t.Helper()
	waitClosed(t, ready, "the wait for the sub-cluster")
}

// TestSubClusters: each name:port is a STRICT_DNS cluster "DFPCluster:name:port" of the
// parent's settings and lb_policy, preresolve_clusters are made with the parent,
// max_sub_clusters bounds them, one unused for sub_cluster_ttl leaves at the next sweep, and
// all leave with the parent.
func TestSubClusters(t *testing.T) {
	s := nettest.StartDNS(t)
	s.Set("pre.test.", "pre.test. 30 IN A 10.0.0.1")
	s.Set("a.test.", "a.test. 30 IN A 10.0.0.2", "a.test. 30 IN A 10.0.0.3")
	s.Set("b.test.", "b.test. 30 IN A 10.0.0.4")
	e := newEnv(t, nil)
	retired := make(chan string, 10)
	defer e.m.OnRetire(func(c *Cluster) { retired <- c.Config().Name })()
	start := e.clock.Now()
	runManager(t, e)
	if _, err := e.m.AddOrUpdate(parseCluster(t, subClusterParent(s.Addr)), "1"); err != nil {
		t.Fatal(err)
	}
	parent := e.m.Get("dfp")
	for parent == nil {
		waitActive(t, e.m.whenActive("dfp"))
		parent = e.m.Get("dfp")
	}
	if !parent.HasSubClusters() || parent.ForwardProxySubCluster("A.test") != "DFPCluster:a.test:80" {
		t.Fatalf("HasSubClusters, ForwardProxySubCluster(A.test) = %v, %q; want true, DFPCluster:a.test:80", parent.HasSubClusters(), parent.ForwardProxySubCluster("A.test"))
	}
	waitActive(t, e.m.whenActive("DFPCluster:pre.test:80"))
	loadActive(t, parent, "a.test:80")
	sub := e.m.Get("DFPCluster:a.test:80")
	if got := sub.Config(); got.Type != config.StrictDNS || got.LbPolicy != "ROUND_ROBIN" || got.DNSLookupFamily != config.V4Only ||
		!got.UpstreamHTTP.AutoSNI || !got.UpstreamHTTP.AutoSANValidation {
		t.Errorf("sub-cluster config: type %v, lb %v, family %v, upstream HTTP %+v; want STRICT_DNS, ROUND_ROBIN, V4_ONLY, auto_sni and auto_san_validation",
			got.Type, got.LbPolicy, got.DNSLookupFamily, got.UpstreamHTTP)
	}
	if diff := cmp.Diff([]string{"p0 10.0.0.2:80 healthy w1", "p0 10.0.0.3:80 healthy w1"}, addresses(sub.Snapshot().PrioritySet)); diff != "" {
		t.Errorf("sub-cluster hosts (-want +got):\n%s", diff)
	}
	if _, err := parent.LoadSubCluster("b.test:80"); !errors.Is(err, ErrSubClusterOverflow) {
		t.Errorf("a third sub-cluster = %v; want ErrSubClusterOverflow (max_sub_clusters 2)", err)
	}

	// a.test is used again at 10 s; at the 20 s sweep only pre.test has been idle longer
	// than sub_cluster_ttl.
	e.clock.waitTimerAt(t, start.Add(10*time.Second))
	e.clock.Advance(10 * time.Second)
	loadActive(t, parent, "a.test:80")
	e.clock.waitTimerAt(t, start.Add(20*time.Second))
	e.clock.Advance(10 * time.Second)
	if name := <-retired; name != "DFPCluster:pre.test:80" {
		t.Fatalf("retired %q; want DFPCluster:pre.test:80", name)
	}
	loadActive(t, parent, "b.test:80")
	e.wantStats(t, map[string]uint64{"cluster.DFPCluster_b.test_80.membership_total": 1})

	e.m.Remove("dfp")
	got := map[string]bool{}
	for len(got) < 3 {
		select {
		case name := <-retired:
			got[name] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("retired %v within 10s; want dfp and its two sub-clusters", got)
		}
	}
	if !got["DFPCluster:a.test:80"] || !got["DFPCluster:b.test:80"] || !got["dfp"] {
		t.Errorf("retired %v; want dfp, DFPCluster:a.test:80 and DFPCluster:b.test:80", got)
	}
}
