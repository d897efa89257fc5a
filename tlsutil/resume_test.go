package tlsutil

import (
	"crypto/tls"
	"fmt"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// accepted is what the server side of one connection saw.
type accepted struct {
	serial  string // the peer's leaf serial, "" when it sent none
	resumed bool
	err     error
}

// recordingServer accepts TLS connections with cfg on 127.0.0.1. For each
// one it completes the handshake, reports what it saw on the returned
// channel, writes "ok" (after any session tickets, which Go sends as soon
// as the handshake ends) and holds the connection open until the peer
// closes it or the test ends.
func recordingServer(t *testing.T, cfg *tls.Config) (string, <-chan accepted) {
	t.Helper()
	got := make(chan accepted, 16)
	addr := serveTCP(t, func(c net.Conn) {
		tc := tls.Server(c, cfg)
		defer tc.Close()
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		a := accepted{err: tc.Handshake()}
		cs := tc.ConnectionState()
		a.resumed = cs.DidResume
		if len(cs.PeerCertificates) > 0 {
			a.serial = serialHex(cs.PeerCertificates[0])
		}
		got <- a
		if a.err == nil {
			io.WriteString(tc, "ok")
			io.Copy(io.Discard, tc)
		}
	})
	return addr, got
}

// connect handshakes with cfg and returns the connection unread, so a
// TLS 1.3 session ticket is still in flight, and what the server saw.
func connect(t *testing.T, addr string, cfg *tls.Config, got <-chan accepted) (*tls.Conn, accepted) {
	t.Helper()
	c := dial(t, addr, cfg)
	select {
	case a := <-got:
		if a.err != nil {
			t.Fatalf("server handshake: %v", a.err)
		}
		return c, a
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not finish the handshake")
	}
	return nil, accepted{}
}

// readOK reads the server's "ok", and with it the session ticket sent
// before it.
func readOK(t *testing.T, c *tls.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 2)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ok" {
		t.Fatalf("read %q, %v; want \"ok\"", buf, err)
	}
}

// mtlsServer is a Go TLS 1.3 server with session tickets that requires a
// client certificate.
func mtlsServer(t *testing.T) *tls.Config {
	srv := tlstest.SelfSigned(t, tlstest.Options{DNSNames: []string{"up.example.com"}})
	sc := goServer(t, srv.CertPEM, srv.KeyPEM)
	sc.MinVersion = tls.VersionTLS13
	sc.ClientAuth = tls.RequireAnyClientCert
	return sc
}

// TestClientSessionBoundToLoad: the session ticket of a connection made
// with the certificate of one load is only resumed by handshakes of that
// load, even when it arrives after a Reload; without a Reload sessions
// resume.
func TestClientSessionBoundToLoad(t *testing.T) {
	tests := []struct {
		name   string
		extra  string
		config func(*ClientContext) *tls.Config
	}{
		{"Config", "", (*ClientContext).Config},
		{"ConfigForHost with auto_host_sni", "auto_host_sni: true\n",
			func(c *ClientContext) *tls.Config { return c.ConfigForHost("up.example.com") }},
	}
	first := tlstest.SelfSigned(t, tlstest.Options{Serial: big.NewInt(0xa1)})
	second := tlstest.SelfSigned(t, tlstest.Options{Serial: big.NewInt(0xb2)})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			certFile, keyFile := writeFile(t, dir, "c.pem", first.CertPEM), writeFile(t, dir, "c.key", first.KeyPEM)
			c := newClient(t, tt.extra+fmt.Sprintf("common_tls_context: {tls_params: {tls_maximum_protocol_version: TLSv1_3}, tls_certificates: [{certificate_chain: {filename: %s}, private_key: {filename: %s}}]}", certFile, keyFile), Deps{})
			addr, got := recordingServer(t, mtlsServer(t))
			check := func(t *testing.T, what string, a accepted, wantSerial string, wantResumed bool) {
				t.Helper()
				if a.serial != wantSerial || a.resumed != wantResumed {
					t.Errorf("%s: server saw client certificate %q, resumed %v; want %q, resumed %v", what, a.serial, a.resumed, wantSerial, wantResumed)
				}
			}

			t.Run("no reload resumes", func(t *testing.T) {
				conn, a := connect(t, addr, tt.config(c), got)
				check(t, "first connection", a, "a1", false)
				readOK(t, conn)
				conn, a = connect(t, addr, tt.config(c), got)
				check(t, "second connection", a, "a1", true)
				if !conn.ConnectionState().DidResume {
					t.Errorf("client DidResume = false; want true")
				}
			})

			t.Run("ticket arriving after Reload", func(t *testing.T) {
				old, a := connect(t, addr, tt.config(c), got)
				if a.serial != "a1" {
					t.Fatalf("before Reload the server saw client certificate %q; want a1", a.serial)
				}
				writeFile(t, dir, "c.pem", second.CertPEM)
				writeFile(t, dir, "c.key", second.KeyPEM)
				if err := c.Reload(); err != nil {
					t.Fatalf("Reload: %v", err)
				}
				readOK(t, old) // the old load's ticket arrives now
				conn, a := connect(t, addr, tt.config(c), got)
				check(t, "first connection after Reload", a, "b2", false)
				if conn.ConnectionState().DidResume {
					t.Errorf("client DidResume = true; want a full handshake with the new certificate")
				}
				readOK(t, conn)
				conn, a = connect(t, addr, tt.config(c), got)
				check(t, "second connection after Reload", a, "b2", true)
				readOK(t, conn)
			})
		})
	}
}

