package pool

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"sync"
	"testing"
	"unsafe"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// sniServer starts a TLS upstream holding a certificate per name, chosen by the SNI it gets,
// that answers each request with its connection's SNI, and counts the handshakes per SNI.
type sniServer struct {
	roots *x509.CertPool
	cc    *connCounter
	addr  string

	mu         sync.Mutex
	handshakes map[string]int
}

func newSNIServer(t *testing.T, h2 bool, names ...string) *sniServer {
	t.Helper()
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "named pools ca"})
	s := &sniServer{roots: x509.NewCertPool(), handshakes: map[string]int{}}
	s.roots.AddCert(ca.Cert)
	certs := map[string]*tls.Certificate{}
	for _, n := range names {
		leaf := ca.Issue(t, tlstest.Options{CommonName: n, DNSNames: []string{n}})
		certs[n] = &tls.Certificate{Certificate: [][]byte{leaf.Cert.Raw}, PrivateKey: leaf.Key}
	}
	srv, cc := newCountedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.TLS.ServerName)
	}))
	srv.TLS = &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
		s.mu.Lock()
		s.handshakes[h.ServerName]++
		s.mu.Unlock()
		return certs[h.ServerName], nil
	}}
	srv.EnableHTTP2 = h2
	srv.StartTLS()
	t.Cleanup(srv.Close)
	s.cc, s.addr = cc, srv.Listener.Addr().String()
	return s
}

func (s *sniServer) handshakesOf(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handshakes[name]
}

// namedManager builds the pools of an auto_sni cluster in front of s, its connections
// verified against s's names.
func namedManager(t *testing.T, s *sniServer, protocol, upstreamOptions string) *Manager {
	t.Helper()
	cm, store := newClusterManager(t, staticCluster(typedOptions(protocol+"\n    upstream_http_protocol_options: "+upstreamOptions)+"\n"+
		"transport_socket: {name: envoy.transport_sockets.tls, typed_config: {'@type': type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext}}",
		s.addr))
	return newManager(t, cm, store, func(c *ManagerConfig) {
		c.TLS = func(*host.Host) *tls.Config {
			return &tls.Config{RootCAs: s.roots, ServerName: "default.example"}
		}
		c.AuthorityTLS = func(_ *host.Host, name string) *tls.Config {
			return &tls.Config{RootCAs: s.roots, ServerName: name}
		}
	})
}

// getAs runs one GET with the Host (and extra header fields) given.
func getAs(t *testing.T, m *Manager, h *host.Host, authority string, fields ...Field) string {
	t.Helper()
	var resp Response
	req := Request{Method: "GET", Path: "/", Host: authority, Header: fields}
	if err := m.RoundTrip(context.Background(), h, &req, &resp); err != nil {
		t.Fatalf("RoundTrip with Host %s = %v; want nil", authority, err)
	}
	defer resp.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return string(b)
}

// TestNamedPoolsPerAuthority proves a host's connections are pooled per authority with
// auto_sni, over HTTP/1.1 and HTTP/2: interleaved requests for two names to one endpoint each
// travel on a connection opened with their own name as SNI (a shared connection would show
// the other name), one connection per name is reused, and override_auto_sni_header's value
// replaces the Host.
func TestNamedPoolsPerAuthority(t *testing.T) {
	for _, tc := range []struct{ name, protocol string }{
		{"HTTP/1.1", "explicit_http_config: {http_protocol_options: {}}"},
		{"HTTP/2", "explicit_http_config: {http2_protocol_options: {}}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSNIServer(t, tc.protocol != "explicit_http_config: {http_protocol_options: {}}", "a.example", "b.example", "c.example")
			m := namedManager(t, s, tc.protocol, "{auto_sni: true, override_auto_sni_header: x-sni}")
			h := onlyHost(t, m)
			for _, r := range []struct{ authority, want string }{
				{"a.example", "a.example"}, {"b.example:8443", "b.example"}, {"a.example:80", "a.example"}, {"b.example", "b.example"},
			} {
				if got := getAs(t, m, h, r.authority); got != r.want {
					t.Fatalf("Host %s went over a connection with SNI %q; want %q", r.authority, got, r.want)
				}
			}
			if got := getAs(t, m, h, "a.example", Field{Name: "X-SNI", Value: "c.example"}); got != "c.example" {
				t.Fatalf("with x-sni: c.example the SNI was %q; want c.example", got)
			}
			for _, n := range []string{"a.example", "b.example", "c.example"} {
				if got := s.handshakesOf(n); got != 1 {
					t.Errorf("handshakes with SNI %s = %d; want 1 (one connection per name, reused)", n, got)
				}
			}
			if got := s.cc.opened.Load(); got != 3 {
				t.Errorf("upstream connections = %d; want 3", got)
			}
		})
	}
}

