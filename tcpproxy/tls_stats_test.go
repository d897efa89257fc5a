package tcpproxy

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/tlsutil"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// TestTLSStats runs a good, a certificate-less and an untrusted client against a TCP proxy
// that terminates mutual TLS and checks the listener's ssl.* counters by name.
func TestTLSStats(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "tcp ca"})
	other := tlstest.NewCA(t, tlstest.Options{CommonName: "other ca"})
	server := ca.Issue(t, tlstest.Options{CommonName: "proxy", DNSNames: []string{"proxy.example.com"}})
	client := ca.Issue(t, tlstest.Options{CommonName: "client"})
	stranger := other.Issue(t, tlstest.Options{CommonName: "stranger"})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	mutual := fmt.Sprintf("require_client_certificate: true\ncommon_tls_context: {tls_certificates: [%s], validation_context: {trusted_ca: {inline_string: %s}}}",
		certYAML(server), strconv.Quote(string(ca.CertPEM)))

	up := newUpstream(t, echo)
	e := newEnv(t, "", map[string][]string{"echo": {up.addr()}})
	logs := newLogFiles(t)
	deps := Deps{Pools: e.pools, AccessLogs: AccessLogDeps{Files: logs.Manager}, TLS: tlsutil.Deps{Stats: tlsutil.NewStatsScopes(e.store)}}
	addr := serveListener(t, e, deps, tlsListener(mutual, logs.path("a.log"), "%DOWNSTREAM_TLS_VERSION%\n"))
	var cipher string
	for i, cert := range []*tlstest.Cert{client, nil, stranger} {
		cfg := &tls.Config{RootCAs: roots, ServerName: "proxy.example.com", CurvePreferences: []tls.CurveID{tls.X25519}}
		if cert != nil {
			// Sent even when the server's CA list does not name its issuer.
			pair := &tls.Certificate{Certificate: [][]byte{cert.Cert.Raw}, PrivateKey: cert.Key}
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return pair, nil }
		}
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: wait}, "tcp", addr, cfg)
		if err != nil {
			t.Fatalf("connection %d: TLS dial: %v", i, err)
		}
		if i == 0 {
			cipher = tlsutil.CipherName(c.ConnectionState().CipherSuite)
		}
		c.SetDeadline(time.Now().Add(wait))
		io.WriteString(c, "hello")
		c.CloseWrite()
		io.ReadAll(c)
		c.Close()
		// The connection's log line is written once the proxy is done with it, its
		// handshake counted.
		logs.lines(t, "a.log", i+1)
	}
	const scope = "listener.127.0.0.1_0.ssl."
	got := map[string]uint64{}
	e.store.Each(stats.KindSet(stats.KindCounter), func(st *stats.Stat) bool {
		if strings.Contains(st.Name(), ".ssl.") && st.Value() > 0 {
			got[st.Name()] = st.Value()
		}
		return true
	})
	want := map[string]uint64{
		scope + "handshake": 1, scope + "ciphers." + cipher: 1, scope + "versions.TLSv1.3": 1, scope + "curves.X25519": 1,
		scope + "fail_verify_no_cert": 1, scope + "fail_verify_error": 1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ssl stats (-want +got):\n%s", diff)
	}
}
