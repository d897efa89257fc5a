package pool

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	goproxyproto "github.com/pires/go-proxyproto"

	"github.com/legateproxy/legate/internal/proxyproto"
	"github.com/legateproxy/legate/internal/sockopt"
)

// testOrigin is a downstream connection's PROXY protocol state as a request names it.
type testOrigin struct {
	src, dst net.Addr
	tlvs     []proxyproto.TLV
}

func (o *testOrigin) UpstreamSource() *sockopt.Source     { return nil }
func (o *testOrigin) RemoteAddr() net.Addr                { return o.src }
func (o *testOrigin) LocalAddr() net.Addr                 { return o.dst }
func (o *testOrigin) ProxyProtocolTLVs() []proxyproto.TLV { return o.tlvs }

type connKey struct{}

// newProxyProtocolServer serves HTTP behind go-proxyproto's listener: each response
// describes the PROXY header its connection began with ("local" for the LOCAL command, else
// source, destination and the TLVs in order). It counts the connections accepted.
func newProxyProtocolServer(t *testing.T) (addr string, accepted *atomic.Int64) {
	t.Helper()
	accepted = new(atomic.Int64)
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Context().Value(connKey{}).(*goproxyproto.Conn).ProxyHeader()
		if h == nil || h.Command.IsLocal() {
			io.WriteString(w, "local")
			return
		}
		tlvs, err := h.TLVs()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s", h.SourceAddr, h.DestinationAddr)
		for _, tlv := range tlvs {
			fmt.Fprintf(&b, " %x=%s", byte(tlv.Type), tlv.Value)
		}
		io.WriteString(w, b.String())
	}))
	s.Listener = &goproxyproto.Listener{Listener: s.Listener}
	s.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) }
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			accepted.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s.Listener.Addr().String(), accepted
}

// TestProxyProtocolPoolKeys: with an upstream proxy_protocol socket, each request's
// connection's header describes its downstream connection (with the host's TLVs, the
// socket's and the passed-through ones), and the pool keeps connections per downstream, as
// Envoy keys its pools by the PROXY protocol state: a downstream's requests share its
// connection, two downstreams never do; the TLVs separate them only with tlv_as_pool_key. A
// request of Legate's own gets a v2 LOCAL header.
func TestProxyProtocolPoolKeys(t *testing.T) {
	tcp := func(s string) net.Addr { a, _ := net.ResolveTCPAddr("tcp", s); return a }
	tlv := func(v string) []proxyproto.TLV { return []proxyproto.TLV{{Type: 0xE0, Value: []byte(v)}} }
	a := &testOrigin{tcp("203.0.113.1:1000"), tcp("198.51.100.1:80"), tlv("one")}
	aOther := &testOrigin{a.src, a.dst, tlv("two")}
	b := &testOrigin{tcp("203.0.113.2:2000"), tcp("198.51.100.1:80"), tlv("one")}
	for _, tc := range []struct {
		name  string
		key   bool
		want  []string // per request: a, a, b, none, aOther
		conns int64
	}{
		{"addresses", false, []string{
			"203.0.113.1:1000 198.51.100.1:80 f1=host f0=added e0=one",
			"203.0.113.1:1000 198.51.100.1:80 f1=host f0=added e0=one",
			"203.0.113.2:2000 198.51.100.1:80 f1=host f0=added e0=one",
			"local",
			"203.0.113.1:1000 198.51.100.1:80 f1=host f0=added e0=one", // a's connection
		}, 3},
		{"tlv_as_pool_key", true, []string{
			"203.0.113.1:1000 198.51.100.1:80 f1=host f0=added e0=one",
			"203.0.113.1:1000 198.51.100.1:80 f1=host f0=added e0=one",
			"203.0.113.2:2000 198.51.100.1:80 f1=host f0=added e0=one",
			"local",
			"203.0.113.1:1000 198.51.100.1:80 f1=host f0=added e0=two",
		}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, accepted := newProxyProtocolServer(t)
			host, port, _ := net.SplitHostPort(addr)
			// The endpoint's PerHostConfig adds f1=host ("aG9zdA==").
			cm, store := newClusterManager(t, fmt.Sprintf(`name: up
type: STATIC
connect_timeout: 1s
transport_socket:
  name: envoy.transport_sockets.proxy_protocol
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.transport_sockets.proxy_protocol.v3.ProxyProtocolUpstreamTransport
    tlv_as_pool_key: %v
    config: {version: V2, pass_through_tlvs: {}, added_tlvs: [{type: 0xF0, value: YWRkZWQ=}]}
    transport_socket: {name: envoy.transport_sockets.raw_buffer, typed_config: {"@type": type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer}}
load_assignment:
  cluster_name: up
  endpoints:
  - lb_endpoints:
    - endpoint: {address: {socket_address: {address: %s, port_value: %s}}}
      metadata:
        typed_filter_metadata:
          envoy.transport_sockets.proxy_protocol: {"@type": type.googleapis.com/envoy.config.core.v3.PerHostConfig, added_tlvs: [{type: 0xF1, value: aG9zdA==}]}
`, tc.key, host, port))
			m := newManager(t, cm, store, nil)
			h := onlyHost(t, m)
			for i, o := range []Origin{a, a, b, nil, aOther} {
				var resp Response
				req := Request{Method: "GET", Path: "/", Host: "up", Origin: o}
				if err := m.RoundTrip(context.Background(), h, &req, &resp); err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Close()
				if err != nil || string(body) != tc.want[i] {
					t.Errorf("request %d: upstream saw %q, %v; want %q", i, body, err, tc.want[i])
				}
			}
			if got := accepted.Load(); got != tc.conns {
				t.Errorf("upstream connections = %d; want %d", got, tc.conns)
			}
		})
	}
}
