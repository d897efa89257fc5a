package tlsutil

import (
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/xds/watch"
)

// FuzzUpstreamFromProto feeds arbitrary bytes through proto.Unmarshal into
// an UpstreamTlsContext (and a DownstreamTlsContext and Secret); converting
// must never panic, and a converted context must load or fail cleanly.
func FuzzUpstreamFromProto(f *testing.F) {
	seeds := []proto.Message{
		&tlsv3.UpstreamTlsContext{Sni: "a.example.com"},
	}
	for _, y := range []string{
		"{sni: x, common_tls_context: {alpn_protocols: [h2], tls_params: {cipher_suites: ['[ECDHE-RSA-AES128-GCM-SHA256|AES128-SHA]'], ecdh_curves: [X25519]}}}",
		"{common_tls_context: {validation_context: {trusted_ca: {inline_string: x}, match_typed_subject_alt_names: [{san_type: DNS, matcher: {safe_regex: {regex: 'a.*'}}}], verify_certificate_hash: ['" + "00000000000000000000000000000000000000000000000000000000000000ff']}}}",
		"{common_tls_context: {combined_validation_context: {default_validation_context: {match_subject_alt_names: [{prefix: a}]}, validation_context_sds_secret_config: {name: s}}, tls_certificate_sds_secret_configs: [{name: c}]}}",
		"{common_tls_context: {tls_certificates: [{certificate_chain: {inline_string: x}, private_key: {environment_variable: K}}]}, max_session_keys: 3}",
	} {
		var pb tlsv3.UpstreamTlsContext
		decodeYAML(f, y, &pb)
		seeds = append(seeds, &pb)
	}
	for _, s := range seeds {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	deps := Deps{
		ReadFile:  func(string) ([]byte, error) { return []byte("not a certificate"), nil },
		LookupEnv: func(string) (string, bool) { return "", true },
		Secrets:   StaticSecrets{},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var up tlsv3.UpstreamTlsContext
		if proto.Unmarshal(data, &up) == nil {
			if cfg, err := UpstreamFromProto("u", &up); err == nil {
				if c, err := NewClientContext(cfg, deps); err == nil {
					c.Close()
				}
			}
		}
		var down tlsv3.DownstreamTlsContext
		if proto.Unmarshal(data, &down) == nil {
			if cfg, err := DownstreamFromProto("d", &down); err == nil {
				if s, err := NewServerContext(cfg, deps); err == nil {
					s.Close()
				}
			}
		}
		var sec tlsv3.Secret
		if proto.Unmarshal(data, &sec) == nil {
			SecretFromProto("s", &sec)
		}
	})
}

// FuzzDecodeSecret decodes bytes as an SDS resource: a success always carries the secret's
// non-empty name.
func FuzzDecodeSecret(f *testing.F) {
	f.Add([]byte{0x0a, 0x01, 's'})
	f.Fuzz(func(t *testing.T, data []byte) {
		if pb, s, err := DecodeSecret(&anypb.Any{TypeUrl: watch.SecretType, Value: data}); err == nil && (pb.GetName() == "" || s.Name != pb.GetName()) {
			t.Errorf("DecodeSecret succeeded with %v, %+v", pb, s)
		}
	})
}
