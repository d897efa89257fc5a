package e2e

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Issue 20: network filters. echo and direct_response terminate a chain; connection_limit
// and local_ratelimit close what exceeds them and count it; sni_cluster sends a TCP proxy
// connection to the cluster its SNI names.

// namedTCPServer answers each connection with its name and a newline, then closes it; it
// returns the port.
func namedTCPServer(t *testing.T, name string) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, name+"\n")
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// clientHello returns the first flight of a TLS client offering sni.
func clientHello(t *testing.T, sni string) []byte {
	t.Helper()
	a, b := net.Pipe()
	go func() {
		tls.Client(a, &tls.Config{ServerName: sni, InsecureSkipVerify: true}).Handshake()
		a.Close()
	}()
	b.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64<<10)
	n, err := b.Read(buf) // net.Pipe delivers the client's one write whole
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	return buf[:n]
}

// dialLine connects to addr, writes send and returns the first line it reads ("" when the
// connection closes first) with the connection.
func dialLine(t *testing.T, addr, send string) (string, net.Conn) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if send != "" {
		io.WriteString(c, send)
	}
	line, _ := bufio.NewReader(c).ReadString('\n')
	return line, c
}

func TestNetworkFilters(t *testing.T) {
	aPort, bPort := namedTCPServer(t, "A"), namedTCPServer(t, "B")
	listener := func(name, filters string) string {
		return `
  - name: ` + name + `
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains: [{filters: [` + filters + `]}]`
	}
	const echo = `{name: envoy.filters.network.echo, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.echo.v3.Echo}}`
	cfg := `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:` +
		listener("echo", echo) +
		listener("direct", `{name: envoy.filters.network.direct_response, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.direct_response.v3.Config, response: {inline_string: "hello from legate\n"}}}`) +
		listener("limited", `{name: envoy.filters.network.connection_limit, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.connection_limit.v3.ConnectionLimit, stat_prefix: cl, max_connections: 1}}, `+echo) +
		listener("rated", `{name: envoy.filters.network.local_ratelimit, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.local_ratelimit.v3.LocalRateLimit, stat_prefix: rl, token_bucket: {max_tokens: 2, fill_interval: 3600s}}}, `+echo) + `
  - name: sni
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    listener_filters: [{name: envoy.filters.listener.tls_inspector, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector}}]
    filter_chains:
    - filters:
      - {name: envoy.filters.network.sni_cluster, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.sni_cluster.v3.SniCluster}}
      - {name: envoy.filters.network.tcp_proxy, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: sni, cluster: b}}
  clusters:
  - name: a.example.com
    connect_timeout: 1s
    load_assignment: {cluster_name: a, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: ` + strconv.Itoa(aPort) + `}}}}]}]}
  - name: b
    connect_timeout: 1s
    load_assignment: {cluster_name: b, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: ` + strconv.Itoa(bPort) + `}}}}]}]}
`
	p := start(t, "-c", writeConfig(t, cfg))

	if line, _ := dialLine(t, p.listenerAddr("echo"), "ping\n"); line != "ping\n" {
		t.Errorf("echo answered %q; want ping", line)
	}
	if line, _ := dialLine(t, p.listenerAddr("direct"), ""); line != "hello from legate\n" {
		t.Errorf("direct_response answered %q", line)
	}

	// connection_limit: the second concurrent connection is closed; once the first closes,
	// a new one is admitted.
	line, first := dialLine(t, p.listenerAddr("limited"), "one\n")
	if line != "one\n" {
		t.Fatalf("the first connection to the limited listener got %q", line)
	}
	if line, _ := dialLine(t, p.listenerAddr("limited"), "two\n"); line != "" {
		t.Errorf("the second concurrent connection got %q; want it closed", line)
	}
	p.waitStat("connection_limit.cl.limited_connections", 1)
	first.Close()
	p.waitStat("connection_limit.cl.active_connections", 0)
	if line, _ := dialLine(t, p.listenerAddr("limited"), "three\n"); line != "three\n" {
		t.Errorf("a connection after the first closed got %q; want it admitted", line)
	}

	// local_ratelimit: two tokens, refilled hourly: the third connection is closed.
	for i, want := range []string{"x\n", "x\n", ""} {
		if line, _ := dialLine(t, p.listenerAddr("rated"), "x\n"); line != want {
			t.Errorf("rate-limited connection %d got %q; want %q", i+1, line, want)
		}
	}
	p.waitStat("local_rate_limit.rl.rate_limited", 1)

	// sni_cluster: SNI a.example.com reaches cluster a.example.com; without SNI the TCP
	// proxy's own cluster b.
	if line, _ := dialLine(t, p.listenerAddr("sni"), string(clientHello(t, "a.example.com"))); line != "A\n" {
		t.Errorf("SNI a.example.com reached %q; want cluster a.example.com (A)", line)
	}
	if line, _ := dialLine(t, p.listenerAddr("sni"), "plain\n"); strings.TrimSpace(line) != "B" {
		t.Errorf("a connection without SNI reached %q; want the configured cluster b (B)", line)
	}
}
