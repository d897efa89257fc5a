package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Issue 17 item 1: ORIGINAL_DST clusters create their hosts from the original destination of
// the downstream connection (SO_ORIGINAL_DST after an iptables REDIRECT) or from the
// x-envoy-original-dst-host / x-proxy-original-dst-host header, reuse them while they are
// used and remove them after cleanup_interval.

const (
	// envLegateBin passes the built binary to a test re-run by runInNetns.
	envLegateBin = "LEGATE_E2E_BIN"
	// envInNetns marks the re-run inside the network namespace.
	envInNetns = "LEGATE_E2E_IN_NETNS"
)

// odstCluster is an ORIGINAL_DST cluster named odst with a one-second cleanup interval.
const odstCluster = `
  - name: odst
    connect_timeout: 1s
    type: ORIGINAL_DST
    lb_policy: CLUSTER_PROVIDED
    cleanup_interval: 1s
    original_dst_lb_config: {use_http_header: %v}
`

// odstHTTPListener is an HTTP listener routing everything to odst.
func odstHTTPListener(name string, port int, extra string) string {
	return fmt.Sprintf(`
  - name: %s
    address: {socket_address: {address: 127.0.0.1, port_value: %d}}
%s
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: odst
          route_config:
            virtual_hosts: [{name: all, domains: ["*"], routes: [{match: {prefix: "/"}, route: {cluster: odst}}]}]
          http_filters: [{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
`, name, port, extra)
}

// odstTCPListener is a TCP proxy listener to cluster.
func odstTCPListener(name, addr string, port int, extra, cluster string) string {
	return fmt.Sprintf(`
  - name: %s
    address: {socket_address: {address: %s, port_value: %d}}
%s
    filter_chains:
    - filters:
      - name: envoy.filters.network.tcp_proxy
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
          stat_prefix: %s
          cluster: %s
`, name, addr, port, extra, name, cluster)
}

// namedBackend serves HTTP on 127.0.0.1:port (0 for any) and answers every request with its
// name; it returns the address.
func namedBackend(t *testing.T, port int, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, name)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func httpGet(t *testing.T, client *http.Client, url string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestOriginalDstHeader(t *testing.T) {
	a := namedBackend(t, 0, "backend-a")
	b := namedBackend(t, 0, "backend-b")
	cfg := `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:` + odstHTTPListener("http", 0, "") + `
  clusters:` + fmt.Sprintf(odstCluster, true)
	p := start(t, "-c", writeConfig(t, cfg))
	url := "http://" + p.listenerAddr("http") + "/"
	client := &http.Client{Timeout: 10 * time.Second}

	// No header and no restored destination: no host to send to, as in Envoy.
	if code, body := httpGet(t, client, url, nil); code != http.StatusServiceUnavailable || !strings.Contains(body, "no healthy upstream") {
		t.Errorf("without a destination: %d %q; want 503 no healthy upstream", code, body)
	}
	for _, tc := range []struct{ header, dst, want string }{
		{"X-Envoy-Original-Dst-Host", a, "backend-a"},
		{"X-Proxy-Original-Dst-Host", b, "backend-b"},
		{"X-Envoy-Original-Dst-Host", a, "backend-a"}, // the same host again
	} {
		code, body := httpGet(t, client, url, http.Header{tc.header: {tc.dst}})
		if code != http.StatusOK || body != tc.want {
			t.Errorf("%s: %s = %d %q; want 200 %q", tc.header, tc.dst, code, body, tc.want)
		}
	}
	// Two destinations, two hosts: the third request reused the first one's.
	if v, _ := p.stat("cluster.odst.membership_total"); v != 2 {
		t.Errorf("cluster.odst.membership_total = %d; want 2", v)
	}
	if _, _, body := p.get("/clusters"); !strings.Contains(body, "odst::"+a+"::rq_total::2") {
		t.Errorf("/clusters has no odst::%s::rq_total::2:\n%s", a, body)
	}
	// Unused for a cleanup interval, both hosts go.
	client.CloseIdleConnections()
	p.waitStat("cluster.odst.membership_total", 0)
	if code, body := httpGet(t, client, url, http.Header{"X-Envoy-Original-Dst-Host": {"not-an-address"}}); code != http.StatusServiceUnavailable {
		t.Errorf("invalid destination: %d %q; want 503", code, body)
	}
	if v, _ := p.stat("cluster.odst.original_dst_host_invalid"); v != 1 {
		t.Errorf("cluster.odst.original_dst_host_invalid = %d; want 1", v)
	}
}

// TestOriginalDstHeaderOff: without use_http_header the header is not a destination.
func TestOriginalDstHeaderOff(t *testing.T) {
	a := namedBackend(t, 0, "backend-a")
	cfg := `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:` + odstHTTPListener("http", 0, "") + `
  clusters:` + fmt.Sprintf(odstCluster, false)
	p := start(t, "-c", writeConfig(t, cfg))
	client := &http.Client{Timeout: 10 * time.Second}
	if code, body := httpGet(t, client, "http://"+p.listenerAddr("http")+"/", http.Header{"X-Envoy-Original-Dst-Host": {a}}); code != http.StatusServiceUnavailable {
		t.Errorf("header without use_http_header: %d %q; want 503", code, body)
	}
}

// runInNetns re-runs the calling test inside a new network namespace, where it may change
// iptables without touching the machine's, and reports whether the caller is that re-run.
// The parent passes or fails with the child; it skips, with the reason, when the machine
// cannot make the namespace or has no iptables.
func runInNetns(t *testing.T) bool {
	t.Helper()
	if os.Getenv(envInNetns) != "" {
		return true
	}
	for _, tool := range []string{"unshare", "iptables", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: the redirect test needs unshare, ip and iptables (apt-get install iptables)", tool)
		}
	}
	if out, err := exec.Command("unshare", "--net", "iptables", "-t", "nat", "-L", "OUTPUT").CombinedOutput(); err != nil {
		t.Skipf("cannot use iptables' nat table in a new network namespace (needs root and netfilter): %v\n%s", err, out)
	}
	rerunInNetns(t)
	return false
}

