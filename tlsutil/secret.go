package tlsutil

import (
	"fmt"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// Secret is Envoy's tls.v3.Secret: a named certificate, validation context
// or set of session ticket keys that contexts refer to by
// sds_secret_config name. Exactly one of the three is set.
type Secret struct {
	Name              string
	Certificate       *CertificateConfig
	Validation        *ValidationConfig
	SessionTicketKeys []DataSource
}

// SecretProvider resolves sds_secret_config names. Static secrets from the
// bootstrap implement it, and SDS (static, then SDS secrets). Secret is called
// from Reload and context construction, possibly concurrently, and must not
// block on the network.
type SecretProvider interface {
	// Secret returns the current secret called name, or false when none is
	// known (yet).
	Secret(name string) (Secret, bool)
}

// StaticSecrets is the bootstrap's static_resources.secrets by name. It is
// read-only once built and safe for concurrent use.
type StaticSecrets map[string]Secret

// Secret implements SecretProvider.
func (s StaticSecrets) Secret(name string) (Secret, bool) {
	v, ok := s[name]
	return v, ok
}

// StaticSecretsFromProto converts static_resources.secrets; path names that
// list. Names must be unique and non-empty.
func StaticSecretsFromProto(path string, pbs []*tlsv3.Secret) (StaticSecrets, error) {
	out := make(StaticSecrets, len(pbs))
	for i, pb := range pbs {
		s, err := SecretFromProto(fmt.Sprintf("%s[%d]", path, i), pb)
		if err != nil {
			return nil, err
		}
		if _, dup := out[s.Name]; dup {
			return nil, fmt.Errorf("%s[%d].name = %q: repeated; secret names must be unique", path, i, s.Name)
		}
		out[s.Name] = s
	}
	return out, nil
}

// SecretFromProto converts one Secret; path names the message.
func SecretFromProto(path string, pb *tlsv3.Secret) (Secret, error) {
	s := Secret{Name: pb.GetName()}
	if s.Name == "" {
		return s, fmt.Errorf("%s.name: empty; a secret needs a name", path)
	}
	switch t := pb.GetType().(type) {
	case *tlsv3.Secret_TlsCertificate:
		c, err := certificateFromProto(path+".tls_certificate", t.TlsCertificate)
		if err != nil {
			return s, err
		}
		s.Certificate = &c
	case *tlsv3.Secret_ValidationContext:
		v, err := validationFromProto(path+".validation_context", t.ValidationContext)
		if err != nil {
			return s, err
		}
		s.Validation = &v
	case *tlsv3.Secret_SessionTicketKeys:
		keys, err := ticketKeysFromProto(path+".session_ticket_keys", t.SessionTicketKeys)
		if err != nil {
			return s, err
		}
		s.SessionTicketKeys = keys
	default:
		return s, fmt.Errorf("%s: no tls_certificate, validation_context or session_ticket_keys; generic_secret is not usable by TLS contexts", path)
	}
	return s, nil
}
