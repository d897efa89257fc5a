package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// The configurations below take the shapes of Envoy's own examples (front proxy, TLS
// termination, route mirroring, locality failover, gRPC, TCP proxy, header manipulation with
// direct responses and redirects, canary by header, retries, configuration from files), each
// written here. Each runs on the binary in front of real upstreams and serves real traffic.

// exampleHCM is an HTTP connection manager filter with the given route_config body (YAML
// indented for its place) and extra connection manager fields.
func exampleHCM(prefix, routes, extra string) string {
	return `
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ` + prefix + `
          codec_type: AUTO` + extra + `
          route_config:
            name: local_route
            virtual_hosts:
` + routes + `
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}`
}

// exampleCluster is a STATIC cluster of the given upstream addresses.
func exampleCluster(name, extra string, addrs ...string) string {
	var eps strings.Builder
	for _, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		fmt.Fprintf(&eps, "\n        - endpoint: {address: {socket_address: {address: %s, port_value: %s}}}", host, port)
	}
	return `
  - name: ` + name + `
    connect_timeout: 0.25s
    type: STATIC
    lb_policy: ROUND_ROBIN` + extra + `
    load_assignment:
      cluster_name: ` + name + `
      endpoints:
      - lb_endpoints:` + eps.String()
}

// exampleBootstrap is a bootstrap with one listener on a free port (named "example") whose
// filter chain is chain, and the clusters.
func exampleBootstrap(chain string, clusters ...string) string {
	return `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:
  - name: example
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - filters:` + chain + `
  clusters:` + strings.Join(clusters, "")
}

// named is an upstream answering "<name> <path>" with the request headers it saw echoed as
// X-Seen-<Name> response headers.
func named(t *testing.T, name string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, vs := range r.Header {
			w.Header()["X-Seen-"+k] = vs
		}
		w.Header().Set("X-Seen-Host", r.Host)
		fmt.Fprintf(w, "%s %s", name, r.URL.Path)
	}))
	t.Cleanup(s.Close)
	return s
}

func addrOf(s *httptest.Server) string { return s.Listener.Addr().String() }

// fetch sends one request and returns its status, headers and body.
func fetch(t *testing.T, c *http.Client, method, url string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: body: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// expectBody fails unless GET url answers status with body.
func expectBody(t *testing.T, c *http.Client, url string, status int, body string) http.Header {
	t.Helper()
	got, h, b := fetch(t, c, http.MethodGet, url)
	if got != status || b != body {
		t.Errorf("GET %s = %d %q; want %d %q", url, got, b, status, body)
	}
	return h
}

// noRedirect is a client that returns redirects instead of following them.
var noRedirect = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func TestExampleFrontProxy(t *testing.T) {
	s1, s2 := named(t, "service 1"), named(t, "service 2")
	routes := `            - name: backend
              domains: ["*"]
              routes:
              - match: {prefix: "/service/1"}
                route: {cluster: service1}
              - match: {prefix: "/service/2"}
                route: {cluster: service2}`
	p := start(t, "-c", writeConfig(t, exampleBootstrap(exampleHCM("ingress_http", routes, ""),
		exampleCluster("service1", "", addrOf(s1)), exampleCluster("service2", "", addrOf(s2)))))
	base := "http://" + p.listenerAddr("example")
	for range 3 {
		expectBody(t, noRedirect, base+"/service/1", 200, "service 1 /service/1")
		expectBody(t, noRedirect, base+"/service/2", 200, "service 2 /service/2")
	}
	if code, _, _ := fetch(t, noRedirect, http.MethodGet, base+"/nowhere"); code != http.StatusNotFound {
		t.Errorf("GET /nowhere = %d; want 404", code)
	}
	if v, _ := p.stat("cluster.service1.upstream_rq_200"); v != 3 {
		t.Errorf("cluster.service1.upstream_rq_200 = %d; want 3", v)
	}
}

func TestExampleTLSTermination(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "example ca"})
	cert := ca.Issue(t, tlstest.Options{CommonName: "proxy", DNSNames: []string{"proxy.example.com"}})
	dir := t.TempDir()
	up := named(t, "plain")
	chain := `
      transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_certificates:
            - certificate_chain: {filename: ` + writePEM(t, dir, "cert.pem", cert.CertPEM) + `}
              private_key: {filename: ` + writePEM(t, dir, "key.pem", cert.KeyPEM) + `}
      filters:` + exampleHCM("https_passthrough", `            - name: all
              domains: ["*"]
              routes:
              - match: {prefix: "/"}
                route: {cluster: plain}`, "")
	cfg := strings.Replace(exampleBootstrap("", exampleCluster("plain", "", addrOf(up))), "    - filters:", "    -"+chain, 1)
	p := start(t, "-c", writeConfig(t, cfg))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "proxy.example.com"},
	}}
	h := expectBody(t, c, "https://"+p.listenerAddr("example")+"/secure", 200, "plain /secure")
	if got := h.Get("X-Seen-X-Forwarded-Proto"); got != "https" {
		t.Errorf("upstream x-forwarded-proto = %q; want https", got)
	}
}

