package tlsutil

import (
	"crypto/tls"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// serveTCP accepts connections on 127.0.0.1 and runs handle for each in
// its own goroutine. When the test ends it closes the listener and every
// connection and waits for the handlers.
func serveTCP(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { handle(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// echoServer accepts TLS connections with cfg on 127.0.0.1 and echoes what
// it reads. It stops when the test ends.
func echoServer(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	return serveTCP(t, func(c net.Conn) {
		tc := tls.Server(c, cfg)
		io.Copy(tc, tc)
	})
}

func dial(t *testing.T, addr string, cfg *tls.Config) *tls.Conn {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func echo(t *testing.T, c *tls.Conn, msg string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatalf("write: %v", err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
		t.Fatalf("echo read %q, %v; want %q", buf, err, msg)
	}
}

func peerSerial(c *tls.Conn) string { return serialHex(c.ConnectionState().PeerCertificates[0]) }

// TestServerReload rotates a listener's certificate files: connections made
// before Reload keep the old certificate and keep working; new handshakes
// get the new one; a failed reload changes nothing.
func TestServerReload(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, tlstest.Options{})
	oldCert := ca.Issue(t, tlstest.Options{Serial: big.NewInt(0xa1), DNSNames: []string{"l.example.com"}})
	newCert := ca.Issue(t, tlstest.Options{Serial: big.NewInt(0xb2), DNSNames: []string{"l.example.com"}})
	certFile := writeFile(t, dir, "l.pem", oldCert.CertPEM)
	keyFile := writeFile(t, dir, "l.key", oldCert.KeyPEM)
	reg := NewRegistry(nil)
	s := newServer(t, fmt.Sprintf("common_tls_context: {tls_certificates: [{certificate_chain: {filename: %s}, private_key: {filename: %s}}]}", certFile, keyFile), Deps{Registry: reg})
	client := newClient(t, fmt.Sprintf("sni: l.example.com\ncommon_tls_context: {validation_context: {trusted_ca: {filename: %s}}}",
		writeFile(t, dir, "ca.pem", ca.CertPEM)), Deps{})
	addr := echoServer(t, s.Config())

	before := dial(t, addr, client.Config())
	echo(t, before, "one")
	writeFile(t, dir, "l.pem", newCert.CertPEM)
	writeFile(t, dir, "l.key", newCert.KeyPEM)
	if got := peerSerial(dial(t, addr, client.Config())); got != "a1" {
		t.Errorf("before Reload a new connection got serial %s; want a1 (files are read on demand)", got)
	}
	if err := s.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	after := dial(t, addr, client.Config())
	if got := peerSerial(after); got != "b2" {
		t.Errorf("after Reload serial %s; want b2", got)
	}
	echo(t, before, "still open")
	if got := peerSerial(before); got != "a1" {
		t.Errorf("the connection made before Reload shows serial %s; want a1", got)
	}
	if got := reg.Certificates()[0].Chain[0].SerialNumber; got != "b2" {
		t.Errorf("registry shows serial %s; want b2", got)
	}

	if err := os.WriteFile(keyFile, []byte("broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := reg.Reload(); err == nil {
		t.Fatal("Registry.Reload with a broken key succeeded; want an error")
	}
	if got := peerSerial(dial(t, addr, client.Config())); got != "b2" {
		t.Errorf("after a failed reload serial %s; want b2 kept", got)
	}
	echo(t, after, "unaffected")
}

// TestClientReload rotates a client certificate: the next handshake
// presents the new one (the session cache is per load, so no resumption
// skips it).
func TestClientReload(t *testing.T) {
	dir := t.TempDir()
	srv := tlstest.SelfSigned(t, tlstest.Options{})
	first := tlstest.SelfSigned(t, tlstest.Options{Serial: big.NewInt(1)})
	second := tlstest.SelfSigned(t, tlstest.Options{Serial: big.NewInt(2)})
	certFile, keyFile := writeFile(t, dir, "c.pem", first.CertPEM), writeFile(t, dir, "c.key", first.KeyPEM)
	c := newClient(t, fmt.Sprintf("common_tls_context: {tls_certificates: [{certificate_chain: {filename: %s}, private_key: {filename: %s}}]}", certFile, keyFile), Deps{})
	sc := goServer(t, srv.CertPEM, srv.KeyPEM)
	sc.ClientAuth = tls.RequireAnyClientCert
	serial := func() string {
		t.Helper()
		r := handshake(t, sc, c.Config())
		if r.serverErr != nil || len(r.server.PeerCertificates) == 0 {
			t.Fatalf("handshake: server error %v, %d client certificates", r.serverErr, len(r.server.PeerCertificates))
		}
		return serialHex(r.server.PeerCertificates[0])
	}
	if got := serial(); got != "01" {
		t.Errorf("client certificate serial %s; want 01", got)
	}
	writeFile(t, dir, "c.pem", second.CertPEM)
	writeFile(t, dir, "c.key", second.KeyPEM)
	if err := c.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := serial(); got != "02" {
		t.Errorf("after Reload client certificate serial %s; want 02", got)
	}
}

// TestConcurrentReload races handshakes against reloads (run with -race).
func TestConcurrentReload(t *testing.T) {
	c := tlstest.SelfSigned(t, tlstest.Options{})
	s := newServer(t, fmt.Sprintf("common_tls_context: {tls_certificates: [{certificate_chain: {inline_string: %q}, private_key: {inline_string: %q}}]}", c.CertPEM, c.KeyPEM), Deps{})
	client := newClient(t, "{}", Deps{})
	addr := echoServer(t, s.Config())
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 20 {
			if err := s.Reload(); err != nil {
				t.Error(err)
			}
		}
	})
	for range 10 {
		echo(t, dial(t, addr, client.Config()), "x")
	}
	wg.Wait()
}
