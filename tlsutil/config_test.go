package tlsutil

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/tlsutil/tlstest"
)

func TestUpstreamConversionErrors(t *testing.T) {
	const p = upstreamPath + ".common_tls_context"
	tests := []struct {
		name, config, want string
	}{
		{"unknown cipher", "common_tls_context: {tls_params: {cipher_suites: [ECDHE-RSA-AES128-GCM-SHA256, RC4-MD5]}}",
			p + `.tls_params.cipher_suites[1] = "RC4-MD5": unknown or unsupported cipher suite "RC4-MD5"; must be a BoringSSL TLS 1.0-1.2 cipher name such as ECDHE-RSA-AES128-GCM-SHA256`},
		{"unknown curve", "common_tls_context: {tls_params: {ecdh_curves: [P-224]}}",
			p + `.tls_params.ecdh_curves[0] = "P-224": unknown or unsupported curve "P-224"; must be one of X25519, P-256, P-384, P-521, X25519MLKEM768`},
		{"min above max", "common_tls_context: {tls_params: {tls_minimum_protocol_version: TLSv1_3}}",
			p + `.tls_params.tls_minimum_protocol_version = TLSv1_3; must not be above tls_maximum_protocol_version (TLSv1_2)`},
		{"SAN without trusted_ca", "common_tls_context: {validation_context: {match_subject_alt_names: [{exact: a}]}}",
			p + `.validation_context: subject alt name matching without trusted_ca is insecure and not allowed`},
		{"both SAN forms", "common_tls_context: {validation_context: {trusted_ca: {filename: /ca}, match_subject_alt_names: [{exact: a}], match_typed_subject_alt_names: [{san_type: DNS, matcher: {exact: a}}]}}",
			p + `.validation_context: match_typed_subject_alt_names and match_subject_alt_names are both set; only one may be`},
		{"bad regex", "common_tls_context: {validation_context: {trusted_ca: {filename: /ca}, match_typed_subject_alt_names: [{san_type: DNS, matcher: {safe_regex: {regex: '('}}}]}}",
			p + `.validation_context.match_typed_subject_alt_names[0].matcher.safe_regex.regex = "(": invalid regex: error parsing regexp: missing closing ): ` + "`(`"},
		{"OTHER_NAME", "common_tls_context: {validation_context: {trusted_ca: {filename: /ca}, match_typed_subject_alt_names: [{san_type: OTHER_NAME, matcher: {exact: a}}]}}",
			p + `.validation_context.match_typed_subject_alt_names[0].san_type = OTHER_NAME; must be one of DNS, URI, EMAIL, IP_ADDRESS`},
		{"crl without trusted_ca", "common_tls_context: {validation_context: {crl: {filename: /crl}}}",
			p + `.validation_context.crl: set without trusted_ca; a CRL needs a trusted CA`},
		{"allow_expired without trusted_ca", "common_tls_context: {validation_context: {allow_expired_certificate: true}}",
			p + `.validation_context.allow_expired_certificate: set without trusted_ca; certificate validity is always ignored without a trusted CA`},
		{"bad hash", "common_tls_context: {validation_context: {verify_certificate_hash: [abcd]}}",
			p + `.validation_context.verify_certificate_hash[0] = "abcd"; must be a hex SHA-256 digest (64 digits, optional ':' separators)`},
		{"two client certificates", "common_tls_context: {tls_certificates: [{certificate_chain: {filename: a}, private_key: {filename: b}}], tls_certificate_sds_secret_configs: [{name: c}]}",
			upstreamPath + `.common_tls_context: 2 certificates; a client context takes at most one`},
		{"certificate without key", "common_tls_context: {tls_certificates: [{certificate_chain: {filename: a}}]}",
			p + `.tls_certificates[0].private_key: missing; a certificate needs a private key`},
		{"private key provider", "common_tls_context: {tls_certificates: [{certificate_chain: {filename: a}, private_key_provider: {provider_name: x}}]}",
			p + `.tls_certificates[0].private_key_provider: not supported`},
		{"empty sds name", "common_tls_context: {validation_context_sds_secret_config: {name: ''}}",
			p + `.validation_context_sds_secret_config.name: empty; must name a secret`},
		{"empty alpn", "common_tls_context: {alpn_protocols: ['']}",
			p + `.alpn_protocols[0] = ""; must be 1 to 255 bytes`},
		{"custom validator", "common_tls_context: {validation_context: {custom_validator_config: {name: spiffe}}}",
			p + `.validation_context.custom_validator_config: not supported`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := upstreamConfig(t, tt.config)
			if err == nil {
				t.Fatalf("UpstreamFromProto succeeded; want error %q", tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Fatalf("error\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestDownstreamConversionErrors(t *testing.T) {
	tests := []struct {
		name, config, want string
	}{
		{"no certificate", "{}", downstreamPath + `.common_tls_context: no tls_certificates or tls_certificate_sds_secret_configs; a server context needs one`},
		{"empty ticket keys", "common_tls_context: {tls_certificate_sds_secret_configs: [{name: a}]}\nsession_ticket_keys: {}",
			downstreamPath + `.session_ticket_keys.keys: empty; must hold at least one key`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := downstreamConfig(t, tt.config)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("DownstreamFromProto error %v; want %s", err, tt.want)
			}
		})
	}
}

func TestParams(t *testing.T) {
	tests := []struct {
		name   string
		config string
		server bool
		want   Params
	}{
		{"client defaults", "{}", false, Params{tls.VersionTLS12, tls.VersionTLS12, defaultCipherSuites, defaultCurves}},
		{"server defaults", "{}", true, Params{tls.VersionTLS12, tls.VersionTLS13, defaultCipherSuites, defaultCurves}},
		{"explicit", `{tls_minimum_protocol_version: TLSv1_0, tls_maximum_protocol_version: TLSv1_3,
			cipher_suites: ["[ECDHE-ECDSA-AES128-GCM-SHA256|ECDHE-ECDSA-CHACHA20-POLY1305]", "AES128-SHA:DES-CBC3-SHA"],
			ecdh_curves: [X25519MLKEM768, "P-384:secp521r1"]}`, false,
			Params{tls.VersionTLS10, tls.VersionTLS13,
				[]uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_RSA_WITH_AES_128_CBC_SHA, tls.TLS_RSA_WITH_3DES_EDE_CBC_SHA},
				[]tls.CurveID{tls.X25519MLKEM768, tls.CurveP384, tls.CurveP521}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pb tlsv3.TlsParameters
			decodeYAML(t, tt.config, &pb)
			got, err := paramsFromProto("tls_params", &pb, tt.server)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("paramsFromProto (-want +got):\n%s", d)
			}
		})
	}
}

// TestCertificateSources loads one certificate from every DataSource kind
// and every key type, and checks what /certs would call its path.
func TestCertificateSources(t *testing.T) {
	dir := t.TempDir()
	for _, kt := range []struct {
		name string
		key  tlstest.KeyType
	}{{"ecdsa", tlstest.ECDSA}, {"rsa", tlstest.RSA}, {"ed25519", tlstest.Ed25519}} {
		c := tlstest.SelfSigned(t, tlstest.Options{Key: kt.key, DNSNames: []string{kt.name + ".example.com"}})
		certFile := writeFile(t, dir, kt.name+".pem", c.CertPEM)
		keyFile := writeFile(t, dir, kt.name+".key", c.KeyPEM)
		env := map[string]string{"CERT": string(c.CertPEM), "KEY": string(c.KeyPEM)}
		sources := []struct {
			name, chain, key, wantPath string
		}{
			{"filename", fmt.Sprintf("{filename: %s}", certFile), fmt.Sprintf("{filename: %s}", keyFile), certFile},
			{"inline_bytes", fmt.Sprintf("{inline_bytes: %s}", b64(c.CertPEM)), fmt.Sprintf("{inline_bytes: %s}", b64(c.KeyPEM)), "<inline>"},
			{"inline_string", fmt.Sprintf("{inline_string: %q}", c.CertPEM), fmt.Sprintf("{inline_string: %q}", c.KeyPEM), "<inline>"},
			{"environment_variable", "{environment_variable: CERT}", "{environment_variable: KEY}", "<inline>"},
		}
		for _, src := range sources {
			t.Run(kt.name+"/"+src.name, func(t *testing.T) {
				reg := NewRegistry(nil)
				deps := Deps{Registry: reg, LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
				s := newServer(t, fmt.Sprintf("common_tls_context: {tls_certificates: [{certificate_chain: %s, private_key: %s}]}", src.chain, src.key), deps)
				client := newClient(t, "sni: "+kt.name+".example.com\ncommon_tls_context: {tls_params: {tls_maximum_protocol_version: TLSv1_3}}", Deps{})
				r := handshake(t, s.Config(), client.Config())
				if r.clientErr != nil || r.serverErr != nil {
					t.Fatalf("handshake: client %v, server %v", r.clientErr, r.serverErr)
				}
				if !r.client.PeerCertificates[0].Equal(c.Cert) {
					t.Error("server presented another certificate")
				}
				certs := reg.Certificates()
				if len(certs) != 1 || len(certs[0].Chain) != 1 {
					t.Fatalf("registry holds %+v; want one context with one certificate", certs)
				}
				if got := certs[0].Chain[0].Path; got != src.wantPath {
					t.Errorf("path %q; want %q", got, src.wantPath)
				}
			})
		}
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	a := tlstest.SelfSigned(t, tlstest.Options{})
	b := tlstest.SelfSigned(t, tlstest.Options{})
	aCert := writeFile(t, dir, "a.pem", a.CertPEM)
	bKey := writeFile(t, dir, "b.key", b.KeyPEM)
	garbage := writeFile(t, dir, "garbage.pem", []byte("not PEM"))
	const p = upstreamPath + ".common_tls_context"
	tests := []struct {
		name, config, want string
	}{
		{"key does not match certificate",
			fmt.Sprintf("common_tls_context: {tls_certificates: [{certificate_chain: {filename: %s}, private_key: {filename: %s}}]}", aCert, bKey),
			fmt.Sprintf("%s.tls_certificates[0].private_key: does not match the public key of the certificate_chain's first certificate (serial %s)", p, serialHex(a.Cert))},
		{"missing file",
			fmt.Sprintf("common_tls_context: {tls_certificates: [{certificate_chain: {filename: %s/nope.pem}, private_key: {filename: %s}}]}", dir, bKey),
			fmt.Sprintf("%s.tls_certificates[0].certificate_chain.filename = %q: open %s/nope.pem: no such file or directory", p, dir+"/nope.pem", dir)},
		{"chain is not PEM",
			fmt.Sprintf("common_tls_context: {tls_certificates: [{certificate_chain: {filename: %s}, private_key: {filename: %s}}]}", garbage, bKey),
			p + ".tls_certificates[0].certificate_chain: no PEM CERTIFICATE block found"},
		{"key is not PEM",
			fmt.Sprintf("common_tls_context: {tls_certificates: [{certificate_chain: {filename: %s}, private_key: {inline_string: nothing}}]}", aCert),
			p + ".tls_certificates[0].private_key: no PEM private key block found"},
		{"trusted_ca is not PEM",
			fmt.Sprintf("common_tls_context: {validation_context: {trusted_ca: {filename: %s}}}", garbage),
			p + ".validation_context.trusted_ca: no PEM CERTIFICATE block found"},
		{"unset environment variable",
			"common_tls_context: {validation_context: {trusted_ca: {environment_variable: LEGATE_TEST_UNSET}}}",
			p + `.validation_context.trusted_ca.environment_variable = "LEGATE_TEST_UNSET": variable is not set`},
		{"unknown secret", "common_tls_context: {validation_context_sds_secret_config: {name: nope}}",
			p + `.validation_context_sds_secret_config.name = "nope": no secret provider; secrets come from static_resources.secrets or SDS`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := upstreamConfig(t, tt.config)
			if err != nil {
				t.Fatalf("UpstreamFromProto: %v", err)
			}
			_, err = NewClientContext(cfg, Deps{LookupEnv: func(string) (string, bool) { return "", false }})
			if err == nil || err.Error() != tt.want {
				t.Fatalf("NewClientContext error\n got %v\nwant %s", err, tt.want)
			}
		})
	}
}

// TestSecrets resolves sds_secret_config names through static secrets from
// a bootstrap's static_resources.secrets, including a combined validation
// context whose SAN matcher comes from the default half.
func TestSecrets(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, tlstest.Options{})
	srv := ca.Issue(t, tlstest.Options{DNSNames: []string{"svc.example.com"}})
	cli := ca.Issue(t, tlstest.Options{DNSNames: []string{"client.example.com"}})
	var bootstrapSecrets struct{ secrets []*tlsv3.Secret }
	for _, y := range []string{
		fmt.Sprintf("{name: server_cert, tls_certificate: {certificate_chain: {filename: %s}, private_key: {filename: %s}}}",
			writeFile(t, dir, "s.pem", srv.CertPEM), writeFile(t, dir, "s.key", srv.KeyPEM)),
		fmt.Sprintf("{name: client_cert, tls_certificate: {certificate_chain: {inline_string: %q}, private_key: {inline_string: %q}}}", cli.CertPEM, cli.KeyPEM),
		fmt.Sprintf("{name: ca, validation_context: {trusted_ca: {filename: %s}}}", writeFile(t, dir, "ca.pem", ca.CertPEM)),
		"{name: tickets, session_ticket_keys: {keys: [{inline_string: " + strings.Repeat("k", 80) + "}]}}",
	} {
		var s tlsv3.Secret
		decodeYAML(t, y, &s)
		bootstrapSecrets.secrets = append(bootstrapSecrets.secrets, &s)
	}
	secrets, err := StaticSecretsFromProto("static_resources.secrets", bootstrapSecrets.secrets)
	if err != nil {
		t.Fatal(err)
	}
	reg := NewRegistry(nil)
	deps := Deps{Secrets: secrets, Registry: reg}
	server := newServer(t, `
require_client_certificate: true
session_ticket_keys_sds_secret_config: {name: tickets}
common_tls_context:
  tls_certificate_sds_secret_configs: [{name: server_cert}]
  validation_context_sds_secret_config: {name: ca}`, deps)
	tests := []struct {
		name, san string
		wantErr   error
	}{
		{"default SAN matches", "svc.example.com", nil},
		{"default SAN mismatches", "other.example.com", ErrVerifySAN},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := newClient(t, fmt.Sprintf(`
common_tls_context:
  tls_certificate_sds_secret_configs: [{name: client_cert}]
  combined_validation_context:
    default_validation_context: {match_typed_subject_alt_names: [{san_type: DNS, matcher: {exact: %s}}]}
    validation_context_sds_secret_config: {name: ca}`, tt.san), deps)
			r := handshake(t, server.Config(), client.Config())
			if !errors.Is(r.clientErr, tt.wantErr) {
				t.Fatalf("client error %v; want %v", r.clientErr, tt.wantErr)
			}
			if tt.wantErr == nil && (r.serverErr != nil || len(r.server.PeerCertificates) != 1) {
				t.Fatalf("server error %v with %d client certificates; want none and 1", r.serverErr, len(r.server.PeerCertificates))
			}
		})
	}
	if n := len(reg.Certificates()); n != 1 {
		t.Errorf("registry lists %d contexts after the clients closed; want 1 (the server)", n)
	}

	t.Run("wrong secret kind", func(t *testing.T) {
		cfg, err := upstreamConfig(t, "common_tls_context: {tls_certificate_sds_secret_configs: [{name: ca}]}")
		if err != nil {
			t.Fatal(err)
		}
		_, err = NewClientContext(cfg, deps)
		want := upstreamPath + `.common_tls_context.tls_certificate_sds_secret_configs[0].name = "ca": secret holds no tls_certificate`
		if err == nil || err.Error() != want {
			t.Fatalf("error %v; want %s", err, want)
		}
	})
	t.Run("duplicate names", func(t *testing.T) {
		_, err := StaticSecretsFromProto("static_resources.secrets", append(bootstrapSecrets.secrets, proto.Clone(bootstrapSecrets.secrets[0]).(*tlsv3.Secret)))
		want := `static_resources.secrets[4].name = "server_cert": repeated; secret names must be unique`
		if err == nil || err.Error() != want {
			t.Fatalf("error %v; want %s", err, want)
		}
	})
}

