package tlsutil

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// CertificateConfig is Envoy's TlsCertificate: a PEM certificate chain and
// its PEM private key (PKCS#1, PKCS#8 or SEC 1; RSA, ECDSA or Ed25519), with
// an optional OCSP staple and SCTs the server sends.
type CertificateConfig struct {
	CertificateChain            DataSource
	PrivateKey                  DataSource
	OCSPStaple                  DataSource
	SignedCertificateTimestamps []DataSource
}

// ValidationConfig is Envoy's CertificateValidationContext. Peer chains are
// verified only when TrustedCA is set; the SAN matchers and CRL need it. The
// certificate hash and SPKI pins apply with or without it.
type ValidationConfig struct {
	TrustedCA DataSource
	// CRL holds one or more PEM CRLs. With it, every CA in a verified chain
	// must have a CRL unless OnlyVerifyLeafCertCRL, as in BoringSSL.
	CRL                   DataSource
	OnlyVerifyLeafCertCRL bool
	SANMatchers           []SANMatcher
	// CertificateHashes are SHA-256 digests of accepted leaf certificates
	// (verify_certificate_hash); CertificateSPKIs are SHA-256 digests of
	// their SubjectPublicKeyInfo (verify_certificate_spki).
	CertificateHashes [][]byte
	CertificateSPKIs  [][]byte
	// AllowExpiredCertificate accepts chains that are valid but for time.
	AllowExpiredCertificate bool
	// AcceptUntrusted is trust_chain_verification: ACCEPT_UNTRUSTED.
	AcceptUntrusted bool
	// MaxVerifyDepth, when MaxVerifyDepthSet, limits the number of
	// certificates above the leaf (trust anchor included).
	MaxVerifyDepth    int
	MaxVerifyDepthSet bool
	// SuppressClientCAList leaves the CA names out of a server's
	// CertificateRequest.
	SuppressClientCAList bool
	// setFields records the singular fields set in the proto, so a
	// combined_validation_context merges as protobuf MergeFrom does.
	setFields validationFields
}

type validationFields uint16

const (
	setTrustedCA validationFields = 1 << iota
	setCRL
	setOnlyLeafCRL
	setAllowExpired
	setAcceptUntrusted
	setMaxDepth
	setSuppressCAList
)

// CommonConfig is Envoy's CommonTlsContext.
type CommonConfig struct {
	Params       Params
	Certificates []CertificateConfig
	// CertificateSecrets names tls_certificate_sds_secret_configs, resolved
	// through the SecretProvider on each load.
	CertificateSecrets []string
	// Validation is the static validation_context, or the default of a
	// combined_validation_context; nil when neither is set.
	Validation *ValidationConfig
	// ValidationSecret names a validation_context_sds_secret_config (or the
	// SDS half of a combined_validation_context, merged over Validation).
	ValidationSecret string
	ALPN             []string
}

// UpstreamConfig is Envoy's UpstreamTlsContext, for connections to upstream
// hosts. allow_renegotiation is accepted and ignored.
type UpstreamConfig struct {
	// Path is the field path of the context, prefixed to load errors.
	Path   string
	Common CommonConfig
	SNI    string
	// AutoHostSNI sends the host's hostname as SNI (ConfigForHost);
	// AutoSNISANValidation then requires a DNS SAN to match it.
	AutoHostSNI          bool
	AutoSNISANValidation bool
	// MaxSessionKeys is the client session cache size; 0 disables
	// resumption. Envoy's default is 1.
	MaxSessionKeys int
}

// DownstreamConfig is Envoy's DownstreamTlsContext, for a listener's
// connections. session_timeout, prefer_client_ciphers and
// disable_stateful_session_resumption have no Go equivalent and are ignored.
type DownstreamConfig struct {
	Path                     string
	Common                   CommonConfig
	RequireClientCertificate bool
	RequireSNI               bool
	// SessionTicketKeys are 80-byte keys; the first encrypts new tickets.
	SessionTicketKeys                 []DataSource
	SessionTicketKeysSecret           string
	DisableStatelessSessionResumption bool
}

// UpstreamFromProto converts and validates an UpstreamTlsContext without
// reading any file. path names the message (for example
// "static_resources.clusters[0].transport_socket.typed_config").
func UpstreamFromProto(path string, pb *tlsv3.UpstreamTlsContext) (UpstreamConfig, error) {
	cfg := UpstreamConfig{
		Path:                 path,
		SNI:                  pb.GetSni(),
		AutoHostSNI:          pb.GetAutoHostSni(),
		AutoSNISANValidation: pb.GetAutoSniSanValidation(),
		MaxSessionKeys:       1,
	}
	if len(cfg.SNI) > 255 {
		return cfg, fmt.Errorf("%s.sni: %d bytes; must be at most 255", path, len(cfg.SNI))
	}
	if m := pb.GetMaxSessionKeys(); m != nil {
		cfg.MaxSessionKeys = int(m.GetValue())
	}
	var err error
	if cfg.Common, err = commonFromProto(path+".common_tls_context", pb.GetCommonTlsContext(), false); err != nil {
		return cfg, err
	}
	if n := len(cfg.Common.Certificates) + len(cfg.Common.CertificateSecrets); n > 1 {
		return cfg, fmt.Errorf("%s.common_tls_context: %d certificates; a client context takes at most one", path, n)
	}
	return cfg, nil
}

