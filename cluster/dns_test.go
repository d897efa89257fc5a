package cluster

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/nettest"
)

func TestDNSResolverFamilies(t *testing.T) {
	s := nettest.StartDNS(t)
	s.Set("both.test.", "both.test. 30 IN A 10.0.0.1", "both.test. 20 IN AAAA ::1")
	s.Set("v4.test.", "v4.test. 60 IN A 10.0.0.2", "v4.test. 60 IN A 10.0.0.3")
	r := &DNSResolver{Timeout: 2 * time.Second}
	tests := []struct {
		name    string
		host    string
		family  config.DNSLookupFamily
		want    []string
		wantTTL time.Duration
	}{
		{"auto prefers v6", "both.test", config.Auto, []string{"::1"}, 20 * time.Second},
		{"auto falls back to v4", "v4.test", config.Auto, []string{"10.0.0.2", "10.0.0.3"}, time.Minute},
		{"v4 only", "both.test", config.V4Only, []string{"10.0.0.1"}, 30 * time.Second},
		{"v6 only", "both.test", config.V6Only, []string{"::1"}, 20 * time.Second},
		{"all", "both.test", config.All, []string{"10.0.0.1", "::1"}, 20 * time.Second},
		{"literal", "10.9.9.9", config.Auto, []string{"10.9.9.9"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addrs, ttl, err := r.Resolve(context.Background(), tt.host, tt.family, &config.DNSResolution{Servers: []string{s.Addr}})
			if err != nil {
				t.Fatalf("Resolve() error = %v", err)
			}
			var got []string
			for _, a := range addrs {
				got = append(got, a.String())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Resolve() addresses (-want +got):\n%s", diff)
			}
			if ttl != tt.wantTTL {
				t.Errorf("Resolve() ttl = %v; want %v", ttl, tt.wantTTL)
			}
		})
	}
	if _, _, err := r.Resolve(context.Background(), "v4.test", config.V6Only, &config.DNSResolution{Servers: []string{s.Addr}}); err == nil {
		t.Errorf("Resolve(v6 only, no AAAA) = nil error; want an error")
	}
}

func runManager(t *testing.T, e *testEnv) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func TestStrictDNS(t *testing.T) {
	s := nettest.StartDNS(t)
	s.Set("web.test.", "web.test. 3 IN A 10.0.0.1", "web.test. 3 IN A 10.0.0.2")
	s.Set("api.test.", "api.test. 3 IN A 10.0.0.9")
	e := newEnv(t, nil)
	cfg := parseCluster(t, `
name: dns
type: STRICT_DNS
dns_lookup_family: V4_ONLY
respect_dns_ttl: true
dns_refresh_rate: 10s
common_lb_config: {update_merge_window: 0s}
dns_resolvers: [{socket_address: {address: 127.0.0.1, port_value: `+portOf(s.Addr)+`}}]
load_assignment:
  endpoints:
  - lb_endpoints:
    - endpoint: {address: {socket_address: {address: web.test, port_value: 80}}}
    - endpoint: {address: {socket_address: {address: api.test, port_value: 81}}}
`)
	ready := make(chan struct{})
	e.m.initFn = func(string) (func(), error) { return func() { close(ready) }, nil }
	if err := e.m.AddStatic([]*config.Cluster{cfg}); err != nil {
		t.Fatal(err)
	}
	runManager(t, e)
	e.clock.waitTimer(t) // first round done, next scheduled
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("init target not ready after the first resolution")
	}
	c := e.m.Get("dns")
	want := []string{"p0 10.0.0.1:80 healthy w1", "p0 10.0.0.2:80 healthy w1", "p0 10.0.0.9:81 healthy w1"}
	if diff := cmp.Diff(want, addresses(c.Snapshot().PrioritySet)); diff != "" {
		t.Errorf("hosts (-want +got):\n%s", diff)
	}
	if h := c.Snapshot().PrioritySet.Sets()[0].Hosts()[0]; h.Hostname() != "web.test" {
		t.Errorf("Hostname() = %q; want web.test", h.Hostname())
	}

	// respect_dns_ttl: the next round comes after 3s, not 10s.
	s.Set("web.test.", "web.test. 3 IN A 10.0.0.3")
	e.clock.Advance(3 * time.Second)
	e.clock.waitTimer(t)
	want = []string{"p0 10.0.0.3:80 healthy w1", "p0 10.0.0.9:81 healthy w1"}
	if diff := cmp.Diff(want, addresses(c.Snapshot().PrioritySet)); diff != "" {
		t.Errorf("hosts after TTL refresh (-want +got):\n%s", diff)
	}

	// A failing server keeps the last good hosts.
	s.SetFail(true)
	e.clock.Advance(3 * time.Second)
	e.clock.waitTimer(t)
	if diff := cmp.Diff(want, addresses(c.Snapshot().PrioritySet)); diff != "" {
		t.Errorf("hosts after DNS failure (-want +got):\n%s", diff)
	}
	e.wantStats(t, map[string]uint64{"cluster.dns.update_failure": 1, "cluster.dns.update_success": 2, "cluster.dns.update_attempt": 3})
}

