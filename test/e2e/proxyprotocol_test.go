package e2e

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	proxyproto "github.com/pires/go-proxyproto"
)

// Issue 20: the PROXY protocol listener filter. A load balancer's PROXY header makes its
// client the downstream remote address everywhere: x-forwarded-for with use_remote_address,
// the HTTP and TCP access logs (the socket's peer stays %DOWNSTREAM_DIRECT_REMOTE_ADDRESS%).

// proxyDialer dials addr and writes a PROXY header of version v for src → dst first.
func proxyDialer(t *testing.T, v byte, src, dst string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	s, err := net.ResolveTCPAddr("tcp", src)
	if err != nil {
		t.Fatal(err)
	}
	d, err := net.ResolveTCPAddr("tcp", dst)
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if _, err := proxyproto.HeaderProxyFromAddrs(v, s, d).WriteTo(c); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
}

// waitFileLine waits until the file at path has a line starting with prefix and returns it.
func waitFileLine(t *testing.T, path, prefix string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has no line starting %q after 30s:\n%s", path, prefix, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// httpBackend serves h on a port of 127.0.0.1 for the test's life and returns the port.
func httpBackend(t *testing.T, h http.HandlerFunc) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

func TestProxyProtocol(t *testing.T) {
	backendPort := httpBackend(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("X-Forwarded-For"))
	})
	echoPort := echoServer(t)
	dir := t.TempDir()
	httpLog, tcpLog := filepath.Join(dir, "http.log"), filepath.Join(dir, "tcp.log")
	const fields = `%DOWNSTREAM_REMOTE_ADDRESS% %DOWNSTREAM_DIRECT_REMOTE_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS%\n`
	cfg := `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:
  - name: http
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    listener_filters:
    - name: envoy.filters.listener.proxy_protocol
      typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: pp
          use_remote_address: true
          route_config:
            virtual_hosts: [{name: all, domains: ["*"], routes: [{match: {prefix: "/"}, route: {cluster: backend}}]}]
          http_filters: [{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
          access_log:
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: ` + httpLog + `
              log_format: {text_format: "` + fields + `"}
  - name: tcp
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    listener_filters:
    - name: envoy.filters.listener.proxy_protocol
      typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol, stat_prefix: tcp}
    filter_chains:
    - filters:
      - name: envoy.filters.network.tcp_proxy
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
          stat_prefix: tcp
          cluster: echo
          access_log:
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: ` + tcpLog + `
              log_format: {text_format: "` + fields + `"}
  clusters:
  - name: backend
    connect_timeout: 1s
    load_assignment: {cluster_name: backend, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: ` + strconv.Itoa(backendPort) + `}}}}]}]}
  - name: echo
    connect_timeout: 1s
    load_assignment: {cluster_name: echo, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: ` + strconv.Itoa(echoPort) + `}}}}]}]}
`
	p := start(t, "-c", writeConfig(t, cfg))

	// HTTP over a PROXY v2 connection: the header's source is the client x-forwarded-for
	// names and the access log's remote address.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext:       proxyDialer(t, 2, "203.0.113.50:1234", "198.51.100.9:80"),
		DisableKeepAlives: true,
	}}
	code, body := httpGet(t, client, "http://"+p.listenerAddr("http")+"/", nil)
	if code != http.StatusOK || body != "203.0.113.50" {
		t.Fatalf("GET through the PROXY v2 connection = %d %q; want 200 and x-forwarded-for 203.0.113.50", code, body)
	}
	line := waitFileLine(t, httpLog, "203.0.113.50:1234 ")
	if f := strings.Fields(line); len(f) != 3 || !strings.HasPrefix(f[1], "127.0.0.1:") || f[2] != "198.51.100.9:80" {
		t.Errorf("HTTP access log line %q; want the PROXY source, the socket peer and the PROXY destination", line)
	}
	p.waitStat("proxy_proto.versions.v2.found", 1)

	// A TCP proxy connection with a v1 header: the echo works and the log has the header's
	// addresses.
	c, err := proxyDialer(t, 1, "203.0.113.51:4321", "198.51.100.10:443")(context.Background(), "tcp", p.listenerAddr("tcp"))
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "ping\n")
	if got, err := bufio.NewReader(c).ReadString('\n'); err != nil || got != "ping\n" {
		t.Fatalf("echo through the TCP proxy = %q, %v", got, err)
	}
	c.Close()
	line = waitFileLine(t, tcpLog, "203.0.113.51:4321 ")
	if f := strings.Fields(line); len(f) != 3 || !strings.HasPrefix(f[1], "127.0.0.1:") || f[2] != "198.51.100.10:443" {
		t.Errorf("TCP access log line %q; want the PROXY source, the socket peer and the PROXY destination", line)
	}
	p.waitStat("proxy_proto.tcp.versions.v1.found", 1)

	// A client without a header is refused and counted.
	raw, err := net.Dial("tcp", p.listenerAddr("http"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	io.WriteString(raw, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, _ := io.Copy(io.Discard, raw); n != 0 {
		t.Errorf("a connection without a PROXY header got %d bytes of answer; want it closed", n)
	}
	p.waitStat("proxy_proto.not_found_disallowed", 1)
}
