package e2e

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/legateproxy/legate/internal/nettest"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// Issue 20 item 2: Legate as an egress forward proxy (the dynamic forward proxy filter and
// cluster sharing one DNS cache), resolving names through a DNS server the test runs.

// dfpConfig is a bootstrap with one listener "egress" routing every request (CONNECT too) to
// the dynamic forward proxy cluster, names resolved by the DNS server at dnsPort.
func dfpConfig(dnsPort string) string {
	cache := fmt.Sprintf(`{name: egress, dns_lookup_family: V4_ONLY, dns_query_timeout: 2s,
              typed_dns_resolver_config: {name: envoy.network.dns_resolver.cares, typed_config: {
                "@type": type.googleapis.com/envoy.extensions.network.dns_resolver.cares.v3.CaresDnsResolverConfig,
                resolvers: [{socket_address: {address: 127.0.0.1, port_value: %s}}]}}}`, dnsPort)
	return dfpBootstrap("dns_cache_config: "+cache, "", "dns_cache_config: "+cache)
}

// dfpBootstrap is dfpConfig's bootstrap with the filter's and the cluster's implementation
// (dns_cache_config, or sub_cluster_config and sub_clusters_config) and more cluster fields.
func dfpBootstrap(filterImpl, clusterFields, clusterImpl string) string {
	return `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:
  - name: egress
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: egress
          upgrade_configs: [{upgrade_type: CONNECT}]
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {connect_matcher: {}}
                route: {cluster: dfp, upgrade_configs: [{upgrade_type: CONNECT, connect_config: {}}]}
              - match: {prefix: "/"}
                route: {cluster: dfp}
          http_filters:
          - name: envoy.filters.http.dynamic_forward_proxy
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.dynamic_forward_proxy.v3.FilterConfig
              ` + filterImpl + `
          - name: envoy.filters.http.router
            typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
  clusters:
  - name: dfp
    connect_timeout: 2s
    lb_policy: CLUSTER_PROVIDED
` + clusterFields + `    cluster_type:
      name: envoy.clusters.dynamic_forward_proxy
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.clusters.dynamic_forward_proxy.v3.ClusterConfig
        ` + clusterImpl + `
`
}

func TestDynamicForwardProxy(t *testing.T) {
	dns := nettest.StartDNS(t)
	dns.Set("web.test.", "web.test. 300 IN A 127.0.0.1")
	dns.Set("echo.test.", "echo.test. 300 IN A 127.0.0.1")
	dns.NXDomain("nowhere.test.")
	backend := namedBackend(t, 0, "web")
	_, port, _ := net.SplitHostPort(backend)
	_, dnsPort, _ := net.SplitHostPort(dns.Addr)
	p := start(t, "-c", writeConfig(t, dfpConfig(dnsPort)))
	proxy := p.listenerAddr("egress")

	// A client configured with the proxy sends absolute URIs.
	proxied := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: proxy})}}
	if code, body := httpGet(t, proxied, "http://web.test:"+port+"/a", nil); code != http.StatusOK || body != "web" {
		t.Errorf("absolute URI: %d %q; want 200 web", code, body)
	}
	// A client sent to the proxy directly names the host in Host.
	req, _ := http.NewRequest(http.MethodGet, "http://"+proxy+"/b", nil)
	req.Host = "web.test:" + port
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "web" {
		t.Errorf("Host header: %d %q; want 200 web", resp.StatusCode, body)
	}
	if code, body := httpGet(t, proxied, "http://nowhere.test:"+port+"/", nil); code != http.StatusServiceUnavailable || body != "DNS resolution failure" {
		t.Errorf("unknown name: %d %q; want 503 DNS resolution failure", code, body)
	}
	if n := dns.Queries("web.test"); n != 1 {
		t.Errorf("DNS queries for web.test = %d; want 1", n)
	}

	// CONNECT tunnels to the resolved name.
	echoPort := strconv.Itoa(echoServer(t))
	c, err := net.DialTimeout("tcp", proxy, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "CONNECT echo.test:%s HTTP/1.1\r\nHost: echo.test:%s\r\n\r\n", echoPort, echoPort)
	br := bufio.NewReader(c)
	cresp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || cresp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %v %v; want 200", cresp, err)
	}
	io.WriteString(c, "ping\n")
	if line, err := br.ReadString('\n'); err != nil || line != "ping\n" {
		t.Errorf("through the tunnel: %q %v; want ping", line, err)
	}

	for name, want := range map[string]uint64{
		"dns_cache.egress.dns_query_success": 2, "dns_cache.egress.dns_query_failure": 1,
		"dns_cache.egress.host_added": 3, "dns_cache.egress.num_hosts": 3,
	} {
		if v, _ := p.stat(name); v != want {
			t.Errorf("%s = %d; want %d", name, v, want)
		}
	}
}

