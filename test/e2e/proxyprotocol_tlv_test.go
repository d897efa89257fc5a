package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	proxyproto "github.com/pires/go-proxyproto"

	"github.com/legateproxy/legate/internal/nettest"
)

// Issue 20: PROXY protocol TLVs. A load balancer's v2 header carries TLVs; the listener
// filter's rules put one into the connection's dynamic metadata, which the TCP proxy's access
// log prints, and its pass_through_tlvs keep two for upstream. The cluster's
// envoy.transport_sockets.proxy_protocol re-sends a v2 header to the upstream host with the
// downstream client's addresses, an added TLV, then the kept TLVs its own selection passes.
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
	if got.err != nil || got.src != "203.0.113.50:1234" || got.dst != "198.51.100.9:443" || got.tlvs != "f0=added e0=acme " {
		t.Fatalf("upstream PROXY header: %+v; want 203.0.113.50:1234 → 198.51.100.9:443 with f0=added e0=acme", got)
	}
	c.Close()
	line := waitFileLine(t, logPath, "tenant=")
	if want := "tenant=acme region=eu-west from=203.0.113.50:1234"; line != want {
		t.Fatalf("access log line %q; want %q", line, want)
	}
}

// Issue 20: an HTTP connection manager's upstream connections to a cluster with the
// proxy_protocol socket describe their downstream connection, as Envoy's connection manager
// sets the PROXY protocol state: the PROXY header's client and destination, the endpoint's
// PerHostConfig TLV, the socket's added TLV and the passed-through one. The pool is keyed by
// that state, TLVs included with tlv_as_pool_key, so a downstream's requests share its
// upstream connection and downstreams that differ (in address, or only in TLV) never do.
func TestProxyProtocolHTTPPoolKeys(t *testing.T) {
	var conns atomic.Int32
	upPort := tcpServer(t, func(c net.Conn) {
		n := conns.Add(1)
		br := bufio.NewReader(c)
		h, err := proxyproto.Read(br)
		if err != nil {
			return
		}
		desc := fmt.Sprintf("conn%d %s %s", n, h.SourceAddr, h.DestinationAddr)
		tlvs, _ := h.TLVs()
		for _, tlv := range tlvs {
			desc += fmt.Sprintf(" %x=%s", byte(tlv.Type), tlv.Value)
		}
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(desc), desc)
		}
	})
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
        pass_through_tlvs: {match_type: INCLUDE, tlv_type: [0xE0]}
` + httpChainTo("pp", "up") + `  clusters:
  - name: up
    connect_timeout: 1s
    load_assignment:
      cluster_name: up
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: ` + strconv.Itoa(upPort) + `}}}
          metadata:
            typed_filter_metadata:
              envoy.transport_sockets.proxy_protocol: {"@type": type.googleapis.com/envoy.config.core.v3.PerHostConfig, added_tlvs: [{type: 0xF1, value: aG9zdA==}]}
    transport_socket:
      name: envoy.transport_sockets.proxy_protocol
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.proxy_protocol.v3.ProxyProtocolUpstreamTransport
        tlv_as_pool_key: true
        config:
          version: V2
          pass_through_tlvs: {match_type: INCLUDE, tlv_type: [0xE0]}
          added_tlvs: [{type: 0xF0, value: YWRkZWQ=}]
        transport_socket: {name: envoy.transport_sockets.raw_buffer, typed_config: {"@type": type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer}}
`
	p := start(t, "-c", writeConfig(t, cfg))
	dst := &net.TCPAddr{IP: net.ParseIP("198.51.100.9"), Port: 443}
	byConn := map[string]string{} // upstream connection → the downstream it served
	for _, d := range []struct {
		src, tenant string
	}{{"203.0.113.50", "acme"}, {"203.0.113.51", "acme"}, {"203.0.113.50", "globex"}} {
		c, err := net.DialTimeout("tcp", p.listenerAddr("pp"), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		h := proxyproto.HeaderProxyFromAddrs(2, &net.TCPAddr{IP: net.ParseIP(d.src), Port: 1234}, dst)
		if err := h.SetTLVs([]proxyproto.TLV{{Type: 0xE0, Value: []byte(d.tenant)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.WriteTo(c); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		want := d.src + ":1234 198.51.100.9:443 f1=host f0=added e0=" + d.tenant
		for range 2 {
			conn, header, _ := strings.Cut(nettest.Get(t, c, br, "up"), " ")
			if header != want {
				t.Errorf("downstream %s %s: upstream header %q; want %q", d.src, d.tenant, header, want)
			}
			if other, ok := byConn[conn]; ok && other != want {
				t.Errorf("upstream %s carries both %q and %q; want a connection per downstream", conn, other, want)
			}
			byConn[conn] = want
		}
	}
	if got := conns.Load(); got != 3 {
		t.Errorf("upstream connections = %d; want 3, one per downstream", got)
	}
}