// TestNamedPoolsBounded lowers the bound on a host's named pools to two: a third name evicts
// the pools with nothing in flight, closing their idle connections, and an evicted name is
// served again on a new connection.
func TestNamedPoolsBounded(t *testing.T) {
	s := newSNIServer(t, false, "a.example", "b.example", "c.example")
	m := namedManager(t, s, "explicit_http_config: {http_protocol_options: {}}", "{auto_sni: true}")
	m.keyedLimit = 2
	h := onlyHost(t, m)
	for _, n := range []string{"a.example", "b.example", "c.example"} {
		if got := getAs(t, m, h, n); got != n {
			t.Fatalf("Host %s: SNI %q", n, got)
		}
	}
	s.cc.waitClosed(t, 2) // a.example's and b.example's idle connections
	hp, err := m.pool(h)
	if err != nil {
		t.Fatal(err)
	}
	hp.mu.Lock()
	n := hp.nKeyed
	hp.mu.Unlock()
	if n != 1 {
		t.Fatalf("named pools after eviction = %d; want 1 (c.example)", n)
	}
	if got := getAs(t, m, h, "a.example"); got != "a.example" {
		t.Fatalf("Host a.example after eviction: SNI %q", got)
	}
	if got := s.handshakesOf("a.example"); got != 2 {
		t.Errorf("handshakes with SNI a.example = %d; want 2 (its pool was evicted)", got)
	}
}

// TestNamedUpgradeConnection: an upgrade's raw connection (ConnectUpgrade) is opened for the
// request's authority, or the override header's value, as RoundTrip's are, and belongs to
// that name's pool while it is open.
func TestNamedUpgradeConnection(t *testing.T) {
	s := newSNIServer(t, false, "a.example", "b.example")
	m := namedManager(t, s, "explicit_http_config: {http_protocol_options: {}}", "{auto_sni: true, override_auto_sni_header: x-sni}")
	h := onlyHost(t, m)
	for _, tc := range []struct{ authority, override, want string }{
		{"a.example:443", "", "a.example"},
		{"a.example", "b.example", "b.example"},
	} {
		header := func(name string) string {
			if name != "x-sni" {
				t.Errorf("header %q looked up; want x-sni", name)
			}
			return tc.override
		}
		c, err := m.ConnectUpgrade(context.Background(), h, 0, nil, tc.authority, header, nil)
		if err != nil {
			t.Fatalf("ConnectUpgrade(%s): %v", tc.authority, err)
		}
		if got := c.Conn.(*tls.Conn).ConnectionState().ServerName; got != tc.want {
			t.Errorf("authority %s, override %q: SNI %q; want %q", tc.authority, tc.override, got, tc.want)
		}
		if c.hp.key.name != tc.want {
			t.Errorf("connection kept in the pool of %q; want %q", c.hp.key.name, tc.want)
		}
		c.Close()
	}
	if a, b := s.handshakesOf("a.example"), s.handshakesOf("b.example"); a != 1 || b != 1 {
		t.Errorf("handshakes a.example=%d b.example=%d; want 1 each", a, b)
	}
}

// TestKeyedPoolOwnsItsName proves a keyed pool's name does not alias the request's
// authority: the downstream reader hands the router views of its buffer, which the next
// request overwrites. A name kept by reference changes under the pool's key, so the same
// name later misses its pool (a second handshake here) and another name can find it (and
// travel on a connection opened with the wrong SNI).
func TestKeyedPoolOwnsItsName(t *testing.T) {
	s := newSNIServer(t, false, "a.example", "b.example", "c.example")
	m := namedManager(t, s, "explicit_http_config: {http_protocol_options: {}}", "{auto_sni: true}")
	h := onlyHost(t, m)
	var prev []byte
	for _, name := range []string{"b.example", "c.example", "b.example", "a.example", "c.example", "b.example"} {
		buf := []byte(name)
		if got := getAs(t, m, h, unsafe.String(&buf[0], len(buf))); got != name {
			t.Fatalf("Host %s went over a connection with SNI %q; want %q", name, got, name)
		}
		if prev != nil {
			copy(prev, "x.example") // the reader's next request lands where the last one was
		}
		prev = buf
	}
	for _, n := range []string{"a.example", "b.example", "c.example"} {
		if got := s.handshakesOf(n); got != 1 {
			t.Errorf("handshakes with SNI %s = %d; want 1 (one connection per name, reused)", n, got)
		}
	}
}
