package e2e

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// echoServer accepts connections on 127.0.0.1 and echoes each line.
func echoServer(t *testing.T) int {
	return tcpServer(t, func(c net.Conn) { io.Copy(c, c) })
}

// tcpServer accepts connections on 127.0.0.1 until the test ends, serving each with handle
// on its own goroutine (the connection is closed when handle returns), and returns the port.
func tcpServer(t *testing.T, handle func(net.Conn)) int {
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
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// listenerAddr returns the address /listeners reports for a listener.
func (p *proc) listenerAddr(name string) string {
	p.t.Helper()
	_, _, body := p.get("/listeners")
	for _, l := range lines(body) {
		if addr, ok := strings.CutPrefix(l, name+"::"); ok {
			return addr
		}
	}
	p.t.Fatalf("listener %q not in /listeners:\n%s", name, body)
	return ""
}

func TestTCPProxy(t *testing.T) {
	port := echoServer(t)
	cfg := `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:
  - name: tcp
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.tcp_proxy
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
          stat_prefix: echo
          cluster: echo
  clusters:
  - name: echo
    connect_timeout: 1s
    load_assignment:
      cluster_name: echo
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: ` + strconv.Itoa(port) + `}}}}]}]
`
	p := start(t, "-c", writeConfig(t, cfg))
	conn, err := net.DialTimeout("tcp", p.listenerAddr("tcp"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	for _, msg := range []string{"hello\n", "through legate\n"} {
		io.WriteString(conn, msg)
		got, err := r.ReadString('\n')
		if err != nil || got != msg {
			t.Fatalf("echo = %q, %v; want %q", got, err, msg)
		}
	}
	conn.Close()
	if _, _, body := p.get("/stats?filter=^tcp.echo.downstream_cx_total$"); body != "tcp.echo.downstream_cx_total: 1\n" {
		t.Errorf("tcp.echo.downstream_cx_total = %q", body)
	}
	if _, _, body := p.get("/clusters"); !strings.Contains(body, "::cx_total::1\n") {
		t.Errorf("/clusters does not count the upstream connection:\n%s", body)
	}
}