// TestDynamicForwardProxyTLS: a dynamic forward proxy cluster with a TLS transport socket
// and no upstream HTTP options gets Envoy's auto_sni and auto_san_validation: the requested
// name is the SNI and must be in the certificate (a name the certificate lacks is refused,
// 503). With allow_insecure_cluster_options and options without them, the transport
// socket's sni is sent and the certificate's names are not checked; without
// allow_insecure_cluster_options such options are refused at load.
func TestDynamicForwardProxyTLS(t *testing.T) {
	dns := nettest.StartDNS(t)
	dns.Set("secure.test.", "secure.test. 300 IN A 127.0.0.1")
	dns.Set("impostor.test.", "impostor.test. 300 IN A 127.0.0.1")
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "e2e dfp ca"})
	caPath := writePEM(t, t.TempDir(), "ca.pem", ca.CertPEM)
	cert := tlsCert(ca.Issue(t, tlstest.Options{CommonName: "secure.test", DNSNames: []string{"secure.test"}}))
	sni := make(chan string, 16)
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "secure")
	}))
	backend.TLS = &tls.Config{GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		select {
		case sni <- hello.ServerName:
		default: // never block a handshake; the requests below each read theirs
		}
		return &cert, nil
	}}
	backend.StartTLS()
	t.Cleanup(backend.Close)
	_, port, _ := net.SplitHostPort(backend.Listener.Addr().String())
	_, dnsPort, _ := net.SplitHostPort(dns.Addr)
	withTLS := func(clusterFields, typedFields, sniField string) string {
		cfg := strings.Replace(dfpConfig(dnsPort), "    lb_policy: CLUSTER_PROVIDED\n",
			"    lb_policy: CLUSTER_PROVIDED\n"+clusterFields+"    transport_socket: {name: envoy.transport_sockets.tls, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"+
				sniField+", common_tls_context: {validation_context: {trusted_ca: {filename: "+caPath+"}}}}}\n", 1)
		return strings.Replace(cfg, "\n        dns_cache_config: ", "\n"+typedFields+"        dns_cache_config: ", 1)
	}
	get := func(p *proc, host string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+p.listenerAddr("egress")+"/", nil)
		req.Host = host + ":" + port
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		name := ""
		select {
		case name = <-sni:
		default:
		}
		return resp.StatusCode, string(body), name
	}

	p := start(t, "-c", writeConfig(t, withTLS("", "", "")))
	if code, body, name := get(p, "secure.test"); code != http.StatusOK || body != "secure" || name != "secure.test" {
		t.Errorf("secure.test: %d %q SNI %q; want 200 secure with SNI secure.test", code, body, name)
	}
	if code, body, name := get(p, "impostor.test"); code != http.StatusServiceUnavailable || name != "impostor.test" {
		t.Errorf("impostor.test (certificate for secure.test): %d %q SNI %q; want 503 after a handshake with SNI impostor.test", code, body, name)
	}
	if v, _ := p.stat("cluster.dfp.ssl.fail_verify_san"); v != 1 {
		t.Errorf("cluster.dfp.ssl.fail_verify_san = %d; want 1", v)
	}

	insecure := withTLS("    upstream_http_protocol_options: {}\n", "        allow_insecure_cluster_options: true\n", ", sni: fixed.test")
	p = start(t, "-c", writeConfig(t, insecure))
	if code, body, name := get(p, "impostor.test"); code != http.StatusOK || body != "secure" || name != "fixed.test" {
		t.Errorf("insecure options, impostor.test: %d %q SNI %q; want 200 secure with the transport socket's SNI fixed.test", code, body, name)
	}

	refused := strings.Replace(insecure, "        allow_insecure_cluster_options: true\n", "", 1)
	code, _, stderr := runOnce(t, "--mode", "validate", "-c", writeConfig(t, refused))
	if want := "needs auto_sni and auto_san_validation true unless cluster_type.typed_config.allow_insecure_cluster_options is set"; code == 0 || !strings.Contains(stderr, want) {
		t.Errorf("validate without allow_insecure_cluster_options: exit %d, stderr %q; want a failure containing %q", code, stderr, want)
	}
}

// TestDynamicForwardProxySubClusters: with sub_clusters_config each name:port requested
// becomes a STRICT_DNS cluster "DFPCluster:<name>:<port>", resolved through the test's DNS
// server and listed by /clusters, through which requests for two names reach their own
// upstreams.
func TestDynamicForwardProxySubClusters(t *testing.T) {
	dns := nettest.StartDNS(t)
	dns.Set("one.test.", "one.test. 300 IN A 127.0.0.1")
	dns.Set("two.test.", "two.test. 300 IN A 127.0.0.1")
	_, portOne, _ := net.SplitHostPort(namedBackend(t, 0, "one"))
	_, portTwo, _ := net.SplitHostPort(namedBackend(t, 0, "two"))
	_, dnsPort, _ := net.SplitHostPort(dns.Addr)
	cfg := dfpBootstrap("sub_cluster_config: {cluster_init_timeout: 10s}",
		"    dns_lookup_family: V4_ONLY\n    dns_resolvers: [{socket_address: {address: 127.0.0.1, port_value: "+dnsPort+"}}]\n",
		"sub_clusters_config: {lb_policy: ROUND_ROBIN}")
	p := start(t, "-c", writeConfig(t, cfg))
	proxied := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: p.listenerAddr("egress")})}}
	for _, r := range []struct{ url, body string }{
		{"http://one.test:" + portOne + "/", "one"}, {"http://two.test:" + portTwo + "/", "two"}, {"http://one.test:" + portOne + "/again", "one"},
	} {
		if code, body := httpGet(t, proxied, r.url, nil); code != http.StatusOK || body != r.body {
			t.Errorf("%s: %d %q; want 200 %q", r.url, code, body, r.body)
		}
	}
	_, _, clusters := p.get("/clusters")
	for _, name := range []string{"DFPCluster:one.test:" + portOne, "DFPCluster:two.test:" + portTwo} {
		if !strings.Contains(clusters, name+"::127.0.0.1:") {
			t.Errorf("/clusters lists no host of %s:\n%s", name, clusters)
		}
	}
	if v, _ := p.stat("cluster.DFPCluster_one.test_" + portOne + ".upstream_rq_total"); v != 2 {
		t.Errorf("cluster.DFPCluster_one.test_%s.upstream_rq_total = %d; want 2", portOne, v)
	}
}
