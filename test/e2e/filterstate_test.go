package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	proxyproto "github.com/pires/go-proxyproto"
)

// Issue 20: filter state across an internal listener chain. A client sends a PROXY v2 header
// with a TLV; the front listener's proxy_protocol filter (tlv_location FILTER_STATE) puts it
// in the connection's filter state, and set_filter_state derives from it an object shared
// with upstream connections (TRANSITIVE) and one that is not shared. The front TCP proxy's
// access log prints the TLV and the objects; the internal listener the front connects to
// through an internal_upstream socket inherits only the shared object, which its own TCP
// proxy's access log prints.
func TestFilterStateThroughInternalListener(t *testing.T) {
	echoPort := echoServer(t)
	dir := t.TempDir()
	frontLog, innerLog := filepath.Join(dir, "front.log"), filepath.Join(dir, "inner.log")
	format := "front tlv=%FILTER_STATE(envoy.network.proxy_protocol.tlv:FIELD:tenant)% tenant=%FILTER_STATE(acme.tenant:PLAIN)% private=%FILTER_STATE(acme.private)%\n"
	innerFormat := "inner tenant=%FILTER_STATE(acme.tenant:PLAIN)% typed=%FILTER_STATE(acme.tenant)% private=%FILTER_STATE(acme.private)% tlv=%FILTER_STATE(envoy.network.proxy_protocol.tlv)%\n"
	cfg := `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
bootstrap_extensions:
- name: envoy.bootstrap.internal_listener
  typed_config: {"@type": type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener}
static_resources:
  listeners:
  - name: front
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    listener_filters:
    - name: envoy.filters.listener.proxy_protocol
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol
        tlv_location: FILTER_STATE
        rules: [{tlv_type: 0xE0, on_tlv_present: {key: tenant}}]
    filter_chains:
    - filters:
      - name: envoy.filters.network.set_filter_state
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.set_filter_state.v3.Config
          on_new_connection:
          - object_key: acme.tenant
            factory_key: envoy.string
            shared_with_upstream: TRANSITIVE
            format_string: {text_format_source: {inline_string: "t-%FILTER_STATE(envoy.network.proxy_protocol.tlv:FIELD:tenant)%"}}
          - object_key: acme.private
            factory_key: envoy.string
            format_string: {text_format_source: {inline_string: "mine"}}
      - ` + loggedTCPProxy("front", "to_inner", frontLog, format) + `
  - name: inner
    internal_listener: {}
    filter_chains:
    - filters:
      - ` + loggedTCPProxy("inner", "echo", innerLog, innerFormat) + `
  clusters:
  - name: to_inner
    connect_timeout: 1s
    load_assignment:
      cluster_name: to_inner
      endpoints: [{lb_endpoints: [{endpoint: {address: {envoy_internal_address: {server_listener_name: inner, endpoint_id: ep1}}}}]}]
    transport_socket:
      name: envoy.transport_sockets.internal_upstream
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.internal_upstream.v3.InternalUpstreamTransport
        transport_socket: {name: envoy.transport_sockets.raw_buffer, typed_config: {"@type": type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer}}
  - name: echo
    connect_timeout: 1s
    load_assignment: {cluster_name: echo, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: ` + strconv.Itoa(echoPort) + `}}}}]}]}
`
	p := start(t, "-c", writeConfig(t, cfg))
	pre := proxyV2(t, "203.0.113.7:4000", "198.51.100.1:443", proxyproto.TLV{Type: 0xE0, Value: []byte("acme")})
	echoLine(t, p.listenerAddr("front"), pre, "hello\n")
	if got, want := waitFileLine(t, frontLog, "front "), "front tlv=acme tenant=t-acme private=\"mine\""; got != want {
		t.Errorf("front access log %q; want %q", got, want)
	}
	if got, want := waitFileLine(t, innerLog, "inner "), "inner tenant=t-acme typed=\"t-acme\" private=- tlv=-"; got != want {
		t.Errorf("inner listener's access log %q; want %q", got, want)
	}
}

// loggedTCPProxy is a tcp_proxy network filter, in flow YAML, proxying to cluster with a file
// access log at path in format.
func loggedTCPProxy(stat, cluster, path, format string) string {
	return fmt.Sprintf(`{name: envoy.filters.network.tcp_proxy, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: %s, cluster: %s,
          access_log: [{name: envoy.access_loggers.file, typed_config: {"@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog, path: %q, log_format: {text_format: %q}}}]}}`, stat, cluster, path, format)
}

