package tlsutil

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/legateproxy/legate/tlsutil/tlstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestUpstreamVerification dials a Go TLS server with clients built from
// UpstreamTlsContext YAML: verification only with trusted_ca, SAN rules,
// expiry, pins and CRLs.
func TestUpstreamVerification(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, tlstest.Options{})
	otherCA := tlstest.NewCA(t, tlstest.Options{CommonName: "Other CA"})
	good := ca.Issue(t, tlstest.Options{
		CommonName: "backend",
		DNSNames:   []string{"backend.example.com", "*.svc.example.com"},
		URIs:       []string{"spiffe://example.com/ns/web/sa/backend"},
		IPs:        []string{"127.0.0.1"},
		Emails:     []string{"ops@example.com"},
	})
	expired := ca.Issue(t, tlstest.Options{DNSNames: []string{"backend.example.com"},
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	revoked := ca.Issue(t, tlstest.Options{DNSNames: []string{"backend.example.com"}})
	selfSigned := tlstest.SelfSigned(t, tlstest.Options{DNSNames: []string{"self.example.com"}})
	caFile := writeFile(t, dir, "ca.pem", ca.CertPEM)
	otherFile := writeFile(t, dir, "other.pem", otherCA.CertPEM)
	crlFile := writeFile(t, dir, "crl.pem", ca.CRL(t, revoked))
	leafHash := sha256.Sum256(good.Cert.Raw)
	spki := sha256.Sum256(good.Cert.RawSubjectPublicKeyInfo)

	validation := func(extra string) string {
		return fmt.Sprintf("common_tls_context:\n  validation_context:\n    trusted_ca: {filename: %s}\n%s", caFile, extra)
	}
	tests := []struct {
		name    string
		server  *tlstest.Cert
		config  string
		wantErr error
	}{
		{"no trusted_ca accepts a self-signed certificate", selfSigned, `sni: whatever.example.com`, nil},
		{"no trusted_ca accepts an expired certificate", expired, `{}`, nil},
		{"trusted_ca accepts a certificate it issued", good, validation(""), nil},
		{"trusted_ca from another CA rejects", good,
			fmt.Sprintf("common_tls_context: {validation_context: {trusted_ca: {filename: %s}}}", otherFile), ErrVerifyChain},
		{"trusted_ca rejects a self-signed certificate", selfSigned, validation(""), ErrVerifyChain},
		{"expired certificate rejected", expired, validation(""), ErrVerifyChain},
		{"expired certificate allowed", expired, validation("    allow_expired_certificate: true\n"), nil},
		{"typed DNS exact", good, validation("    match_typed_subject_alt_names: [{san_type: DNS, matcher: {exact: backend.example.com}}]\n"), nil},
		{"typed DNS exact against a wildcard SAN", good, validation("    match_typed_subject_alt_names: [{san_type: DNS, matcher: {exact: api.svc.example.com}}]\n"), nil},
		{"typed DNS mismatch", good, validation("    match_typed_subject_alt_names: [{san_type: DNS, matcher: {exact: other.example.com}}]\n"), ErrVerifySAN},
		{"typed URI prefix", good, validation("    match_typed_subject_alt_names: [{san_type: URI, matcher: {prefix: 'spiffe://example.com/ns/web/'}}]\n"), nil},
		{"typed URI against DNS value mismatch", good, validation("    match_typed_subject_alt_names: [{san_type: URI, matcher: {exact: backend.example.com}}]\n"), ErrVerifySAN},
		{"typed IP exact", good, validation("    match_typed_subject_alt_names: [{san_type: IP_ADDRESS, matcher: {exact: 127.0.0.1}}]\n"), nil},
		{"typed email suffix", good, validation("    match_typed_subject_alt_names: [{san_type: EMAIL, matcher: {suffix: '@example.com'}}]\n"), nil},
		{"typed DNS regex", good, validation("    match_typed_subject_alt_names: [{san_type: DNS, matcher: {safe_regex: {regex: 'backend\\..*'}}}]\n"), nil},
		{"typed DNS contains ignore_case", good, validation("    match_typed_subject_alt_names: [{san_type: DNS, matcher: {contains: BACKEND, ignore_case: true}}]\n"), nil},
		{"legacy matcher covers URIs", good, validation("    match_subject_alt_names: [{suffix: /sa/backend}]\n"), nil},
		{"legacy matcher mismatch", good, validation("    match_subject_alt_names: [{exact: nothing}]\n"), ErrVerifySAN},
		{"certificate hash pin", good, validation(fmt.Sprintf("    verify_certificate_hash: [%q]\n", hex.EncodeToString(leafHash[:]))), nil},
		{"SPKI pin without trusted_ca", good,
			fmt.Sprintf("common_tls_context: {validation_context: {verify_certificate_spki: [%q]}}", base64.StdEncoding.EncodeToString(spki[:])), nil},
		{"hash pin mismatch", selfSigned,
			fmt.Sprintf("common_tls_context: {validation_context: {verify_certificate_hash: [%q]}}", hex.EncodeToString(leafHash[:])), ErrVerifyHash},
		{"CRL passes an unrevoked certificate", good, validation(fmt.Sprintf("    crl: {filename: %s}\n", crlFile)), nil},
		{"CRL rejects a revoked certificate", revoked, validation(fmt.Sprintf("    crl: {filename: %s}\n", crlFile)), ErrVerifyChain},
		{"ACCEPT_UNTRUSTED still matches SANs", selfSigned,
			validation("    trust_chain_verification: ACCEPT_UNTRUSTED\n    match_typed_subject_alt_names: [{san_type: DNS, matcher: {exact: self.example.com}}]\n"), nil},
		{"max_verify_depth 0 rejects a CA-issued chain", good, validation("    max_verify_depth: 0\n"), ErrVerifyChain},
		{"max_verify_depth 1 accepts it", good, validation("    max_verify_depth: 1\n"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := newClient(t, tt.config, Deps{})
			r := handshake(t, goServer(t, tt.server.CertPEM, tt.server.KeyPEM), client.Config())
			if tt.wantErr == nil {
				if r.clientErr != nil {
					t.Fatalf("handshake error %v; want none", r.clientErr)
				}
				return
			}
			if !errors.Is(r.clientErr, tt.wantErr) {
				t.Fatalf("handshake error %v; want %v", r.clientErr, tt.wantErr)
			}
		})
	}
}

func TestSNIAndALPN(t *testing.T) {
	srv := tlstest.SelfSigned(t, tlstest.Options{DNSNames: []string{"a.example.com"}})
	tests := []struct {
		name       string
		config     string
		serverALPN []string
		wantSNI    string
		wantALPN   string
	}{
		{"sni sent", "sni: a.example.com", nil, "a.example.com", ""},
		{"no sni", "{}", nil, "", ""},
		{"h2 preferred", "common_tls_context: {alpn_protocols: [h2, http/1.1]}", []string{"h2", "http/1.1"}, "", "h2"},
		{"server only speaks http/1.1", "common_tls_context: {alpn_protocols: [h2, http/1.1]}", []string{"http/1.1"}, "", "http/1.1"},
		{"no alpn configured", "{}", []string{"h2"}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, tt.config, Deps{})
			r := handshake(t, goServer(t, srv.CertPEM, srv.KeyPEM, tt.serverALPN...), c.Config())
			if r.clientErr != nil {
				t.Fatalf("handshake: %v", r.clientErr)
			}
			if r.serverName != tt.wantSNI {
				t.Errorf("server saw SNI %q; want %q", r.serverName, tt.wantSNI)
			}
			if got := r.client.NegotiatedProtocol; got != tt.wantALPN {
				t.Errorf("negotiated protocol %q; want %q", got, tt.wantALPN)
			}
		})
	}
}