// TestSessionTicketKeys: two server contexts sharing configured keys resume
// each other's sessions; with their own random keys they do not.
func TestSessionTicketKeys(t *testing.T) {
	c := tlstest.SelfSigned(t, tlstest.Options{DNSNames: []string{"a.example.com"}})
	cert := fmt.Sprintf("common_tls_context: {tls_certificates: [{certificate_chain: {inline_string: %q}, private_key: {inline_string: %q}}]}", c.CertPEM, c.KeyPEM)
	key := strings.Repeat("x", 80)
	shared := cert + "\nsession_ticket_keys: {keys: [{inline_string: " + key + "}]}"
	tests := []struct {
		name       string
		a, b       string
		wantResume bool
	}{
		{"shared keys resume", shared, shared, true},
		{"random keys do not", cert, cert, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := newServer(t, tt.a, Deps{}), newServer(t, tt.b, Deps{})
			client := newClient(t, "sni: a.example.com", Deps{})
			if r := handshake(t, a.Config(), client.Config()); r.clientErr != nil || r.client.DidResume {
				t.Fatalf("first handshake: error %v, resumed %v; want a full handshake", r.clientErr, r.client.DidResume)
			}
			r := handshake(t, b.Config(), client.Config())
			if r.clientErr != nil {
				t.Fatal(r.clientErr)
			}
			if r.client.DidResume != tt.wantResume {
				t.Errorf("second handshake resumed = %v; want %v", r.client.DidResume, tt.wantResume)
			}
		})
	}
	t.Run("key length", func(t *testing.T) {
		cfg, err := downstreamConfig(t, cert+"\nsession_ticket_keys: {keys: [{inline_string: short}]}")
		if err != nil {
			t.Fatal(err)
		}
		_, err = NewServerContext(cfg, Deps{})
		want := downstreamPath + ".session_ticket_keys.keys[0]: key is 5 bytes; must be 80"
		if err == nil || err.Error() != want {
			t.Fatalf("error %v; want %s", err, want)
		}
	})
}