func TestExampleRouteMirroring(t *testing.T) {
	primary := named(t, "service 1")
	mirrored := make(chan string, 4)
	mirror := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mirrored <- r.Host + " " + r.URL.Path
	}))
	t.Cleanup(mirror.Close)
	routes := `            - name: backend
              domains: ["*"]
              routes:
              - match: {prefix: "/service/1"}
                route:
                  cluster: service1
                  request_mirror_policies: [{cluster: service1-mirror}]`
	p := start(t, "-c", writeConfig(t, exampleBootstrap(exampleHCM("ingress_http", routes, ""),
		exampleCluster("service1", "", addrOf(primary)), exampleCluster("service1-mirror", "", addrOf(mirror)))))
	addr := p.listenerAddr("example")
	expectBody(t, noRedirect, "http://"+addr+"/service/1", 200, "service 1 /service/1")
	select {
	case got := <-mirrored:
		host, port, _ := net.SplitHostPort(addr)
		if want := host + "-shadow:" + port + " /service/1"; got != want {
			t.Errorf("mirror saw %q; want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the mirror cluster received nothing")
	}
}

func TestExampleLocalityFailover(t *testing.T) {
	var zoneASick atomic.Bool
	zoneASick.Store(true)
	zoneA := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" && zoneASick.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "zone a")
	}))
	t.Cleanup(zoneA.Close)
	zoneB := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "zone b") }))
	t.Cleanup(zoneB.Close)
	hostPort := func(s *httptest.Server) (string, string) { h, p, _ := net.SplitHostPort(addrOf(s)); return h, p }
	ah, ap := hostPort(zoneA)
	bh, bp := hostPort(zoneB)
	cluster := `
  - name: backend
    connect_timeout: 0.25s
    type: STATIC
    health_checks:
    - timeout: 1s
      interval: 0.1s
      no_traffic_interval: 0.1s # Envoy checks at 60 s until the cluster has had traffic
      unhealthy_threshold: 1
      healthy_threshold: 1
      http_health_check: {path: /healthz}
    load_assignment:
      cluster_name: backend
      endpoints:
      - locality: {region: local, zone: zone-a}
        priority: 0
        lb_endpoints: [{endpoint: {address: {socket_address: {address: ` + ah + `, port_value: ` + ap + `}}}}]
      - locality: {region: local, zone: zone-b}
        priority: 1
        lb_endpoints: [{endpoint: {address: {socket_address: {address: ` + bh + `, port_value: ` + bp + `}}}}]`
	routes := `            - name: backend
              domains: ["*"]
              routes:
              - match: {prefix: "/"}
                route: {cluster: backend}`
	p := start(t, "-c", writeConfig(t, exampleBootstrap(exampleHCM("ingress_http", routes, ""), cluster)))
	url := "http://" + p.listenerAddr("example") + "/"
	// Priority 0 fails its health check: all traffic fails over to priority 1. The checks run
	// every 0.1 s, so by the first look at /stats there may have been several failures.
	p.waitStatAtLeast("cluster.backend.health_check.failure", 1)
	for range 5 {
		expectBody(t, noRedirect, url, 200, "zone b")
	}
	// Once zone a passes again, traffic returns to priority 0.
	zoneASick.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, _, b := fetch(t, noRedirect, http.MethodGet, url); b == "zone a" {
			break
		}
		if time.Now().After(deadline) {
			_, _, clusters := p.get("/clusters")
			t.Fatalf("traffic did not return to zone a within 10 s of it passing its health check; /clusters:\n%s", clusters)
		}
		time.Sleep(20 * time.Millisecond) // the next health check interval
	}
}

func TestExampleGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("kv", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	routes := `            - name: grpc
              domains: ["*"]
              routes:
              - match: {prefix: "/", grpc: {}}
                route: {cluster: grpc_backend}`
	p := start(t, "-c", writeConfig(t, exampleBootstrap(exampleHCM("grpc", routes, ""),
		exampleCluster("grpc_backend", `
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}`, ln.Addr().String()))))
	conn, err := grpc.NewClient(p.listenerAddr("example"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := healthpb.NewHealthClient(conn)
	resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "kv"})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("Check(kv) = %v, %v; want SERVING", resp, err)
	}
	// A gRPC error travels back in the trailers.
	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{Service: "unknown"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("Check(unknown) error = %v; want NotFound", err)
	}
}

func TestExampleTCPProxy(t *testing.T) {
	echo := echoServer(t)
	chain := `
      - name: envoy.filters.network.tcp_proxy
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
          stat_prefix: tcp
          cluster: echo`
	p := start(t, "-c", writeConfig(t, exampleBootstrap(chain, exampleCluster("echo", "", fmt.Sprintf("127.0.0.1:%d", echo)))))
	c, err := net.DialTimeout("tcp", p.listenerAddr("example"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "hello through the proxy\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "hello through the proxy\n" {
		t.Errorf("echo = %q, %v; want the line back", line, err)
	}
}

func TestExampleHeadersDirectResponseRedirect(t *testing.T) {
	up := named(t, "app")
	routes := `            - name: app
              domains: ["*"]
              request_headers_to_add:
              - header: {key: x-hello, value: "from legate"}
              response_headers_to_add:
              - header: {key: x-served-by, value: "%HOSTNAME%"}
              routes:
              - match: {path: "/health"}
                direct_response: {status: 200, body: {inline_string: "ok"}}
              - match: {prefix: "/old"}
                redirect: {path_redirect: "/new", response_code: PERMANENT_REDIRECT}
              - match: {prefix: "/"}
                route: {cluster: app}`
	p := start(t, "-c", writeConfig(t, exampleBootstrap(exampleHCM("edge", routes, ""), exampleCluster("app", "", addrOf(up)))))
	base := "http://" + p.listenerAddr("example")
	h := expectBody(t, noRedirect, base+"/page", 200, "app /page")
	if got := h.Get("X-Seen-X-Hello"); got != "from legate" {
		t.Errorf("upstream x-hello = %q; want %q", got, "from legate")
	}
	if host, _ := os.Hostname(); h.Get("X-Served-By") != host {
		t.Errorf("x-served-by = %q; want the hostname %q", h.Get("X-Served-By"), host)
	}
	expectBody(t, noRedirect, base+"/health", 200, "ok")
	code, h, _ := fetch(t, noRedirect, http.MethodGet, base+"/old/x")
	if code != http.StatusPermanentRedirect || !strings.HasSuffix(h.Get("Location"), "/new") {
		t.Errorf("GET /old/x = %d location %q; want 308 to /new", code, h.Get("Location"))
	}
}

func TestExampleCanaryByHeader(t *testing.T) {
	stable, canary := named(t, "stable"), named(t, "canary")
	routes := `            - name: app
              domains: ["*"]
              routes:
              - match:
                  prefix: "/"
                  headers: [{name: x-canary, string_match: {exact: "true"}}]
                route: {cluster: canary}
              - match: {prefix: "/"}
                route: {cluster: stable}`
	p := start(t, "-c", writeConfig(t, exampleBootstrap(exampleHCM("canary", routes, ""),
		exampleCluster("stable", "", addrOf(stable)), exampleCluster("canary", "", addrOf(canary)))))
	base := "http://" + p.listenerAddr("example")
	expectBody(t, noRedirect, base+"/x", 200, "stable /x")
	if code, _, b := fetch(t, noRedirect, http.MethodGet, base+"/x", "x-canary", "true"); code != 200 || b != "canary /x" {
		t.Errorf("canary request = %d %q; want 200 %q", code, b, "canary /x")
	}
}

func TestExampleRetries(t *testing.T) {
	var calls atomic.Int32
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1)%2 == 1 { // every first attempt fails
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "second try")
	}))
	t.Cleanup(flaky.Close)
	routes := `            - name: app
              domains: ["*"]
              routes:
              - match: {prefix: "/"}
                route:
                  cluster: flaky
                  retry_policy: {retry_on: 5xx, num_retries: 2}`
	p := start(t, "-c", writeConfig(t, exampleBootstrap(exampleHCM("retry", routes, ""), exampleCluster("flaky", "", addrOf(flaky)))))
	expectBody(t, noRedirect, "http://"+p.listenerAddr("example")+"/", 200, "second try")
	if v, _ := p.stat("cluster.flaky.upstream_rq_retry"); v != 1 {
		t.Errorf("cluster.flaky.upstream_rq_retry = %d; want 1", v)
	}
}

