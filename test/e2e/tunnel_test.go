package e2e

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"testing"
	"time"
)

// tunnelTerminatorConfig is a connection manager terminating tunnels, as Envoy's
// "terminating" example: a CONNECT (HTTP/1.1 or HTTP/2) and a POST to /tcp are answered 200
// and carried to the echo cluster.
const tunnelTerminatorConfig = `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:
  - name: terminate
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: terminate
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
          route_config:
            virtual_hosts:
            - name: tunnels
              domains: ["*"]
              routes:
              - match: {connect_matcher: {}}
                route: {cluster: echo, upgrade_configs: [{upgrade_type: CONNECT, connect_config: {}}]}
              - match: {path: /tcp}
                route: {cluster: echo, upgrade_configs: [{upgrade_type: CONNECT, connect_config: {allow_post: true}}]}
  clusters:
  - name: echo
    connect_timeout: 1s
    load_assignment:
      cluster_name: echo
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %d}}}}]}]
`

// tunnelOriginatorConfig has one tcp_proxy listener per way of tunnelling to the terminator
// at port %[1]d.
const tunnelOriginatorConfig = `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:
  - name: h1_connect
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains: [{filters: [{name: envoy.filters.network.tcp_proxy, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy,
      stat_prefix: h1_connect, cluster: terminator_h1, tunneling_config: {hostname: "echo.internal:%%DOWNSTREAM_LOCAL_PORT%%"}}}]}]
  - name: h2_connect
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains: [{filters: [{name: envoy.filters.network.tcp_proxy, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy,
      stat_prefix: h2_connect, cluster: terminator_h2, tunneling_config: {hostname: "echo.internal:443"}}}]}]
  - name: h2_post
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains: [{filters: [{name: envoy.filters.network.tcp_proxy, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy,
      stat_prefix: h2_post, cluster: terminator_h2, tunneling_config: {hostname: "echo.internal", use_post: true, post_path: /tcp}}}]}]
  clusters:
  - name: terminator_h1
    connect_timeout: 1s
    load_assignment:
      cluster_name: terminator_h1
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %[1]d}}}}]}]
  - name: terminator_h2
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}
    load_assignment:
      cluster_name: terminator_h2
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %[1]d}}}}]}]
`

// TestTCPTunnelBetweenLegates runs two Legates: the first carries TCP connections in
// tunnels (tcp_proxy tunneling_config: HTTP/1.1 CONNECT, HTTP/2 CONNECT, HTTP/2 POST) to the
// second, which terminates them (connect_matcher and allow_post routes) to a TCP echo.
func TestTCPTunnelBetweenLegates(t *testing.T) {
	term := start(t, "-c", writeConfig(t, fmt.Sprintf(tunnelTerminatorConfig, echoServer(t))))
	_, port, err := net.SplitHostPort(term.listenerAddr("terminate"))
	if err != nil {
		t.Fatal(err)
	}
	termPort, _ := strconv.Atoi(port)
	orig := start(t, "-c", writeConfig(t, fmt.Sprintf(tunnelOriginatorConfig, termPort)))
	for _, name := range []string{"h1_connect", "h2_connect", "h2_post"} {
		t.Run(name, func(t *testing.T) {
			c, err := net.DialTimeout("tcp", orig.listenerAddr(name), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			msg := "bytes through " + name
			io.WriteString(c, msg)
			c.(*net.TCPConn).CloseWrite()
			got, err := io.ReadAll(c)
			if err != nil || string(got) != msg {
				t.Fatalf("echo through the tunnel = %q (%v); want %q", got, err, msg)
			}
		})
	}
	for p, want := range map[*proc]map[string]uint64{
		orig: {"cluster.terminator_h1.upstream_rq_total": 1, "cluster.terminator_h2.upstream_rq_total": 2, "tcp.h2_post.downstream_cx_total": 1},
		term: {"cluster.echo.upstream_cx_total": 3},
	} {
		for name, n := range want {
			if got, _ := p.stat(name); got != n {
				t.Errorf("%s = %d; want %d", name, got, n)
			}
		}
	}
}