func TestLogicalDNS(t *testing.T) {
	s := nettest.StartDNS(t)
	s.Set("one.test.", "one.test. 30 IN A 10.0.0.1", "one.test. 30 IN A 10.0.0.2")
	e := newEnv(t, nil)
	cfg := parseCluster(t, `
name: logical
type: LOGICAL_DNS
dns_lookup_family: V4_ONLY
dns_refresh_rate: 1s
dns_resolvers: [{socket_address: {address: 127.0.0.1, port_value: `+portOf(s.Addr)+`}}]
load_assignment:
  endpoints:
  - lb_endpoints:
    - endpoint: {address: {socket_address: {address: one.test, port_value: 80}}}
`)
	if err := e.m.AddStatic([]*config.Cluster{cfg}); err != nil {
		t.Fatal(err)
	}
	runManager(t, e)
	e.clock.waitTimer(t)
	c := e.m.Get("logical")
	if diff := cmp.Diff([]string{"p0 10.0.0.1:80 healthy w1"}, addresses(c.Snapshot().PrioritySet)); diff != "" {
		t.Fatalf("hosts (-want +got):\n%s", diff)
	}
	h := c.Snapshot().PrioritySet.Sets()[0].Hosts()[0]
	c.Snapshot().HostStats(h).CxTotal.Add(4)
	s.Set("one.test.", "one.test. 30 IN A 10.0.0.7")
	e.clock.Advance(time.Second)
	e.clock.waitTimer(t)
	h2 := c.Snapshot().PrioritySet.Sets()[0].Hosts()[0]
	if h2.Address() != "10.0.0.7:80" {
		t.Fatalf("address after change = %s; want 10.0.0.7:80", h2.Address())
	}
	if got := c.Snapshot().HostStats(h2).CxTotal.Load(); got != 4 {
		t.Errorf("cx_total after address change = %d; want 4 (stats kept)", got)
	}
}

func portOf(addr string) string {
	ap := netip.MustParseAddrPort(addr)
	return ap.String()[len(ap.Addr().String())+1:]
}

// TestDNSResolverTCP: use_tcp_for_dns_lookups asks a name server that listens on TCP only,
// both a configured one and the system resolver's; over UDP nothing answers.
func TestDNSResolverTCP(t *testing.T) {
	s := nettest.StartDNSTCP(t)
	s.Set("tcp.test.", "tcp.test. 30 IN A 10.0.0.1")
	r := &DNSResolver{Timeout: 2 * time.Second, System: systemAt(s.Addr)}
	for _, tc := range []struct {
		name string
		res  config.DNSResolution
	}{
		{"servers", config.DNSResolution{Servers: []string{s.Addr}, TCP: true}},
		{"system", config.DNSResolution{TCP: true, NoSearchDomain: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addrs, _, err := r.Resolve(context.Background(), "tcp.test", config.V4Only, &tc.res)
			if err != nil || len(addrs) != 1 || addrs[0].String() != "10.0.0.1" {
				t.Fatalf("Resolve() = %v, %v; want [10.0.0.1]", addrs, err)
			}
			tc.res.TCP = false
			if addrs, _, err := r.Resolve(context.Background(), "tcp.test", config.V4Only, &tc.res); err == nil {
				t.Errorf("Resolve() over UDP = %v; want an error (the server listens on TCP only)", addrs)
			}
		})
	}
}

// systemAt is a Go resolver whose name servers are addr, whatever resolv.conf says.
func systemAt(addr string) *net.Resolver {
	var d net.Dialer
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}
}

