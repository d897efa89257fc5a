package listener

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	proxyproto "github.com/pires/go-proxyproto"

	"github.com/legateproxy/legate/accesslog"
)

// addrServices serve "test.addrs": it writes the connection's filter chain, remote,
// local and direct remote addresses, whether the local address is restored, then echoes
// what the client sends.
func addrServices() Services {
	return serving("test.addrs", func(*ChainContext, any) (FilterChainHandler, error) {
		return HandlerFunc(func(c *Conn) {
			defer c.Close()
			fmt.Fprintf(c, "%s %s %s %s %t\n", c.FilterChainName(), c.RemoteAddr(), c.LocalAddr(), c.DirectRemoteAddr(), c.LocalAddressRestored())
			io.Copy(c, c)
		}), nil
	})
}

// proxyListener is a listener with the PROXY protocol filter configured by pp (YAML fields
// after the type, may be empty), a chain "proxied" for sources in 203.0.113.0/24 and a default chain "other".
func proxyListener(name, pp string) string {
	return fmt.Sprintf(`{name: %[1]s, stat_prefix: %[1]s, address: {socket_address: {address: 127.0.0.1, port_value: 0}},
listener_filters: [{name: envoy.filters.listener.proxy_protocol, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol %[2]s}}],
filter_chains: [{name: proxied, filter_chain_match: {source_prefix_ranges: [{address_prefix: 203.0.113.0, prefix_len: 24}]}, filters: [{name: test.addrs}]}],
default_filter_chain: {name: other, filters: [{name: test.addrs}]}}`, name, pp)
}

// dialWith connects to addr, writes pre (a PROXY header, maybe in pieces) and then payload,
// and returns the first line the listener's handler answers ("" if it closed) with the
// connection.
func dialWith(t testing.TB, addr string, pre [][]byte, payload string) (string, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(wait))
	for _, p := range pre {
		if _, err := c.Write(p); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	if payload != "" {
		if _, err := io.WriteString(c, payload); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", c, r
	}
	return strings.TrimSuffix(line, "\n"), c, r
}

