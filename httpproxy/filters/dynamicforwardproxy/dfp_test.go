package dynamicforwardproxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	dfpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/dynamic_forward_proxy/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
	"github.com/legateproxy/legate/internal/nettest"
	"github.com/legateproxy/legate/internal/registry"
)

// hostEcho starts an upstream on 127.0.0.1 answering with the Host it was sent; it returns
// its port.
func hostEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "host="+r.Host)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// caresResolver is a typed_dns_resolver_config asking the test's DNS server.
func caresResolver(dns *nettest.DNSServer) string {
	_, port, _ := net.SplitHostPort(dns.Addr)
	return fmt.Sprintf(`typed_dns_resolver_config: {name: envoy.network.dns_resolver.cares, typed_config: {
    "@type": type.googleapis.com/envoy.extensions.network.dns_resolver.cares.v3.CaresDnsResolverConfig,
    resolvers: [{socket_address: {address: 127.0.0.1, port_value: %s}}]}}`, port)
}

// startProxy runs a proxy whose routes all go to the dynamic forward proxy cluster web, its
// names resolved by the test's DNS server; routeExtra adds fields to the /other route.
func startProxy(t *testing.T, dns *nettest.DNSServer, routeExtra string) *filtertest.Proxy {
	return startProxyResolving(t, caresResolver(dns), routeExtra)
}

// startProxyResolving is startProxy with the DNS cache's resolver fields.
func startProxyResolving(t *testing.T, resolver, routeExtra string) *filtertest.Proxy {
	cache := "{name: egress, dns_lookup_family: V4_ONLY, dns_query_timeout: 2s,\n  " + resolver + "}"
	return filtertest.Start(t, filtertest.Options{
		Clusters: []string{`name: web
connect_timeout: 2s
lb_policy: CLUSTER_PROVIDED
cluster_type:
  name: envoy.clusters.dynamic_forward_proxy
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.clusters.dynamic_forward_proxy.v3.ClusterConfig
    dns_cache_config: ` + cache},
		HCM: filtertest.HCM(`- name: envoy.filters.http.dynamic_forward_proxy
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.dynamic_forward_proxy.v3.FilterConfig
    dns_cache_config: `+cache, routeExtra),
		Register: []func(*registry.Builder){Register},
	})
}

// TestForwardsToResolvedHost: a request for a name goes, once the test's DNS server resolved
// it, to that address at the Host's port, with its Host; the next request uses the cache.
func TestForwardsToResolvedHost(t *testing.T) {
	dns := nettest.StartDNS(t)
	dns.Set("web.test.", "web.test. 300 IN A 127.0.0.1")
	port := hostEcho(t)
	p := startProxy(t, dns, "")
	c := p.Client()
	for i := range 2 {
		resp, body := p.Get(c, "/x", "host", "web.test:"+port)
		if resp.StatusCode != 200 || body != "host=web.test:"+port {
			t.Fatalf("request %d = %d %q; want 200 host=web.test:%s", i, resp.StatusCode, body, port)
		}
	}
	if n := dns.Queries("web.test"); n != 1 {
		t.Errorf("DNS queries for web.test = %d; want 1 (the second request uses the cache)", n)
	}
	for name, want := range map[string]uint64{
		"dns_cache.egress.dns_query_attempt": 1, "dns_cache.egress.dns_query_success": 1,
		"dns_cache.egress.dns_query_failure": 0, "dns_cache.egress.host_added": 1,
		"dns_cache.egress.num_hosts": 1, "cluster.web.upstream_rq_total": 2,
	} {
		if got := p.Stat(name); got != want {
			t.Errorf("%s = %d; want %d", name, got, want)
		}
	}
}