// TestDNSResolverNoSearchDomain: with no_default_search_domain the system resolver asks the
// name as it is and nothing else.
func TestDNSResolverNoSearchDomain(t *testing.T) {
	s := nettest.StartDNS(t)
	s.Set("plain.", "plain. 30 IN A 10.0.0.4")
	r := &DNSResolver{System: systemAt(s.Addr)}
	addrs, _, err := r.Resolve(context.Background(), "plain", config.V4Only, &config.DNSResolution{NoSearchDomain: true})
	if err != nil || len(addrs) != 1 || addrs[0].String() != "10.0.0.4" {
		t.Fatalf("Resolve() = %v, %v; want [10.0.0.4]", addrs, err)
	}
	if diff := cmp.Diff([]string{"plain"}, s.Names()); diff != "" {
		t.Errorf("names asked (-want +got):\n%s", diff)
	}
}

// TestDNSResolverRetries: getaddrinfo's num_retries makes a lookup that failed temporarily
// (SERVFAIL) again that many times; a name that does not exist is not asked again.
func TestDNSResolverRetries(t *testing.T) {
	s := nettest.StartDNS(t)
	s.SetFail(true)
	r := &DNSResolver{System: systemAt(s.Addr)}
	resolve := func(name string, retries uint32) int {
		res := &config.DNSResolution{NoSearchDomain: true, Retries: retries}
		if _, _, err := r.Resolve(context.Background(), name, config.V4Only, res); err == nil {
			t.Fatalf("Resolve(%s) = nil error; want SERVFAIL", name)
		}
		return s.Queries(name)
	}
	// Go's resolver asks each resolv.conf server resolv.conf's attempts times per lookup.
	once := resolve("once.test", 0)
	if once == 0 {
		t.Fatal("no query reached the server")
	}
	if got := resolve("thrice.test", 2); got != 3*once {
		t.Errorf("queries with num_retries 2 = %d; want %d (3 lookups of %d)", got, 3*once, once)
	}
	s.SetFail(false)
	s.NXDomain("gone.test.")
	if got := resolve("gone.test", 2); got != 1 {
		t.Errorf("queries for a name that does not exist with num_retries 2 = %d; want 1", got)
	}
}

// TestStrictDNSResolverConfig: a STRICT_DNS cluster's dns_resolution_config and
// typed_dns_resolver_config choose its name servers and TCP, as Envoy's do.
func TestStrictDNSResolverConfig(t *testing.T) {
	s := nettest.StartDNSTCP(t)
	s.Set("tcp.test.", "tcp.test. 30 IN A 10.0.0.5")
	port := portOf(s.Addr)
	for _, tc := range []struct{ name, resolver string }{
		{"dns_resolution_config", `dns_resolution_config: {resolvers: [{socket_address: {address: 127.0.0.1, port_value: ` + port + `}}],
  dns_resolver_options: {use_tcp_for_dns_lookups: true}}`},
		{"typed_dns_resolver_config", `typed_dns_resolver_config: {name: envoy.network.dns_resolver.cares, typed_config: {
  "@type": type.googleapis.com/envoy.extensions.network.dns_resolver.cares.v3.CaresDnsResolverConfig,
  resolvers: [{socket_address: {address: 127.0.0.1, port_value: ` + port + `}}], dns_resolver_options: {use_tcp_for_dns_lookups: true}}}`},
		{"use_tcp_for_dns_lookups", `use_tcp_for_dns_lookups: true
dns_resolvers: [{socket_address: {address: 127.0.0.1, port_value: ` + port + `}}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			cfg := parseCluster(t, `
name: dns
type: STRICT_DNS
dns_lookup_family: V4_ONLY
common_lb_config: {update_merge_window: 0s}
`+tc.resolver+`
load_assignment:
  endpoints:
  - lb_endpoints:
    - endpoint: {address: {socket_address: {address: tcp.test, port_value: 80}}}
`)
			if err := e.m.AddStatic([]*config.Cluster{cfg}); err != nil {
				t.Fatal(err)
			}
			runManager(t, e)
			e.clock.waitTimer(t)
			if diff := cmp.Diff([]string{"p0 10.0.0.5:80 healthy w1"}, addresses(e.m.Get("dns").Snapshot().PrioritySet)); diff != "" {
				t.Errorf("hosts (-want +got):\n%s", diff)
			}
		})
	}
}