func TestExampleDynamicConfigFromFiles(t *testing.T) {
	a, b := named(t, "a"), named(t, "b")
	dir := t.TempDir()
	write := func(name, body string) {
		tmp := filepath.Join(dir, name+".tmp")
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil { // an atomic move, as Envoy expects
			t.Fatal(err)
		}
	}
	cds := func(upstream string) string {
		host, port, _ := net.SplitHostPort(upstream)
		return `resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: example_proxy_cluster
  connect_timeout: 1s
  type: STATIC
  load_assignment:
    cluster_name: example_proxy_cluster
    endpoints:
    - lb_endpoints:
      - endpoint: {address: {socket_address: {address: ` + host + `, port_value: ` + port + `}}}
`
	}
	write("cds.yaml", cds(addrOf(a)))
	write("lds.yaml", `resources:
- "@type": type.googleapis.com/envoy.config.listener.v3.Listener
  name: listener_0
  address: {socket_address: {address: 127.0.0.1, port_value: 0}}
  filter_chains:
  - filters:`+strings.ReplaceAll(exampleHCM("http", `            - name: all
              domains: ["*"]
              routes:
              - match: {prefix: "/"}
                route: {cluster: example_proxy_cluster}`, ""), "\n      ", "\n    ")+"\n")
	cfg := `
node: {id: id_1, cluster: test}
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
dynamic_resources:
  cds_config: {resource_api_version: V3, path_config_source: {path: ` + filepath.Join(dir, "cds.yaml") + `}}
  lds_config: {resource_api_version: V3, path_config_source: {path: ` + filepath.Join(dir, "lds.yaml") + `}}
`
	p := start(t, "-c", writeConfig(t, cfg))
	url := "http://" + p.listenerAddr("listener_0") + "/"
	expectBody(t, noRedirect, url, 200, "a /")
	write("cds.yaml", cds(addrOf(b)))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, _, body := fetch(t, noRedirect, http.MethodGet, url); body == "b /" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("traffic did not move to the new cluster address within 10 s of cds.yaml changing")
		}
		time.Sleep(20 * time.Millisecond) // the file watch's next event
	}
}