func TestDNSNameMatch(t *testing.T) {
	tests := []struct {
		name, pattern string
		want          bool
	}{
		{"a.example.com", "a.example.com", true},
		{"A.Example.COM", "a.example.com", true},
		{"a.example.com", "*.example.com", true},
		{"a.b.example.com", "*.example.com", false},
		{"example.com", "*.example.com", false},
		{"api.example.com", "a*.example.com", true},
		{"web.example.com", "a*.example.com", false},
		{"xn--a.example.com", "xn--*.example.com", false},
		{"a.example.com", "*.*.com", false},
		{"a", "*", false},
	}
	for _, tt := range tests {
		t.Run(tt.name+"~"+tt.pattern, func(t *testing.T) {
			if got := dnsNameMatch(tt.name, tt.pattern); got != tt.want {
				t.Errorf("dnsNameMatch(%q, %q) = %v; want %v", tt.name, tt.pattern, got, tt.want)
			}
		})
	}
}

func TestUpstream(t *testing.T) {
	var ts struct{ raw, tlsSock, other string }
	ts.raw = "{name: envoy.transport_sockets.raw_buffer}"
	ts.tlsSock = "{name: envoy.transport_sockets.tls, typed_config: {'@type': type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext, sni: x.example.com}}"
	ts.other = "{name: alts, typed_config: {'@type': type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext}}"
	for _, tt := range []struct {
		name, yaml, wantSNI, wantErr string
		wantNil                      bool
	}{
		{"raw buffer", ts.raw, "", "", true},
		{"tls without typed_config", "{name: envoy.transport_sockets.tls}", "", "", false},
		{"unknown without typed_config", "{name: alts}", "", `clusters[0].transport_socket.typed_config: missing for transport socket "alts"`, false},
		{"tls", ts.tlsSock, "x.example.com", "", false},
		{"wrong type", ts.other, "", `clusters[0].transport_socket.typed_config.@type = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext"; must be envoy.extensions.transport_sockets.internal_upstream.v3.InternalUpstreamTransport, envoy.extensions.transport_sockets.proxy_protocol.v3.ProxyProtocolUpstreamTransport, envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer or envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var pb corev3.TransportSocket
			decodeYAML(t, tt.yaml, &pb)
			got, err := Upstream(nil, "clusters[0].transport_socket", &pb)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v; want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != tt.wantNil {
				t.Fatalf("got %+v; want nil = %v", got, tt.wantNil)
			}
			if got != nil && got.SNI != tt.wantSNI {
				t.Errorf("SNI %q; want %q", got.SNI, tt.wantSNI)
			}
		})
	}
}