func TestAutoHostSNI(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, tlstest.Options{})
	srv := ca.Issue(t, tlstest.Options{DNSNames: []string{"web.example.com"}})
	caFile := writeFile(t, dir, "ca.pem", ca.CertPEM)
	c := newClient(t, fmt.Sprintf(`
auto_host_sni: true
auto_sni_san_validation: true
common_tls_context: {validation_context: {trusted_ca: {filename: %s}}}`, caFile), Deps{})
	for _, tt := range []struct {
		host    string
		wantErr error
	}{{"web.example.com", nil}, {"db.example.com", ErrVerifySAN}} {
		t.Run(tt.host, func(t *testing.T) {
			r := handshake(t, goServer(t, srv.CertPEM, srv.KeyPEM), c.ConfigForHost(tt.host))
			if r.serverName != tt.host {
				t.Errorf("server saw SNI %q; want %q", r.serverName, tt.host)
			}
			if !errors.Is(r.clientErr, tt.wantErr) {
				t.Errorf("handshake error %v; want %v", r.clientErr, tt.wantErr)
			}
		})
	}
	if c.ConfigForHost("web.example.com") != c.ConfigForHost("web.example.com") {
		t.Error("ConfigForHost built two configurations for one host; want one cached")
	}
}

func TestProtocolVersions(t *testing.T) {
	srv := tlstest.SelfSigned(t, tlstest.Options{})
	tests := []struct {
		name             string
		client           string
		serverMin        uint16
		serverMax        uint16
		wantVersion      uint16
		wantHandshakeErr bool
	}{
		{"client default is TLS 1.2", "{}", tls.VersionTLS12, tls.VersionTLS13, tls.VersionTLS12, false},
		{"client default cannot reach a TLS 1.3-only server", "{}", tls.VersionTLS13, tls.VersionTLS13, 0, true},
		{"client max TLSv1_3", "common_tls_context: {tls_params: {tls_maximum_protocol_version: TLSv1_3}}", tls.VersionTLS12, tls.VersionTLS13, tls.VersionTLS13, false},
		{"client min TLSv1_3 against a TLS 1.2 server", "common_tls_context: {tls_params: {tls_minimum_protocol_version: TLSv1_3, tls_maximum_protocol_version: TLSv1_3}}", tls.VersionTLS12, tls.VersionTLS12, 0, true},
		{"cipher suite limits TLS 1.2", "common_tls_context: {tls_params: {cipher_suites: [ECDHE-ECDSA-AES256-GCM-SHA384]}}", tls.VersionTLS12, tls.VersionTLS12, tls.VersionTLS12, false},
		{"curve limit", "common_tls_context: {tls_params: {ecdh_curves: [P-384], tls_maximum_protocol_version: TLSv1_3}}", tls.VersionTLS13, tls.VersionTLS13, tls.VersionTLS13, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, tt.client, Deps{})
			sc := goServer(t, srv.CertPEM, srv.KeyPEM)
			sc.MinVersion, sc.MaxVersion = tt.serverMin, tt.serverMax
			r := handshake(t, sc, c.Config())
			if tt.wantHandshakeErr {
				if r.clientErr == nil {
					t.Fatalf("handshake succeeded with version %x; want a failure", r.client.Version)
				}
				return
			}
			if r.clientErr != nil {
				t.Fatalf("handshake: %v", r.clientErr)
			}
			if r.client.Version != tt.wantVersion {
				t.Errorf("version %x; want %x", r.client.Version, tt.wantVersion)
			}
		})
	}
}

