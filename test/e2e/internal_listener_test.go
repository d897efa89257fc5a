package e2e

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Issue 20: internal listeners. A cluster whose endpoint is an envoy_internal_address reaches
// a listener with internal_listener in memory, through the internal_upstream transport
// socket; the bootstrap enables them with envoy.bootstrap.internal_listener, as every Istio
// bootstrap does. HTTP and TCP chains of two listeners each carry traffic, bodies larger than
// the internal buffers included.
func TestInternalListenerChains(t *testing.T) {
	backendPort := httpBackend(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		io.WriteString(w, "backend got "+strconv.FormatInt(n, 10)+" bytes via "+r.Header.Get("X-Hop"))
	})
	echoPort := echoServer(t)

	hcm := func(prefix, cluster, extra string) string {
		return `
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ` + prefix + `
          route_config:
            virtual_hosts: [{name: all, domains: ["*"], routes: [{match: {prefix: "/"}, route: {cluster: ` + cluster + `}}]` + extra + `}]
          http_filters: [{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]`
	}
	tcp := func(prefix, cluster string) string {
		return `
    filter_chains:
    - filters:
      - name: envoy.filters.network.tcp_proxy
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: ` + prefix + `, cluster: ` + cluster + `}`
	}
	internalCluster := func(name, listener string) string {
		return `
  - name: ` + name + `
    connect_timeout: 1s
    load_assignment: {cluster_name: ` + name + `, endpoints: [{lb_endpoints: [{endpoint: {address: {envoy_internal_address: {server_listener_name: ` + listener + `, endpoint_id: ep1}}}}]}]}
    transport_socket:
      name: envoy.transport_sockets.internal_upstream
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.internal_upstream.v3.InternalUpstreamTransport
        transport_socket: {name: envoy.transport_sockets.raw_buffer, typed_config: {"@type": type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer}}`
	}
	socketCluster := func(name string, port int) string {
		return `
  - name: ` + name + `
    connect_timeout: 1s
    load_assignment: {cluster_name: ` + name + `, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: ` + strconv.Itoa(port) + `}}}}]}]}`
	}
	cfg := `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
bootstrap_extensions:
- name: envoy.bootstrap.internal_listener
  typed_config: {"@type": type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener, buffer_size_kb: 4}
static_resources:
  listeners:
  - name: front
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}` + hcm("front", "to_inner", "") + `
  - name: inner_http
    stat_prefix: inner_http
    internal_listener: {}` + hcm("inner", "backend", `, request_headers_to_add: [{header: {key: x-hop, value: inner_http}}]`) + `
  - name: tcp_front
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}` + tcp("tcp_front", "to_inner_tcp") + `
  - name: inner_tcp
    stat_prefix: inner_tcp
    internal_listener: {}` + tcp("inner_tcp", "echo") + `
  clusters:` + internalCluster("to_inner", "inner_http") + internalCluster("to_inner_tcp", "inner_tcp") +
		socketCluster("backend", backendPort) + socketCluster("echo", echoPort) + "\n"
	p := start(t, "-c", writeConfig(t, cfg))

	client := &http.Client{Timeout: 10 * time.Second}
	url := "http://" + p.listenerAddr("front") + "/"
	code, body := httpGet(t, client, url, nil)
	if code != http.StatusOK || body != "backend got 0 bytes via inner_http" {
		t.Fatalf("GET through front → inner_http = %d %q", code, body)
	}
	// A body 64 times the internal buffer crosses it with flow control.
	big := bytes.Repeat([]byte("b"), 256<<10)
	resp, err := client.Post(url, "application/octet-stream", bytes.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "backend got 262144 bytes via inner_http"; resp.StatusCode != http.StatusOK || string(got) != want {
		t.Fatalf("POST of 256 KiB = %d %q; want %q", resp.StatusCode, got, want)
	}

	c, err := net.DialTimeout("tcp", p.listenerAddr("tcp_front"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	line := strings.Repeat("t", 100<<10) + "\n"
	go io.WriteString(c, line)
	if echoed, err := bufio.NewReaderSize(c, 1<<20).ReadString('\n'); err != nil || echoed != line {
		t.Fatalf("TCP echo through tcp_front → inner_tcp: %d bytes, %v; want %d", len(echoed), err, len(line))
	}
	p.waitStatAtLeast("listener.inner_http.downstream_cx_total", 1)
	p.waitStat("listener.inner_tcp.downstream_cx_total", 1)
	p.waitStat("cluster.to_inner_tcp.upstream_cx_total", 1)
}
