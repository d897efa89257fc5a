package tlsutil

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// TestServerWritesFullRecords checks that a downstream connection frames a write in full
// records from its first byte: 12,000 bytes written at once right after the handshake
// reach the client as one record. Go's dynamic record sizing (on unless disabled) starts a
// connection with records of about 1.2 KB growing by that much each, so the same write went
// out as 4 records and 4 write calls; Envoy (BoringSSL) and nginx fill records up to 16 KB.
func TestServerWritesFullRecords(t *testing.T) {
	srv := tlstest.SelfSigned(t, tlstest.Options{DNSNames: []string{"server.example.com"}})
	// Without session tickets nothing but the payload follows the handshake.
	sc := newServer(t, fmt.Sprintf("disable_stateless_session_resumption: true\ncommon_tls_context: {tls_certificates: [{certificate_chain: {inline_bytes: %q}, private_key: {inline_bytes: %q}}]}",
		b64(srv.CertPEM), b64(srv.KeyPEM)), Deps{})
	payload := bytes.Repeat([]byte("0123456789"), 1200)
	addr := serveTCP(t, func(c net.Conn) {
		tc, _, _, err := sc.Accept(c, time.Now().Add(10*time.Second), false)
		if err != nil {
			return
		}
		// The payload waits for the client's byte, so no read of the handshake's last
		// flight (TLS 1.2: the server's Finished) can bring any of it.
		var go1 [1]byte
		if _, err := io.ReadFull(tc, go1[:]); err != nil {
			return
		}
		tc.Write(payload)
		io.Copy(io.Discard, tc) // until the client closes
	})
	roots := x509.NewCertPool()
	roots.AddCert(srv.Cert)
	for _, v := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
		t.Run(tls.VersionName(v), func(t *testing.T) {
			raw, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			rc := &tlstest.RecordCounter{Conn: raw}
			tc := tls.Client(rc, &tls.Config{RootCAs: roots, ServerName: "server.example.com", MinVersion: v, MaxVersion: v})
			defer tc.Close()
			tc.SetDeadline(time.Now().Add(10 * time.Second))
			if err := tc.Handshake(); err != nil {
				t.Fatal(err)
			}
			before := rc.Records()
			if _, err := tc.Write([]byte{'g'}); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(payload))
			if _, err := io.ReadFull(tc, got); err != nil || !bytes.Equal(got, payload) {
				t.Fatalf("read %d bytes, %v; want the %d written", len(got), err, len(payload))
			}
			if n := rc.Records() - before; n != 1 {
				t.Errorf("a write of %d bytes came in %d records; want 1", len(payload), n)
			}
		})
	}
}

// TestClientWritesFullRecords is TestServerWritesFullRecords for an upstream connection: a
// 12,000-byte write (a request body) reaches the server as one record.
func TestClientWritesFullRecords(t *testing.T) {
	srv := tlstest.SelfSigned(t, tlstest.Options{DNSNames: []string{"server.example.com"}})
	server := goServer(t, srv.CertPEM, srv.KeyPEM)
	server.SessionTicketsDisabled = true
	payload := bytes.Repeat([]byte("0123456789"), 1200)
	records := make(chan int, 1)
	addr := serveTCP(t, func(c net.Conn) {
		rc := &tlstest.RecordCounter{Conn: c}
		tc := tls.Server(rc, server)
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err != nil {
			records <- -1
			return
		}
		// The client writes once it has read this byte, after its handshake is over.
		tc.Write([]byte{'g'})
		before := rc.Records()
		got := make([]byte, len(payload))
		if _, err := io.ReadFull(tc, got); err != nil || !bytes.Equal(got, payload) {
			records <- -1
			return
		}
		records <- rc.Records() - before
	})
	cc := newClient(t, `sni: server.example.com`, Deps{})
	raw, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(raw, cc.Config())
	defer tc.Close()
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	var g [1]byte
	if _, err := io.ReadFull(tc, g[:]); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Write(payload); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-records:
		if n != 1 {
			t.Errorf("a write of %d bytes came in %d records; want 1 (-1: the server failed)", len(payload), n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not read the payload")
	}
}