// TestClientCertificates runs a ServerContext (DownstreamTlsContext) against
// ClientContexts presenting, or not, a client certificate.
func TestClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, tlstest.Options{})
	other := tlstest.NewCA(t, tlstest.Options{CommonName: "Other"})
	srv := ca.Issue(t, tlstest.Options{DNSNames: []string{"listener.example.com"}})
	good := ca.Issue(t, tlstest.Options{URIs: []string{"spiffe://example.com/client"}})
	foreign := other.Issue(t, tlstest.Options{URIs: []string{"spiffe://example.com/client"}})
	f := func(name string, data []byte) string { return writeFile(t, dir, name, data) }
	serverCert := fmt.Sprintf("tls_certificates: [{certificate_chain: {filename: %s}, private_key: {filename: %s}}]",
		f("srv.pem", srv.CertPEM), f("srv.key", srv.KeyPEM))
	caFile := f("ca.pem", ca.CertPEM)
	clientWith := func(c *tlstest.Cert, name string) string {
		return fmt.Sprintf("common_tls_context: {tls_certificates: [{certificate_chain: {filename: %s}, private_key: {filename: %s}}]}",
			f(name+".pem", c.CertPEM), f(name+".key", c.KeyPEM))
	}
	tests := []struct {
		name      string
		server    string
		client    string
		wantErr   error // on the server side; nil: both sides succeed
		anyFail   bool  // the server fails, with an error from crypto/tls
		wantPeers int
	}{
		{"required and presented", fmt.Sprintf("require_client_certificate: true\ncommon_tls_context: {%s, validation_context: {trusted_ca: {filename: %s}}}", serverCert, caFile),
			clientWith(good, "good"), nil, false, 1},
		{"required and missing", fmt.Sprintf("require_client_certificate: true\ncommon_tls_context: {%s, validation_context: {trusted_ca: {filename: %s}}}", serverCert, caFile),
			"{}", nil, true, 0},
		{"required, wrong CA", fmt.Sprintf("require_client_certificate: true\ncommon_tls_context: {%s, validation_context: {trusted_ca: {filename: %s}}}", serverCert, caFile),
			clientWith(foreign, "foreign"), ErrVerifyChain, false, 0},
		{"optional and missing", fmt.Sprintf("common_tls_context: {%s, validation_context: {trusted_ca: {filename: %s}}}", serverCert, caFile),
			"{}", nil, false, 0},
		{"SAN checked on clients", fmt.Sprintf("common_tls_context: {%s, validation_context: {trusted_ca: {filename: %s}, match_typed_subject_alt_names: [{san_type: URI, matcher: {exact: 'spiffe://example.com/other'}}]}}", serverCert, caFile),
			clientWith(good, "good2"), ErrVerifySAN, false, 0},
		{"required without CA accepts any", fmt.Sprintf("require_client_certificate: true\ncommon_tls_context: {%s}", serverCert),
			clientWith(foreign, "foreign2"), nil, false, 1},
		{"not requested", fmt.Sprintf("common_tls_context: {%s}", serverCert), clientWith(good, "good3"), nil, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, tt.server, Deps{})
			c := newClient(t, tt.client, Deps{})
			r := handshake(t, s.Config(), c.Config())
			switch {
			case tt.anyFail:
				if r.serverErr == nil {
					t.Fatal("server handshake succeeded; want a failure")
				}
			case tt.wantErr != nil:
				if !errors.Is(r.serverErr, tt.wantErr) {
					t.Fatalf("server error %v; want %v", r.serverErr, tt.wantErr)
				}
			default:
				if r.serverErr != nil || r.clientErr != nil {
					t.Fatalf("server error %v, client error %v; want none", r.serverErr, r.clientErr)
				}
				if got := len(r.server.PeerCertificates); got != tt.wantPeers {
					t.Errorf("server saw %d client certificates; want %d", got, tt.wantPeers)
				}
			}
			if tt.wantErr != nil || tt.anyFail {
				if r.clientErr == nil {
					t.Error("client saw no failure; want the server's rejection")
				}
			}
		})
	}
}

func TestRequireSNI(t *testing.T) {
	srv := tlstest.SelfSigned(t, tlstest.Options{DNSNames: []string{"a.example.com"}})
	s := newServer(t, fmt.Sprintf("require_sni: true\ncommon_tls_context: {tls_certificates: [{certificate_chain: {inline_bytes: %q}, private_key: {inline_bytes: %q}}]}",
		b64(srv.CertPEM), b64(srv.KeyPEM)), Deps{})
	for _, tt := range []struct {
		sni     string
		wantErr error
	}{{"", ErrNoSNI}, {"a.example.com", nil}} {
		t.Run("sni="+tt.sni, func(t *testing.T) {
			c := newClient(t, fmt.Sprintf("sni: %q", tt.sni), Deps{})
			r := handshake(t, s.Config(), c.Config())
			if !errors.Is(r.serverErr, tt.wantErr) {
				t.Fatalf("server error %v; want %v", r.serverErr, tt.wantErr)
			}
		})
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