// TestTCPLookups: dns_resolution_config's and c-ares's use_tcp_for_dns_lookups make the
// cache ask a name server that listens on TCP only, and the request reaches the host.
func TestTCPLookups(t *testing.T) {
	dns := nettest.StartDNSTCP(t)
	dns.Set("tcp.test.", "tcp.test. 300 IN A 127.0.0.1")
	port := hostEcho(t)
	_, dnsPort, _ := net.SplitHostPort(dns.Addr)
	for _, tc := range []struct{ name, resolver string }{
		{"dns_resolution_config", `dns_resolution_config: {resolvers: [{socket_address: {address: 127.0.0.1, port_value: ` + dnsPort + `}}],
    dns_resolver_options: {use_tcp_for_dns_lookups: true, no_default_search_domain: true}}`},
		{"cares options", `typed_dns_resolver_config: {name: envoy.network.dns_resolver.cares, typed_config: {
    "@type": type.googleapis.com/envoy.extensions.network.dns_resolver.cares.v3.CaresDnsResolverConfig,
    resolvers: [{socket_address: {address: 127.0.0.1, port_value: ` + dnsPort + `}}], dns_resolver_options: {use_tcp_for_dns_lookups: true}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := dns.Queries("tcp.test")
			p := startProxyResolving(t, tc.resolver, "")
			resp, body := p.Get(p.Client(), "/x", "host", "tcp.test:"+port)
			if resp.StatusCode != 200 || body != "host=tcp.test:"+port {
				t.Fatalf("response = %d %q; want 200 host=tcp.test:%s", resp.StatusCode, body, port)
			}
			if n := dns.Queries("tcp.test") - before; n != 1 {
				t.Errorf("TCP queries for tcp.test = %d; want 1", n)
			}
		})
	}
	// Without use_tcp_for_dns_lookups the cache asks over UDP, where nothing answers.
	p := startProxyResolving(t, `dns_resolution_config: {resolvers: [{socket_address: {address: 127.0.0.1, port_value: `+dnsPort+`}}]}`, "")
	resp, body := p.Get(p.Client(), "/x", "host", "tcp.test:"+port)
	if resp.StatusCode != http.StatusServiceUnavailable || body != "DNS resolution failure" {
		t.Fatalf("UDP response = %d %q; want 503 DNS resolution failure", resp.StatusCode, body)
	}
}

// TestSubClusters: with sub_clusters_config each name:port requested becomes a STRICT_DNS
// sub-cluster "DFPCluster:name:port" resolved by the test's DNS server; requests for two
// names reach their two upstreams through their sub-clusters, a third name past
// max_sub_clusters is answered 503 "Sub cluster overflow", and once sub_cluster_ttl removed
// the idle ones a new name is served.
func TestSubClusters(t *testing.T) {
	dns := nettest.StartDNS(t)
	dns.Set("a.test.", "a.test. 300 IN A 127.0.0.1")
	dns.Set("b.test.", "b.test. 300 IN A 127.0.0.1")
	dns.Set("c.test.", "c.test. 300 IN A 127.0.0.1")
	portA, portB := hostEcho(t), hostEcho(t)
	_, dnsPort, _ := net.SplitHostPort(dns.Addr)
	p := filtertest.Start(t, filtertest.Options{
		Clusters: []string{`name: web
connect_timeout: 2s
lb_policy: CLUSTER_PROVIDED
dns_lookup_family: V4_ONLY
dns_resolvers: [{socket_address: {address: 127.0.0.1, port_value: ` + dnsPort + `}}]
cluster_type:
  name: envoy.clusters.dynamic_forward_proxy
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.clusters.dynamic_forward_proxy.v3.ClusterConfig
    sub_clusters_config: {lb_policy: ROUND_ROBIN, max_sub_clusters: 2, sub_cluster_ttl: 1s}`},
		HCM: filtertest.HCM(`- name: envoy.filters.http.dynamic_forward_proxy
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.dynamic_forward_proxy.v3.FilterConfig
    sub_cluster_config: {cluster_init_timeout: 5s}`, ""),
		Register: []func(*registry.Builder){Register},
	})
	c := p.Client()
	for _, target := range []string{"a.test:" + portA, "b.test:" + portB, "a.test:" + portA} {
		resp, body := p.Get(c, "/x", "host", target)
		if resp.StatusCode != 200 || body != "host="+target {
			t.Fatalf("%s = %d %q; want 200 host=%s", target, resp.StatusCode, body, target)
		}
	}
	for name, want := range map[string]uint64{
		"cluster.DFPCluster_a.test_" + portA + ".upstream_rq_total": 2,
		"cluster.DFPCluster_b.test_" + portB + ".upstream_rq_total": 1,
		"cluster_manager.cluster_added":                             3, // web and the two sub-clusters
	} {
		if got := p.Stat(name); got != want {
			t.Errorf("%s = %d; want %d", name, got, want)
		}
	}
	resp, body := p.Get(c, "/x", "host", "c.test:"+portA)
	if resp.StatusCode != http.StatusServiceUnavailable || body != "Sub cluster overflow" {
		t.Fatalf("a third name = %d %q; want 503 Sub cluster overflow", resp.StatusCode, body)
	}
	// sub_cluster_ttl (1 s) removes both idle sub-clusters within a few sweeps; the proxy's
	// clock is the system's, so the sweep is polled for.
	for deadline := time.Now().Add(10 * time.Second); p.Stat("cluster_manager.cluster_removed") < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("cluster_removed = %d after 10s; want 2", p.Stat("cluster_manager.cluster_removed"))
		}
	}
	if resp, body := p.Get(c, "/x", "host", "c.test:"+portA); resp.StatusCode != 200 || body != "host=c.test:"+portA {
		t.Fatalf("c.test after the sweep = %d %q; want 200", resp.StatusCode, body)
	}
}

// TestResolvedAddressFilter: resolved_address_filter drops the addresses it matches (here
// 127.0.0.2, where nothing listens), so the request reaches the address left; an answer it
// empties is a failed resolution.
func TestResolvedAddressFilter(t *testing.T) {
	dns := nettest.StartDNS(t)
	dns.Set("mixed.test.", "mixed.test. 300 IN A 127.0.0.2", "mixed.test. 300 IN A 127.0.0.1")
	dns.Set("inner.test.", "inner.test. 300 IN A 127.0.0.2")
	port := hostEcho(t)
	p := startProxyResolving(t, caresResolver(dns)+",\n  resolved_address_filter: {ranges: [{address_prefix: 127.0.0.2, prefix_len: 32}]}", "")
	c := p.Client()
	if resp, body := p.Get(c, "/x", "host", "mixed.test:"+port); resp.StatusCode != 200 || body != "host=mixed.test:"+port {
		t.Errorf("mixed.test = %d %q; want 200 from 127.0.0.1", resp.StatusCode, body)
	}
	if resp, body := p.Get(c, "/x", "host", "inner.test:"+port); resp.StatusCode != http.StatusServiceUnavailable || body != "DNS resolution failure" {
		t.Errorf("inner.test = %d %q; want 503 DNS resolution failure", resp.StatusCode, body)
	}
	if got := p.Stat("dns_cache.egress.dns_query_failure"); got != 1 {
		t.Errorf("dns_query_failure = %d; want 1", got)
	}
}

// TestResolutionFailure: a name the DNS server does not know is answered 503 "DNS resolution
// failure" without reaching any upstream.
func TestResolutionFailure(t *testing.T) {
	dns := nettest.StartDNS(t)
	dns.NXDomain("missing.test.")
	p := startProxy(t, dns, "")
	resp, body := p.Get(p.Client(), "/x", "host", "missing.test:8080")
	if resp.StatusCode != http.StatusServiceUnavailable || body != "DNS resolution failure" {
		t.Fatalf("response = %d %q; want 503 DNS resolution failure", resp.StatusCode, body)
	}
	if got := p.Stat("dns_cache.egress.dns_query_failure"); got != 1 {
		t.Errorf("dns_query_failure = %d; want 1", got)
	}
	if got := p.Stat("cluster.web.upstream_rq_total"); got != 0 {
		t.Errorf("upstream_rq_total = %d; want 0", got)
	}
}

// TestHostRewrite: a route's host_rewrite_literal or host_rewrite_header picks the host
// resolved and sent.
func TestHostRewrite(t *testing.T) {
	dns := nettest.StartDNS(t)
	dns.Set("real.test.", "real.test. 300 IN A 127.0.0.1")
	port := hostEcho(t)
	for _, tc := range []struct{ name, perRoute, hdr string }{
		{"literal", "host_rewrite_literal: real.test:" + port, ""},
		{"header", "host_rewrite_header: x-target", "real.test:" + port},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startProxy(t, dns, `      typed_per_filter_config:
        envoy.filters.http.dynamic_forward_proxy:
          "@type": type.googleapis.com/envoy.extensions.filters.http.dynamic_forward_proxy.v3.PerRouteConfig
          `+tc.perRoute)
			resp, body := p.Get(p.Client(), "/other", "host", "ignored.test", "x-target", tc.hdr)
			if resp.StatusCode != 200 || body != "host=real.test:"+port {
				t.Fatalf("response = %d %q; want 200 host=real.test:%s", resp.StatusCode, body, port)
			}
		})
	}
}

// TestAbsoluteURI: an HTTP/1.1 request in absolute form (as a client sends to a forward
// proxy) is resolved by its URI's host.
func TestAbsoluteURI(t *testing.T) {
	dns := nettest.StartDNS(t)
	dns.Set("abs.test.", "abs.test. 300 IN A 127.0.0.1")
	port := hostEcho(t)
	p := startProxy(t, dns, "")
	c, err := net.DialTimeout("tcp", p.Addr, filtertest.Wait)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(filtertest.Wait))
	fmt.Fprintf(c, "GET http://abs.test:%s/path HTTP/1.1\r\nHost: abs.test:%s\r\n\r\n", port, port)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(string(body), "host=abs.test:"+port) {
		t.Fatalf("response = %d %q; want 200 from abs.test:%s", resp.StatusCode, body, port)
	}
}

// TestRefusedFields: what Legate does not implement fails the filter's build with its field.
func TestRefusedFields(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"{dns_cache_config: {name: c}, save_upstream_address: true}", "save_upstream_address: not implemented by Legate"},
		{"{dns_cache_config: {name: c}, allow_dynamic_host_from_filter_state: true}", "allow_dynamic_host_from_filter_state: not implemented by Legate"},
		{`{dns_cache_config: {name: c, key_value_config: {config: {name: f, typed_config: {"@type": type.googleapis.com/google.protobuf.Struct, value: {}}}}}}`, "dns_cache_config.key_value_config: not implemented by Legate"},
	} {
		var pb dfpv3.FilterConfig
		filtertest.FromYAML(t, tc.yaml, &pb)
		cfg, err := anypb.New(&pb)
		if err != nil {
			t.Fatal(err)
		}
		_, err = New(cfg, &filter.Context{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%s) = %v; want an error containing %q", tc.yaml, err, tc.want)
		}
	}
}
