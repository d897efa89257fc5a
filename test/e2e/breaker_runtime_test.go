package e2e

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// Issue 17 item 9: the runtime keys circuit_breakers.<cluster>.<priority>.max_* override a
// cluster's thresholds, and /runtime_modify changes apply to the next connection.
func TestCircuitBreakerRuntimeKeys(t *testing.T) {
	port := echoServer(t)
	cfg := `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
layered_runtime:
  layers:
  - name: static
    static_layer: {circuit_breakers: {echo: {default: {max_connections: 1}}}}
  - {name: admin, admin_layer: {}}
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
    circuit_breakers: {thresholds: [{max_connections: 100}]}
    load_assignment:
      cluster_name: echo
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: ` + strconv.Itoa(port) + `}}}}]}]
`
	p := start(t, "-c", writeConfig(t, cfg))
	addr := p.listenerAddr("tcp")
	dial := func() net.Conn {
		t.Helper()
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	first := dial()
	tcpRoundTrip(t, first, "first")

	// The static layer's max_connections: 1 is the limit, not the configured 100.
	second := dial()
	second.SetDeadline(time.Now().Add(10 * time.Second))
	if n, err := second.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("second connection over max_connections 1: read %d, %v; want EOF (closed on overflow)", n, err)
	}
	if v, _ := p.stat("cluster.echo.upstream_cx_overflow"); v != 1 {
		t.Errorf("cluster.echo.upstream_cx_overflow = %d; want 1", v)
	}

	if code, _, body := p.post("/runtime_modify?circuit_breakers.echo.default.max_connections=2"); code != http.StatusOK {
		t.Fatalf("POST /runtime_modify = %d %s", code, body)
	}
	third := dial()
	tcpRoundTrip(t, third, "third, under the raised limit")
	if v, _ := p.stat("cluster.echo.upstream_cx_overflow"); v != 1 {
		t.Errorf("cluster.echo.upstream_cx_overflow after raising the limit = %d; want still 1", v)
	}
}