func header(t testing.TB, version byte, src, dst string, tlvs ...proxyproto.TLV) []byte {
	t.Helper()
	s, _ := net.ResolveTCPAddr("tcp", src)
	d, _ := net.ResolveTCPAddr("tcp", dst)
	h := proxyproto.HeaderProxyFromAddrs(version, s, d)
	if len(tlvs) > 0 {
		if err := h.SetTLVs(tlvs); err != nil {
			t.Fatal(err)
		}
	}
	b, err := h.Format()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestProxyProtocolAddresses: a PROXY v1 or v2 header (from go-proxyproto, TLVs included,
// whole or a byte at a time) makes its source the remote address and its destination the
// restored local address, for filter chain matching and the handler; the data after it
// reaches the handler untouched; the socket's peer stays the direct remote address.
func TestProxyProtocolAddresses(t *testing.T) {
	st := newStore(t)
	m := testManager(t, ManagerConfig{Stats: st, Services: addrServices()}, listenerFromYAML(t, proxyListener("pp", "")))
	addr := addrOf(t, m, "pp")
	tlvs := []proxyproto.TLV{{Type: proxyproto.PP2_TYPE_AUTHORITY, Value: []byte("example.com")}, {Type: 0xE0, Value: []byte{1, 2, 3}}}
	cases := []struct {
		name     string
		pre      [][]byte
		wantLine string
	}{
		{"v1 TCP4", [][]byte{header(t, 1, "203.0.113.7:4000", "198.51.100.1:443")}, "proxied 203.0.113.7:4000 198.51.100.1:443"},
		{"v2 TCP4 with TLVs", [][]byte{header(t, 2, "203.0.113.8:4001", "198.51.100.2:80", tlvs...)}, "proxied 203.0.113.8:4001 198.51.100.2:80"},
		{"v2 TCP6", [][]byte{header(t, 2, "[2001:db8::1]:5000", "[2001:db8::2]:8443")}, "other [2001:db8::1]:5000 [2001:db8::2]:8443"},
		{"v1 TCP6", [][]byte{header(t, 1, "[2001:db8::3]:5001", "[2001:db8::4]:80")}, "other [2001:db8::3]:5001 [2001:db8::4]:80"},
		{"v2 byte by byte", split(header(t, 2, "203.0.113.9:4002", "198.51.100.3:81", tlvs...)), "proxied 203.0.113.9:4002 198.51.100.3:81"},
		{"v1 byte by byte", split(header(t, 1, "203.0.113.10:4003", "198.51.100.4:82")), "proxied 203.0.113.10:4003 198.51.100.4:82"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			line, c, r := dialWith(t, addr, tc.pre, "after the header\n")
			direct := c.LocalAddr().String()
			if want := tc.wantLine + " " + direct + " true"; line != want {
				t.Fatalf("handler saw %q; want %q", line, want)
			}
			echo, err := r.ReadString('\n')
			if err != nil || echo != "after the header\n" {
				t.Fatalf("echo = %q, %v; want the bytes after the header", echo, err)
			}
		})
	}
	wantStat(t, st, "proxy_proto.versions.v1.found", 3)
	wantStat(t, st, "proxy_proto.versions.v2.found", 3)
	wantStat(t, st, "downstream_cx_proxy_proto_error", 0)
}

func split(b []byte) [][]byte {
	out := make([][]byte, len(b))
	for i := range b {
		out[i] = b[i : i+1]
	}
	return out
}

// TestProxyProtocolLocalKeepsAddresses: a v2 LOCAL command and a v1 UNKNOWN line are read
// and dropped, and the connection keeps the socket's addresses.
func TestProxyProtocolLocalKeepsAddresses(t *testing.T) {
	st := newStore(t)
	m := testManager(t, ManagerConfig{Stats: st, Services: addrServices()}, listenerFromYAML(t, proxyListener("pp", "")))
	addr := addrOf(t, m, "pp")
	local, err := (&proxyproto.Header{Version: 2, Command: proxyproto.LOCAL, TransportProtocol: proxyproto.UNSPEC}).Format()
	if err != nil {
		t.Fatal(err)
	}
	for name, pre := range map[string][]byte{"v2 LOCAL": local, "v1 UNKNOWN": []byte("PROXY UNKNOWN\r\n")} {
		t.Run(name, func(t *testing.T) {
			line, c, r := dialWith(t, addr, [][]byte{pre}, "data\n")
			want := fmt.Sprintf("other %s %s %s false", c.LocalAddr(), c.RemoteAddr(), c.LocalAddr())
			if line != want {
				t.Fatalf("handler saw %q; want %q", line, want)
			}
			if echo, _ := r.ReadString('\n'); echo != "data\n" {
				t.Fatalf("echo = %q", echo)
			}
		})
	}
}

// TestProxyProtocolRefusals: a missing, malformed or disallowed header closes the
// connection before any filter chain sees it, and each case is counted in Envoy's stats.
func TestProxyProtocolRefusals(t *testing.T) {
	st := newStore(t)
	m := testManager(t, ManagerConfig{Stats: st, Services: addrServices()},
		listenerFromYAML(t, proxyListener("strict", "")),
		listenerFromYAML(t, proxyListener("nov1", `, stat_prefix: nov1, disallowed_versions: [V1]`)))
	strict, nov1 := addrOf(t, m, "strict"), addrOf(t, m, "nov1")
	cases := []struct {
		name, addr string
		pre        []byte
	}{
		{"no header", strict, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		{"v1 bad address", strict, []byte("PROXY TCP4 203.0.113.300 198.51.100.1 1 2\r\n")},
		{"v1 family mismatch", strict, []byte("PROXY TCP4 2001:db8::1 198.51.100.1 1 2\r\n")},
		{"v1 bad port", strict, []byte("PROXY TCP4 203.0.113.1 198.51.100.1 1 70000\r\n")},
		{"v1 too long", strict, []byte("PROXY TCP4 " + strings.Repeat("1", 120) + "\r\n")},
		{"v1 multicast", strict, []byte("PROXY TCP4 224.0.0.1 198.51.100.1 1 2\r\n")},
		{"v2 unix family", strict, append([]byte("\r\n\r\n\x00\r\nQUIT\n\x21\x31\x00\x00"), make([]byte, 0)...)},
		{"v2 truncated TLV", strict, append([]byte("\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x0f"), []byte{203, 0, 113, 1, 198, 51, 100, 1, 0, 1, 0, 2, 0xE0, 0, 9}...)},
		{"v2 bad version", strict, []byte("\r\n\r\n\x00\r\nQUIT\n\x31\x11\x00\x00")},
		{"v1 disallowed", nov1, header(t, 1, "203.0.113.7:4000", "198.51.100.1:443")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			line, c, r := dialWith(t, tc.addr, [][]byte{tc.pre}, "")
			if line != "" {
				t.Fatalf("a filter chain served the connection: %q", line)
			}
			expectClosed(t, c, r)
		})
	}
	wantStat(t, st, "proxy_proto.not_found_disallowed", 1)
	wantStat(t, st, "proxy_proto.versions.v1.error", 5)
	wantStat(t, st, "proxy_proto.versions.v2.error", 3)
	wantStat(t, st, "proxy_proto.nov1.versions.v1.disallowed", 1)
	wantStat(t, st, "downstream_cx_proxy_proto_error", 10)
	for _, l := range []string{"strict", "nov1"} {
		for _, s := range []string{"downstream_cx_total", "no_filter_chain_match"} {
			wantStat(t, st, "listener."+l+"."+s, 0)
		}
	}
}

// TestProxyProtocolOptional: with allow_requests_without_proxy_protocol a connection without
// a header keeps its addresses and its bytes, and one with a header is still read.
func TestProxyProtocolOptional(t *testing.T) {
	st := newStore(t)
	m := testManager(t, ManagerConfig{Stats: st, Services: addrServices()}, listenerFromYAML(t, proxyListener("opt", `, allow_requests_without_proxy_protocol: true`)))
	addr := addrOf(t, m, "opt")
	line, c, r := dialWith(t, addr, nil, "GET / HTTP/1.1\r\n")
	if want := fmt.Sprintf("other %s %s %s false", c.LocalAddr(), c.RemoteAddr(), c.LocalAddr()); line != want {
		t.Fatalf("without a header the handler saw %q; want %q", line, want)
	}
	if echo, _ := r.ReadString('\n'); echo != "GET / HTTP/1.1\r\n" {
		t.Fatalf("echo = %q; want the client's bytes untouched", echo)
	}
	line, c, _ = dialWith(t, addr, [][]byte{header(t, 2, "203.0.113.5:1", "198.51.100.5:2")}, "x\n")
	if want := "proxied 203.0.113.5:1 198.51.100.5:2 " + c.LocalAddr().String() + " true"; line != want {
		t.Fatalf("with a header the handler saw %q; want %q", line, want)
	}
	wantStat(t, st, "proxy_proto.not_found_allowed", 1)
	wantStat(t, st, "proxy_proto.versions.v2.found", 1)
}

// TestProxyProtocolThenTLSInspector: the TLS inspector reads the ClientHello after the
// PROXY header, so SNI matching and the PROXY source work together.
func TestProxyProtocolThenTLSInspector(t *testing.T) {
	st := newStore(t)
	l := fmt.Sprintf(`{name: pt, address: {socket_address: {address: 127.0.0.1, port_value: 0}},
listener_filters: [{name: envoy.filters.listener.proxy_protocol}, {name: envoy.filters.listener.tls_inspector}],
filter_chains: [{name: sni, filter_chain_match: {server_names: [a.example.com], source_prefix_ranges: [{address_prefix: 203.0.113.0, prefix_len: 24}]}, filters: [{name: test.addrs}]}],
default_filter_chain: {name: other, filters: [{name: test.addrs}]}}`)
	m := testManager(t, ManagerConfig{Stats: st, Services: addrServices()}, listenerFromYAML(t, l))
	line, c, _ := dialWith(t, addrOf(t, m, "pt"), [][]byte{header(t, 1, "203.0.113.4:9", "198.51.100.4:443"), helloBytes(t, "a.example.com")}, "")
	if want := "sni 203.0.113.4:9 198.51.100.4:443 " + c.LocalAddr().String() + " true"; line != want {
		t.Fatalf("handler saw %q; want %q", line, want)
	}
}

// TestProxyProtocolTimeout: a client that sends half a header is closed at
// listener_filters_timeout (downstream_pre_cx_timeout); with
// continue_on_listener_filters_timeout it reaches a filter chain with what it sent.
func TestProxyProtocolTimeout(t *testing.T) {
	st := newStore(t)
	m := testManager(t, ManagerConfig{Stats: st, Services: addrServices()},
		listenerFromYAML(t, strings.Replace(proxyListener("strict", ""), "listener_filters:", "listener_filters_timeout: 0.1s, listener_filters:", 1)),
		listenerFromYAML(t, strings.Replace(proxyListener("lenient", ""), "listener_filters:", "listener_filters_timeout: 0.1s, continue_on_listener_filters_timeout: true, listener_filters:", 1)))
	line, c, r := dialWith(t, addrOf(t, m, "strict"), [][]byte{[]byte("PROXY TCP4 203.0.")}, "")
	if line != "" {
		t.Fatalf("a filter chain served the connection: %q", line)
	}
	expectClosed(t, c, r)
	wantStat(t, st, "listener.strict.downstream_pre_cx_timeout", 1)

	line, c, r = dialWith(t, addrOf(t, m, "lenient"), [][]byte{[]byte("PROXY TCP4 203.0.")}, "")
	if want := fmt.Sprintf("other %s %s %s false", c.LocalAddr(), c.RemoteAddr(), c.LocalAddr()); line != want {
		t.Fatalf("after the timeout the handler saw %q; want %q", line, want)
	}
	c.Write([]byte("\n"))
	if echo, _ := r.ReadString('\n'); echo != "PROXY TCP4 203.0.\n" {
		t.Fatalf("echo = %q; want the bytes read before the timeout", echo)
	}
	wantStat(t, st, "listener.lenient.downstream_pre_cx_timeout", 1)
}

// TestHTTPInspector: the HTTP inspector sets the application protocol of plain-text
// connections from their first bytes (h2c preface, HTTP/1.1 and HTTP/1.0 request lines), so
// filter chains can match it, and counts what it found.
func TestHTTPInspector(t *testing.T) {
	st := newStore(t)
	l := `{name: hi, address: {socket_address: {address: 127.0.0.1, port_value: 0}},
listener_filters: [{name: envoy.filters.listener.http_inspector, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.listener.http_inspector.v3.HttpInspector}}],
filter_chains: [
 {name: h2c, filter_chain_match: {application_protocols: [h2c]}, filters: [{name: test.addrs}]},
 {name: h11, filter_chain_match: {application_protocols: [http/1.1]}, filters: [{name: test.addrs}]},
 {name: h10, filter_chain_match: {application_protocols: [http/1.0]}, filters: [{name: test.addrs}]}],
default_filter_chain: {name: other, filters: [{name: test.addrs}]}}`
	m := testManager(t, ManagerConfig{Stats: st, Services: addrServices()}, listenerFromYAML(t, l))
	addr := addrOf(t, m, "hi")
	for _, tc := range []struct{ first, chain string }{
		{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "h2c"},
		{"GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n", "h11"},
		{"POST / HTTP/1.0\r\n", "h10"},
		{"SSH-2.0-OpenSSH_9.6\r\n", "other"},
		{"GET / HTTP/2.0\r\n", "other"},
	} {
		line, _, _ := dialWith(t, addr, [][]byte{[]byte(tc.first)}, "")
		if got, _, _ := strings.Cut(line, " "); got != tc.chain {
			t.Errorf("%q went to chain %q; want %q", tc.first, got, tc.chain)
		}
	}
	for name, want := range map[string]uint64{"http2_found": 1, "http11_found": 1, "http10_found": 1, "http_not_found": 2, "read_error": 0} {
		wantStat(t, st, "http_inspector."+name, want)
	}
}

// TestProxyProtocolTLVsInFilterState: with tlv_location FILTER_STATE, the rules' TLVs of a
// PROXY v2 header (go-proxyproto's) become fields of the envoy.network.proxy_protocol.tlv
// object in the connection's filter state, which an access log format reads (FIELD, and the
// typed object), and nothing goes to dynamic metadata.
func TestProxyProtocolTLVsInFilterState(t *testing.T) {
	f, err := accesslog.ParseText("tenant=%FILTER_STATE(envoy.network.proxy_protocol.tlv:FIELD:tenant)% all=%FILTER_STATE(envoy.network.proxy_protocol.tlv)% md=%DYNAMIC_METADATA(envoy.filters.listener.proxy_protocol)%", accesslog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := serving("test.state", func(*ChainContext, any) (FilterChainHandler, error) {
		return HandlerFunc(func(c *Conn) {
			defer c.Close()
			e := accesslog.Entry{FilterState: c.FilterState(), DynamicMetadata: c.DynamicMetadata()}
			c.Write(append(f.Format(nil, &e), '\n'))
		}), nil
	})
	l := listenerFromYAML(t, `{name: pp, address: {socket_address: {address: 127.0.0.1, port_value: 0}},
listener_filters: [{name: envoy.filters.listener.proxy_protocol, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol,
  tlv_location: FILTER_STATE, rules: [{tlv_type: 0xE0, on_tlv_present: {key: tenant}}, {tlv_type: 0xE1, on_tlv_present: {key: raw, value_string_encoding: BASE64}}]}}],
filter_chains: [{filters: [{name: test.state}]}]}`)
	m := testManager(t, ManagerConfig{Stats: newStore(t), Services: r}, l)
	addr := addrOf(t, m, "pp")
	tlvs := []proxyproto.TLV{{Type: 0xE0, Value: []byte("acme")}, {Type: 0xE1, Value: []byte{0xff, 0x00}}, {Type: 0xE2, Value: []byte("ignored")}}
	line, _, _ := dialWith(t, addr, [][]byte{header(t, 2, "203.0.113.8:4001", "198.51.100.2:80", tlvs...)}, "")
	if want := `tenant=acme all={"raw":"/wA=","tenant":"acme"} md=-`; line != want {
		t.Errorf("access log line = %q; want %q", line, want)
	}
	line, _, _ = dialWith(t, addr, [][]byte{header(t, 2, "203.0.113.9:4001", "198.51.100.2:80")}, "")
	if want := `tenant=- all=- md=-`; line != want {
		t.Errorf("without TLVs: access log line = %q; want %q", line, want)
	}
}
