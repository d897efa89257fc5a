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

// Issue 20: PROXY protocol TLVs. A load balancer's v2 header carries TLVs; the listener
// filter's rules put one into the connection's dynamic metadata, which the TCP proxy's access
// log prints, and its pass_through_tlvs keep two for upstream. The cluster's
// envoy.transport_sockets.proxy_protocol re-sends a v2 header to the upstream host with the
// downstream client's addresses, the kept TLVs its own selection passes, and an added one.
func TestProxyProtocolTLVPassThrough(t *testing.T) {
	type seen struct {
		src, dst string
		tlvs     string
		err      error
	}
	headers := make(chan seen, 1)
	upPort := tcpServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		h, err := proxyproto.Read(br)
		if err != nil {
			headers <- seen{err: err}
			return
		}
		tlvs, err := h.TLVs()
		var b strings.Builder
		for _, tlv := range tlvs {
			fmt.Fprintf(&b, "%x=%s ", byte(tlv.Type), tlv.Value)
		}
		headers <- seen{src: h.SourceAddr.String(), dst: h.DestinationAddr.String(), tlvs: b.String(), err: err}
		io.Copy(c, br) // then echo
	})
	logPath := filepath.Join(t.TempDir(), "tcp.log")
	cfg := `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:
  - name: pp
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    listener_filters:
    - name: envoy.filters.listener.proxy_protocol
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol
        rules:
        - {tlv_type: 0xE0, on_tlv_present: {key: tenant, metadata_namespace: lb}}
        - {tlv_type: 0xE1, on_tlv_present: {key: region}}
        pass_through_tlvs: {match_type: INCLUDE, tlv_type: [0xE0, 0xE1]}
    filter_chains:
    - filters:
      - name: envoy.filters.network.tcp_proxy
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
          stat_prefix: pp
          cluster: up
          access_log:
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: ` + logPath + `
              log_format: {text_format: "tenant=%DYNAMIC_METADATA(lb:tenant)% region=%DYNAMIC_METADATA(envoy.filters.listener.proxy_protocol:region)% from=%DOWNSTREAM_REMOTE_ADDRESS%\n"}
  clusters:
  - name: up
    connect_timeout: 1s
    load_assignment: {cluster_name: up, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: ` + strconv.Itoa(upPort) + `}}}}]}]}
    transport_socket:
      name: envoy.transport_sockets.proxy_protocol
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.proxy_protocol.v3.ProxyProtocolUpstreamTransport
        config:
          version: V2
          pass_through_tlvs: {match_type: INCLUDE, tlv_type: [0xE0]}
          added_tlvs: [{type: 0xF0, value: YWRkZWQ=}]
        transport_socket: {name: envoy.transport_sockets.raw_buffer, typed_config: {"@type": type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer}}
`
	p := start(t, "-c", writeConfig(t, cfg))

	c, err := net.DialTimeout("tcp", p.listenerAddr("pp"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	src := &net.TCPAddr{IP: net.ParseIP("203.0.113.50"), Port: 1234}
	dst := &net.TCPAddr{IP: net.ParseIP("198.51.100.9"), Port: 443}
	h := proxyproto.HeaderProxyFromAddrs(2, src, dst)
	if err := h.SetTLVs([]proxyproto.TLV{{Type: 0xE0, Value: []byte("acme")}, {Type: 0xE1, Value: []byte("eu-west")}, {Type: 0xE2, Value: []byte("dropped")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.WriteTo(c); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		t.Fatal(err)
	}
	if echoed, err := bufio.NewReader(c).ReadString('\n'); err != nil || echoed != "ping\n" {
		t.Fatalf("echo through the PROXY listener = %q, %v", echoed, err)
	}
	var got seen
	select {
	case got = <-headers:
	case <-time.After(20 * time.Second):
		t.Fatal("the upstream read no PROXY header")
	}
	if got.err != nil || got.src != "203.0.113.50:1234" || got.dst != "198.51.100.9:443" || got.tlvs != "e0=acme f0=added " {
		t.Fatalf("upstream PROXY header: %+v; want 203.0.113.50:1234 → 198.51.100.9:443 with e0=acme f0=added", got)
	}
	c.Close()
	line := waitFileLine(t, logPath, "tenant=")
	if want := "tenant=acme region=eu-west from=203.0.113.50:1234"; line != want {
		t.Fatalf("access log line %q; want %q", line, want)
	}
}
