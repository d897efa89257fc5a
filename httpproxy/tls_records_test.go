package httpproxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// TestTLSResponseIsOneRecord sends ten keep-alive HTTP/1.1 requests over one TLS
// connection and checks that each response, head and body, reaches the client as a single
// TLS record (the proxy writes it with one Write on the tls.Conn: two Writes would be two
// records and two write calls), and that the connection was handshaken once.
func TestTLSResponseIsOneRecord(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "test ca"})
	up := echo(t, "a")
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm:      webHCM,
		tls:      mtlsSocket(t, ca),
	})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)

	raw, err := net.DialTimeout("tcp", e.addr, wait)
	if err != nil {
		t.Fatal(err)
	}
	rc := &tlstest.RecordCounter{Conn: raw}
	tc := tls.Client(rc, &tls.Config{RootCAs: roots, ServerName: "proxy.example.com", NextProtos: []string{"http/1.1"}})
	defer tc.Close()
	tc.SetDeadline(time.Now().Add(wait))
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(tc)
	for i := range 10 {
		before := rc.Records()
		if _, err := fmt.Fprintf(tc, "GET /r%d HTTP/1.1\r\nHost: proxy.example.com\r\n\r\n", i); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf("a /r%d", i); err != nil || string(body) != want {
			t.Fatalf("request %d: body %q, %v; want %q", i, body, err, want)
		}
		if br.Buffered() != 0 {
			t.Fatalf("request %d: %d bytes after the response", i, br.Buffered())
		}
		// The first response shares its reads with the session tickets sent after the
		// handshake; from the second on, only the response's records come.
		if got := rc.Records() - before; i > 0 && got != 1 {
			t.Errorf("request %d: the response came in %d TLS records; want 1", i, got)
		}
	}
	if got := listenerSSLHandshakes(e); got != 1 {
		t.Errorf("ssl.handshake = %d after ten requests on one connection; want 1", got)
	}
}

// listenerSSLHandshakes returns the listener's ssl.handshake counter.
func listenerSSLHandshakes(e *env) uint64 {
	var v uint64
	e.store.Each(stats.KindSet(stats.KindCounter), func(st *stats.Stat) bool {
		if strings.HasPrefix(st.Name(), "listener.") && strings.HasSuffix(st.Name(), ".ssl.handshake") {
			v += st.Value()
		}
		return true
	})
	return v
}

// BenchmarkProxyTLS is BenchmarkProxy's legate case with a TLS downstream (TLS 1.3,
// TLS_AES_128_GCM_SHA256 on AES hardware, as in the tls round of bench/peers-h2-tls.sh); the
// one handshake per parallel client is in the timing but negligible over a run. Its 2
// allocs/op are crypto/tls's own: each Read of a new record allocates a small reader
// (Conn.readFromUntil), in the proxy and in the client.
func BenchmarkProxyTLS(b *testing.B) { benchClients(b, tlsClients(b)) }

// tlsClients serves BenchmarkProxyTLS's proxy and returns how to connect a client to it.
func tlsClients(tb testing.TB) func() *rawClient {
	up := rawUpstream(tb)
	ca := tlstest.NewCA(tb, tlstest.Options{CommonName: "bench ca"})
	e := newEnv(tb, envOptions{
		clusters: []string{staticCluster("web", "", up)},
		hcm:      simpleHCM("web", ""),
		tls:      mtlsSocket(tb, ca),
	})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	cfg := &tls.Config{RootCAs: roots, ServerName: "proxy.example.com", NextProtos: []string{"http/1.1"}}
	return func() *rawClient {
		c, err := tls.Dial("tcp", e.addr, cfg)
		if err != nil {
			tb.Fatal(err)
		}
		return rawClientOn(tb, c, "/")
	}
}