// proxyV2 is a PROXY protocol v2 header (go-proxyproto's) from src to dst with tlvs.
func proxyV2(t *testing.T, src, dst string, tlvs ...proxyproto.TLV) []byte {
	t.Helper()
	s, _ := net.ResolveTCPAddr("tcp", src)
	d, _ := net.ResolveTCPAddr("tcp", dst)
	h := proxyproto.HeaderProxyFromAddrs(2, s, d)
	if err := h.SetTLVs(tlvs); err != nil {
		t.Fatal(err)
	}
	b, err := h.Format()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// echoLine connects to addr, writes pre then line, reads line back from an echo behind the
// proxy and closes the connection.
func echoLine(t *testing.T, addr string, pre []byte, line string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write(append(pre, line...)); err != nil {
		t.Fatal(err)
	}
	if echoed, err := bufio.NewReader(c).ReadString('\n'); err != nil || echoed != line {
		t.Fatalf("echo through %s = %q, %v; want %q", addr, echoed, err, line)
	}
}

// Issue 20: a transport_socket_matcher over filter state. The cluster's matcher reads the
// envoy.matching.inputs.transport_socket_filter_state input: a connection whose downstream
// shares acme.socket = "pp" (set_filter_state on the "marked" listener) goes out through the
// matched socket, a PROXY protocol v1 one, and a connection from the "plain" listener through
// the cluster's raw socket. The upstream answers whether a PROXY header came first.
func TestTransportSocketMatcherByFilterState(t *testing.T) {
	upPort := tcpServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		line, err := br.ReadString('\n')
		header := "no"
		if err == nil && strings.HasPrefix(line, "PROXY TCP4 127.0.0.1 127.0.0.1 ") {
			header = "v1"
			line, err = br.ReadString('\n')
		}
		if err == nil {
			io.WriteString(c, "header="+header+" "+line)
		}
	})
	raw := `{name: envoy.transport_sockets.raw_buffer, typed_config: {"@type": type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer}}`
	tcpProxy := `{name: envoy.filters.network.tcp_proxy, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: s, cluster: up}}`
	cfg := `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:
  - name: marked
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.set_filter_state
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.set_filter_state.v3.Config
          on_new_connection: [{object_key: acme.socket, factory_key: envoy.string, shared_with_upstream: ONCE, format_string: {text_format_source: {inline_string: pp}}}]
      - ` + tcpProxy + `
  - name: plain
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains: [{filters: [` + tcpProxy + `]}]
  clusters:
  - name: up
    connect_timeout: 1s
    load_assignment: {cluster_name: up, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: ` + strconv.Itoa(upPort) + `}}}}]}]}
    transport_socket: ` + raw + `
    transport_socket_matches:
    - name: pp
      match: {}
      transport_socket:
        name: envoy.transport_sockets.proxy_protocol
        typed_config: {"@type": type.googleapis.com/envoy.extensions.transport_sockets.proxy_protocol.v3.ProxyProtocolUpstreamTransport, config: {version: V1}, transport_socket: ` + raw + `}
    transport_socket_matcher:
      matcher_tree:
        input:
          name: envoy.matching.inputs.transport_socket_filter_state
          typed_config: {"@type": type.googleapis.com/envoy.extensions.matching.common_inputs.transport_socket.v3.FilterStateInput, key: acme.socket}
        exact_match_map:
          map:
            pp: {action: {name: ts, typed_config: {"@type": type.googleapis.com/envoy.extensions.matching.common_inputs.transport_socket.v3.TransportSocketNameAction, name: pp}}}
`
	p := start(t, "-c", writeConfig(t, cfg))
	for _, tc := range []struct{ listener, want string }{
		{"marked", "header=v1 hello\n"},
		{"plain", "header=no hello\n"},
		{"marked", "header=v1 hello\n"},
	} {
		c, err := net.DialTimeout("tcp", p.listenerAddr(tc.listener), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		io.WriteString(c, "hello\n")
		got, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil || got != tc.want {
			t.Errorf("through %s: upstream answered %q, %v; want %q", tc.listener, got, err, tc.want)
		}
	}
}