// rerunInNetns runs the calling test again inside a new network namespace, which the caller
// has checked it can make; the caller passes or fails with that run.
func rerunInNetns(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--net", os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envInNetns+"=1", envLegateBin+"="+legateBin)
	out, err := cmd.CombinedOutput()
	t.Logf("in the network namespace:\n%s", out)
	if err != nil {
		t.Fatalf("the test in the network namespace failed: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("the test in the network namespace did not pass")
	}
}

// run runs a command of the namespace's setup.
func mustRun(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// clientPorts are the source ports the test's clients dial from: only connections from them
// are redirected, so Legate's own upstream connections (from ephemeral ports) reach the
// original destinations instead of looping back.
const clientPortLow, clientPortHigh = 20000, 20999

var nextClientPort atomic.Int32

// dialRedirected dials addr from the next client port.
func dialRedirected(t *testing.T, addr string) net.Conn {
	t.Helper()
	port := clientPortLow + int(nextClientPort.Add(1))
	if port > clientPortHigh {
		t.Fatal("out of client ports")
	}
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from port %d: %v", addr, port, err)
	}
	return c
}

// TestOriginalDstRedirect sends real traffic that iptables redirects to Legate's listeners:
// HTTP through the router and raw TCP through the TCP proxy reach the addresses the clients
// dialled, through hosts the ORIGINAL_DST cluster creates, and a use_original_dst listener
// hands a connection to the listener of its original destination.
func TestOriginalDstRedirect(t *testing.T) {
	if !runInNetns(t) {
		return
	}
	// Fixed ports: the namespace is this test's own.
	const (
		httpBackend = 8080 // dialled by the HTTP client, redirected to httpListener
		tcpBackend  = 9000 // dialled by the TCP client, redirected to tcpListener
		virtualPort = 9100 // the address of a bind_to_port: false listener, redirected to tcpListener
		httpListen  = 15001
		tcpListen   = 15002
	)
	mustRun(t, "ip", "link", "set", "lo", "up")
	for _, r := range [][2]int{{httpBackend, httpListen}, {tcpBackend, tcpListen}, {virtualPort, tcpListen}} {
		mustRun(t, "iptables", "-t", "nat", "-A", "OUTPUT", "-p", "tcp", "-d", "127.0.0.1", "--dport", strconv.Itoa(r[0]),
			"--sport", fmt.Sprintf("%d:%d", clientPortLow, clientPortHigh), "-j", "REDIRECT", "--to-ports", strconv.Itoa(r[1]))
	}
	namedBackend(t, httpBackend, "http-backend")
	echo := lineEchoServer(t, tcpBackend)

	cfg := `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:` + odstHTTPListener("http", httpListen, "    listener_filters: [{name: envoy.filters.listener.original_dst}]") +
		odstTCPListener("tcp", "127.0.0.1", tcpListen, "    use_original_dst: true", "odst") +
		odstTCPListener("virtual", "127.0.0.1", virtualPort, "    bind_to_port: false", "echo") + `
  clusters:` + fmt.Sprintf(odstCluster, false) + `
  - name: echo
    connect_timeout: 1s
    load_assignment:
      cluster_name: echo
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: ` + strconv.Itoa(tcpBackend) + `}}}}]}]
`
	p := start(t, "-c", writeConfig(t, cfg))

	// HTTP: two requests on one redirected connection, one host.
	conn := dialRedirected(t, "127.0.0.1:"+strconv.Itoa(httpBackend))
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) { return conn, nil },
	}}
	for i := range 2 {
		code, body := httpGet(t, client, "http://127.0.0.1:"+strconv.Itoa(httpBackend)+"/", nil)
		if code != http.StatusOK || body != "http-backend" {
			t.Fatalf("request %d through the redirect = %d %q; want 200 http-backend", i, code, body)
		}
	}
	client.CloseIdleConnections()

	// TCP: the proxy connects to the original destination, the echo server.
	tc := dialRedirected(t, "127.0.0.1:"+strconv.Itoa(tcpBackend))
	tcpRoundTrip(t, tc, "through the tcp proxy")
	if _, _, body := p.get("/clusters"); !strings.Contains(body, "odst::127.0.0.1:8080::rq_total::2") ||
		!strings.Contains(body, "odst::127.0.0.1:9000::cx_total::1") {
		t.Errorf("/clusters lacks the created hosts 127.0.0.1:8080 (2 requests) and 127.0.0.1:9000 (1 connection):\n%s", body)
	}
	if v, _ := p.stat("cluster.odst.membership_total"); v != 2 {
		t.Errorf("cluster.odst.membership_total = %d; want 2", v)
	}

	// Hand-off: the connection redirected from 127.0.0.1:9100 is served by the listener
	// configured for that address, whose TCP proxy goes to the echo cluster.
	vc := dialRedirected(t, "127.0.0.1:"+strconv.Itoa(virtualPort))
	tcpRoundTrip(t, vc, "handed off")
	vc.Close()
	if v, _ := p.stat("listener.127.0.0.1_9100.downstream_cx_total"); v != 1 {
		t.Errorf("listener.127.0.0.1_9100.downstream_cx_total = %d; want 1 (the handed-off connection)", v)
	}
	if v, _ := p.stat("cluster.echo.upstream_cx_total"); v != 1 {
		t.Errorf("cluster.echo.upstream_cx_total = %d; want 1", v)
	}
	if got := echo.Load(); got != 2 {
		t.Errorf("echo server accepted %d connections; want 2", got)
	}
	// Unused for a cleanup interval, the created hosts go; an open connection stays open.
	p.waitStat("cluster.odst.membership_total", 0)
	tcpRoundTrip(t, tc, "still open after the host's cleanup")
	tc.Close()
}

// lineEchoServer echoes on 127.0.0.1:port and counts the connections it accepts.
func lineEchoServer(t *testing.T, port int) *atomic.Int32 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return &n
}

// tcpRoundTrip writes a line on c and expects it back.
func tcpRoundTrip(t *testing.T, c net.Conn, line string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatal(err)
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || got != line+"\n" {
		t.Fatalf("echo of %q = %q, %v", line, got, err)
	}
}