// DownstreamFromProto converts and validates a DownstreamTlsContext without
// reading any file; a server context needs at least one certificate.
func DownstreamFromProto(path string, pb *tlsv3.DownstreamTlsContext) (DownstreamConfig, error) {
	cfg := DownstreamConfig{
		Path:                     path,
		RequireClientCertificate: pb.GetRequireClientCertificate().GetValue(),
		RequireSNI:               pb.GetRequireSni().GetValue(),
	}
	var err error
	if cfg.Common, err = commonFromProto(path+".common_tls_context", pb.GetCommonTlsContext(), true); err != nil {
		return cfg, err
	}
	if len(cfg.Common.Certificates)+len(cfg.Common.CertificateSecrets) == 0 {
		return cfg, fmt.Errorf("%s.common_tls_context: no tls_certificates or tls_certificate_sds_secret_configs; a server context needs one", path)
	}
	switch t := pb.GetSessionTicketKeysType().(type) {
	case *tlsv3.DownstreamTlsContext_SessionTicketKeys:
		if cfg.SessionTicketKeys, err = ticketKeysFromProto(path+".session_ticket_keys", t.SessionTicketKeys); err != nil {
			return cfg, err
		}
	case *tlsv3.DownstreamTlsContext_SessionTicketKeysSdsSecretConfig:
		if cfg.SessionTicketKeysSecret, err = sdsName(path+".session_ticket_keys_sds_secret_config", t.SessionTicketKeysSdsSecretConfig); err != nil {
			return cfg, err
		}
	case *tlsv3.DownstreamTlsContext_DisableStatelessSessionResumption:
		cfg.DisableStatelessSessionResumption = t.DisableStatelessSessionResumption
	}
	return cfg, nil
}

