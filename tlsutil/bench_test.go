package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/legateproxy/legate/tlsutil/tlstest"
)

func BenchmarkUpstreamFromProto(b *testing.B) {
	var pb tlsv3.UpstreamTlsContext
	decodeYAML(b, `
sni: backend.example.com
common_tls_context:
  alpn_protocols: [h2, http/1.1]
  tls_params: {tls_maximum_protocol_version: TLSv1_3, cipher_suites: ["[ECDHE-ECDSA-AES128-GCM-SHA256|ECDHE-ECDSA-CHACHA20-POLY1305]"]}
  validation_context:
    trusted_ca: {filename: /etc/ssl/ca.pem}
    match_typed_subject_alt_names: [{san_type: DNS, matcher: {exact: backend.example.com}}, {san_type: URI, matcher: {prefix: 'spiffe://'}}]`, &pb)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := UpstreamFromProto("p", &pb); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerify is the per-handshake cost of Envoy-style verification of
// a CA-issued leaf against trusted_ca with a URI SAN matcher.
func BenchmarkVerify(b *testing.B) {
	root := tlstest.NewCA(b, tlstest.Options{})
	leaf := root.Issue(b, tlstest.Options{DNSNames: []string{"a.example.com", "b.example.com"}, URIs: []string{"spiffe://example.com/x"}})
	cfg, err := upstreamConfig(b, fmt.Sprintf(`common_tls_context: {validation_context: {trusted_ca: {inline_string: %q},
  match_typed_subject_alt_names: [{san_type: URI, matcher: {exact: 'spiffe://example.com/x'}}]}}`, root.CertPEM))
	if err != nil {
		b.Fatal(err)
	}
	c, err := NewClientContext(cfg, Deps{})
	if err != nil {
		b.Fatal(err)
	}
	v := c.st.cur.Load().verify
	b.ReportAllocs()
	for b.Loop() {
		if err := v.verify([]*x509.Certificate{leaf.Cert}, ""); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHandshake is a full TLS 1.3 ECDSA handshake over 127.0.0.1 between
// a ServerContext and a verifying ClientContext, resumption off.
func BenchmarkHandshake(b *testing.B) {
	root := tlstest.NewCA(b, tlstest.Options{})
	leaf := root.Issue(b, tlstest.Options{DNSNames: []string{"l.example.com"}})
	s := newServer(b, fmt.Sprintf("common_tls_context: {tls_certificates: [{certificate_chain: {inline_string: %q}, private_key: {inline_string: %q}}]}", leaf.CertPEM, leaf.KeyPEM), Deps{})
	c := newClient(b, fmt.Sprintf(`sni: l.example.com
max_session_keys: 0
common_tls_context: {tls_params: {tls_maximum_protocol_version: TLSv1_3}, validation_context: {trusted_ca: {inline_string: %q}}}`, root.CertPEM), Deps{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			tc := tls.Server(conn, s.Config())
			tc.Handshake()
			tc.Close()
		}
	}()
	b.ReportAllocs()
	for b.Loop() {
		conn, err := tls.Dial("tcp", ln.Addr().String(), c.Config())
		if err != nil {
			b.Fatal(err)
		}
		conn.Close()
	}
	ln.Close()
	<-done
}