// TestClientConcurrentReload races handshakes, whose session tickets
// arrive after they return, against client reloads (run with -race): every
// connection presents a certificate and the server accepts it.
func TestClientConcurrentReload(t *testing.T) {
	cert := tlstest.SelfSigned(t, tlstest.Options{})
	c := newClient(t, fmt.Sprintf("max_session_keys: 4\ncommon_tls_context: {tls_params: {tls_maximum_protocol_version: TLSv1_3}, tls_certificates: [{certificate_chain: {inline_string: %q}, private_key: {inline_string: %q}}]}", cert.CertPEM, cert.KeyPEM), Deps{})
	addr, got := recordingServer(t, mtlsServer(t))
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 20 {
			if err := c.Reload(); err != nil {
				t.Error(err)
			}
		}
	})
	for range 10 {
		conn, a := connect(t, addr, c.Config(), got)
		if a.serial == "" {
			t.Errorf("the server saw no client certificate")
		}
		readOK(t, conn)
	}
	wg.Wait()
}

// TestServerReloadTickets: tickets a listener issued before a Reload (its
// own random ticket keys) are not resumed after it, even when they reach
// the client after the Reload; without a Reload they resume.
func TestServerReloadTickets(t *testing.T) {
	dir := t.TempDir()
	first := tlstest.SelfSigned(t, tlstest.Options{Serial: big.NewInt(0xa1)})
	second := tlstest.SelfSigned(t, tlstest.Options{Serial: big.NewInt(0xb2)})
	certFile, keyFile := writeFile(t, dir, "l.pem", first.CertPEM), writeFile(t, dir, "l.key", first.KeyPEM)
	s := newServer(t, fmt.Sprintf("common_tls_context: {tls_params: {tls_maximum_protocol_version: TLSv1_3}, tls_certificates: [{certificate_chain: {filename: %s}, private_key: {filename: %s}}]}", certFile, keyFile), Deps{})
	client := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13, ClientSessionCache: tls.NewLRUClientSessionCache(4)}
	addr, got := recordingServer(t, s.Config())
	steps := []struct {
		name        string
		reload      bool // after the handshake, before the ticket is read
		wantSerial  string
		wantResumed bool
	}{
		{"first", false, "a1", false},
		{"resumes", true, "a1", true},
		{"after Reload", false, "b2", false},
		{"resumes the new load", false, "b2", true},
	}
	for _, st := range steps {
		conn, a := connect(t, addr, client, got)
		if serial := peerSerial(conn); serial != st.wantSerial || a.resumed != st.wantResumed {
			t.Errorf("%s: server certificate %q, resumed %v; want %q, resumed %v", st.name, serial, a.resumed, st.wantSerial, st.wantResumed)
		}
		if st.reload {
			writeFile(t, dir, "l.pem", second.CertPEM)
			writeFile(t, dir, "l.key", second.KeyPEM)
			if err := s.Reload(); err != nil {
				t.Fatalf("Reload: %v", err)
			}
		}
		readOK(t, conn)
	}
}