func ticketKeysFromProto(path string, pb *tlsv3.TlsSessionTicketKeys) ([]DataSource, error) {
	if len(pb.GetKeys()) == 0 {
		return nil, fmt.Errorf("%s.keys: empty; must hold at least one key", path)
	}
	out := make([]DataSource, 0, len(pb.GetKeys()))
	for i, k := range pb.GetKeys() {
		d, err := dataSourceFromProto(fmt.Sprintf("%s.keys[%d]", path, i), k)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func sdsName(path string, pb *tlsv3.SdsSecretConfig) (string, error) {
	if pb.GetName() == "" {
		return "", fmt.Errorf("%s.name: empty; must name a secret", path)
	}
	return pb.GetName(), nil
}

// unsupportedCommon reports the first set field Legate cannot honour; accepting
// it silently would weaken or change the connection's security.
func unsupportedCommon(path string, pb *tlsv3.CommonTlsContext) error {
	switch {
	case pb.GetTlsCertificateProviderInstance() != nil:
		return fmt.Errorf("%s.tls_certificate_provider_instance: certificate providers are not supported", path)
	case pb.GetTlsCertificateCertificateProvider() != nil:
		return fmt.Errorf("%s.tls_certificate_certificate_provider: certificate providers are not supported", path)
	case pb.GetTlsCertificateCertificateProviderInstance() != nil:
		return fmt.Errorf("%s.tls_certificate_certificate_provider_instance: certificate providers are not supported", path)
	case pb.GetCustomTlsCertificateSelector() != nil:
		return fmt.Errorf("%s.custom_tls_certificate_selector: not supported", path)
	case pb.GetCustomHandshaker() != nil:
		return fmt.Errorf("%s.custom_handshaker: not supported", path)
	}
	return nil
}

func commonFromProto(path string, pb *tlsv3.CommonTlsContext, server bool) (CommonConfig, error) {
	var c CommonConfig
	if err := unsupportedCommon(path, pb); err != nil {
		return c, err
	}
	var err error
	if c.Params, err = paramsFromProto(path+".tls_params", pb.GetTlsParams(), server); err != nil {
		return c, err
	}
	for i, tc := range pb.GetTlsCertificates() {
		cc, err := certificateFromProto(fmt.Sprintf("%s.tls_certificates[%d]", path, i), tc)
		if err != nil {
			return c, err
		}
		c.Certificates = append(c.Certificates, cc)
	}
	for i, s := range pb.GetTlsCertificateSdsSecretConfigs() {
		name, err := sdsName(fmt.Sprintf("%s.tls_certificate_sds_secret_configs[%d]", path, i), s)
		if err != nil {
			return c, err
		}
		c.CertificateSecrets = append(c.CertificateSecrets, name)
	}
	for i, p := range pb.GetAlpnProtocols() {
		if p == "" || len(p) > 255 {
			return c, fmt.Errorf("%s.alpn_protocols[%d] = %q; must be 1 to 255 bytes", path, i, p)
		}
	}
	c.ALPN = pb.GetAlpnProtocols()
	switch v := pb.GetValidationContextType().(type) {
	case *tlsv3.CommonTlsContext_ValidationContext:
		p := path + ".validation_context"
		vc, err := validationFromProto(p, v.ValidationContext)
		if err != nil {
			return c, err
		}
		if err := vc.check(p); err != nil {
			return c, err
		}
		c.Validation = &vc
	case *tlsv3.CommonTlsContext_ValidationContextSdsSecretConfig:
		if c.ValidationSecret, err = sdsName(path+".validation_context_sds_secret_config", v.ValidationContextSdsSecretConfig); err != nil {
			return c, err
		}
	case *tlsv3.CommonTlsContext_CombinedValidationContext:
		p := path + ".combined_validation_context"
		cv := v.CombinedValidationContext
		if cv.GetValidationContextCertificateProvider() != nil || cv.GetValidationContextCertificateProviderInstance() != nil {
			return c, fmt.Errorf("%s: certificate providers are not supported", p)
		}
		vc, err := validationFromProto(p+".default_validation_context", cv.GetDefaultValidationContext())
		if err != nil {
			return c, err
		}
		c.Validation = &vc
		if c.ValidationSecret, err = sdsName(p+".validation_context_sds_secret_config", cv.GetValidationContextSdsSecretConfig()); err != nil {
			return c, err
		}
	case nil:
	default:
		return c, fmt.Errorf("%s: validation context type %T is not supported", path, v)
	}
	return c, nil
}

func certificateFromProto(path string, pb *tlsv3.TlsCertificate) (CertificateConfig, error) {
	var c CertificateConfig
	switch {
	case pb.GetPrivateKeyProvider() != nil:
		return c, fmt.Errorf("%s.private_key_provider: not supported", path)
	case pb.GetPassword() != nil:
		return c, fmt.Errorf("%s.password: encrypted private keys are not supported", path)
	case pb.GetPkcs12() != nil:
		return c, fmt.Errorf("%s.pkcs12: not supported; use certificate_chain and private_key", path)
	}
	var err error
	if c.CertificateChain, err = dataSourceFromProto(path+".certificate_chain", pb.GetCertificateChain()); err != nil {
		return c, err
	}
	if c.PrivateKey, err = dataSourceFromProto(path+".private_key", pb.GetPrivateKey()); err != nil {
		return c, err
	}
	if !c.CertificateChain.IsSet() {
		return c, fmt.Errorf("%s.certificate_chain: missing; a certificate needs a chain", path)
	}
	if !c.PrivateKey.IsSet() {
		return c, fmt.Errorf("%s.private_key: missing; a certificate needs a private key", path)
	}
	if c.OCSPStaple, err = dataSourceFromProto(path+".ocsp_staple", pb.GetOcspStaple()); err != nil {
		return c, err
	}
	for i, s := range pb.GetSignedCertificateTimestamp() {
		d, err := dataSourceFromProto(fmt.Sprintf("%s.signed_certificate_timestamp[%d]", path, i), s)
		if err != nil {
			return c, err
		}
		c.SignedCertificateTimestamps = append(c.SignedCertificateTimestamps, d)
	}
	return c, nil
}

func validationFromProto(path string, pb *tlsv3.CertificateValidationContext) (ValidationConfig, error) {
	var v ValidationConfig
	switch {
	case pb.GetCustomValidatorConfig() != nil:
		return v, fmt.Errorf("%s.custom_validator_config: not supported", path)
	case pb.GetCaCertificateProviderInstance() != nil:
		return v, fmt.Errorf("%s.ca_certificate_provider_instance: certificate providers are not supported", path)
	case pb.GetSystemRootCerts() != nil:
		return v, fmt.Errorf("%s.system_root_certs: not supported; set trusted_ca", path)
	case pb.GetRequireSignedCertificateTimestamp().GetValue():
		return v, fmt.Errorf("%s.require_signed_certificate_timestamp: not supported", path)
	}
	var err error
	if v.TrustedCA, err = dataSourceFromProto(path+".trusted_ca", pb.GetTrustedCa()); err != nil {
		return v, err
	}
	if v.CRL, err = dataSourceFromProto(path+".crl", pb.GetCrl()); err != nil {
		return v, err
	}
	if v.SANMatchers, err = sanMatchersFromProto(path, pb); err != nil {
		return v, err
	}
	for i, h := range pb.GetVerifyCertificateHash() {
		b, err := hex.DecodeString(strings.ReplaceAll(h, ":", ""))
		if err != nil || len(b) != 32 {
			return v, fmt.Errorf("%s.verify_certificate_hash[%d] = %q; must be a hex SHA-256 digest (64 digits, optional ':' separators)", path, i, h)
		}
		v.CertificateHashes = append(v.CertificateHashes, b)
	}
	for i, s := range pb.GetVerifyCertificateSpki() {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b) != 32 {
			return v, fmt.Errorf("%s.verify_certificate_spki[%d] = %q; must be a base64 SHA-256 digest", path, i, s)
		}
		v.CertificateSPKIs = append(v.CertificateSPKIs, b)
	}
	v.OnlyVerifyLeafCertCRL = pb.GetOnlyVerifyLeafCertCrl()
	v.AllowExpiredCertificate = pb.GetAllowExpiredCertificate()
	v.SuppressClientCAList = pb.GetSuppressClientCaList()
	switch pb.GetTrustChainVerification() {
	case tlsv3.CertificateValidationContext_VERIFY_TRUST_CHAIN:
	case tlsv3.CertificateValidationContext_ACCEPT_UNTRUSTED:
		v.AcceptUntrusted = true
	default:
		return v, fmt.Errorf("%s.trust_chain_verification = %d; must be VERIFY_TRUST_CHAIN or ACCEPT_UNTRUSTED", path, int32(pb.GetTrustChainVerification()))
	}
	if d := pb.GetMaxVerifyDepth(); d != nil {
		v.MaxVerifyDepth, v.MaxVerifyDepthSet = int(d.GetValue()), true
	}
	v.setFields = fieldsSet(v)
	return v, nil
}

func fieldsSet(v ValidationConfig) validationFields {
	var f validationFields
	set := func(b bool, bit validationFields) {
		if b {
			f |= bit
		}
	}
	set(v.TrustedCA.IsSet(), setTrustedCA)
	set(v.CRL.IsSet(), setCRL)
	set(v.OnlyVerifyLeafCertCRL, setOnlyLeafCRL)
	set(v.AllowExpiredCertificate, setAllowExpired)
	set(v.AcceptUntrusted, setAcceptUntrusted)
	set(v.SuppressClientCAList, setSuppressCAList)
	set(v.MaxVerifyDepthSet, setMaxDepth)
	return f
}

// check applies Envoy's rules that need a trusted CA.
func (v *ValidationConfig) check(path string) error {
	if v.TrustedCA.IsSet() {
		return nil
	}
	switch {
	case v.CRL.IsSet():
		return fmt.Errorf("%s.crl: set without trusted_ca; a CRL needs a trusted CA", path)
	case len(v.SANMatchers) > 0:
		return fmt.Errorf("%s: subject alt name matching without trusted_ca is insecure and not allowed", path)
	case v.AllowExpiredCertificate:
		return fmt.Errorf("%s.allow_expired_certificate: set without trusted_ca; certificate validity is always ignored without a trusted CA", path)
	}
	return nil
}

// merge returns def with dyn merged over it the way protobuf MergeFrom
// merges a dynamic validation context into the default one: set singular
// fields replace, lists append.
func (def ValidationConfig) merge(dyn ValidationConfig) ValidationConfig {
	out := def
	f := dyn.setFields
	if f&setTrustedCA != 0 {
		out.TrustedCA = dyn.TrustedCA
	}
	if f&setCRL != 0 {
		out.CRL = dyn.CRL
	}
	if f&setOnlyLeafCRL != 0 {
		out.OnlyVerifyLeafCertCRL = true
	}
	if f&setAllowExpired != 0 {
		out.AllowExpiredCertificate = true
	}
	if f&setAcceptUntrusted != 0 {
		out.AcceptUntrusted = true
	}
	if f&setMaxDepth != 0 {
		out.MaxVerifyDepth, out.MaxVerifyDepthSet = dyn.MaxVerifyDepth, true
	}
	if f&setSuppressCAList != 0 {
		out.SuppressClientCAList = true
	}
	out.SANMatchers = append(append([]SANMatcher(nil), def.SANMatchers...), dyn.SANMatchers...)
	out.CertificateHashes = append(append([][]byte(nil), def.CertificateHashes...), dyn.CertificateHashes...)
	out.CertificateSPKIs = append(append([][]byte(nil), def.CertificateSPKIs...), dyn.CertificateSPKIs...)
	out.setFields = def.setFields | f
	return out
}
