package tlsutil

import (
	"crypto/tls"
	"fmt"
	"strings"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// Params is Envoy's TlsParameters with defaults applied: protocol versions,
// TLS 1.0–1.2 cipher suites and key-exchange groups. signature_algorithms and
// compliance_policies have no Go equivalent and are accepted but not applied.
// The zero value (as in a hand-built config) leaves crypto/tls's defaults.
type Params struct {
	MinVersion, MaxVersion uint16 // tls.VersionTLS10 … tls.VersionTLS13
	// CipherSuites applies to TLS 1.0–1.2 only, as in Envoy; Go does not let
	// TLS 1.3 suites be chosen.
	CipherSuites []uint16
	Curves       []tls.CurveID
}

// Envoy's defaults: TLS 1.2 minimum for both sides, TLS 1.2 maximum for
// clients and 1.3 for servers; the non-FIPS cipher list and X25519, P-256.
var (
	defaultCipherSuites = []uint16{
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
		tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	}
	defaultCurves = []tls.CurveID{tls.X25519, tls.CurveP256}
)

// cipherNames maps BoringSSL cipher names to Go's suites.
var cipherNames = map[string]uint16{
	"ECDHE-ECDSA-AES128-GCM-SHA256": tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	"ECDHE-RSA-AES128-GCM-SHA256":   tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	"ECDHE-ECDSA-AES256-GCM-SHA384": tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	"ECDHE-RSA-AES256-GCM-SHA384":   tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	"ECDHE-ECDSA-CHACHA20-POLY1305": tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	"ECDHE-RSA-CHACHA20-POLY1305":   tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	"ECDHE-ECDSA-AES128-SHA":        tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA,
	"ECDHE-RSA-AES128-SHA":          tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,
	"ECDHE-ECDSA-AES256-SHA":        tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA,
	"ECDHE-RSA-AES256-SHA":          tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA,
	"ECDHE-ECDSA-AES128-SHA256":     tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256,
	"ECDHE-RSA-AES128-SHA256":       tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256,
	"AES128-GCM-SHA256":             tls.TLS_RSA_WITH_AES_128_GCM_SHA256,
	"AES256-GCM-SHA384":             tls.TLS_RSA_WITH_AES_256_GCM_SHA384,
	"AES128-SHA":                    tls.TLS_RSA_WITH_AES_128_CBC_SHA,
	"AES256-SHA":                    tls.TLS_RSA_WITH_AES_256_CBC_SHA,
	"AES128-SHA256":                 tls.TLS_RSA_WITH_AES_128_CBC_SHA256,
	"DES-CBC3-SHA":                  tls.TLS_RSA_WITH_3DES_EDE_CBC_SHA,
}

// curveNames maps BoringSSL group names (and their OpenSSL aliases) to Go's.
var curveNames = map[string]tls.CurveID{
	"X25519":         tls.X25519,
	"P-256":          tls.CurveP256,
	"prime256v1":     tls.CurveP256,
	"P-384":          tls.CurveP384,
	"secp384r1":      tls.CurveP384,
	"P-521":          tls.CurveP521,
	"secp521r1":      tls.CurveP521,
	"X25519MLKEM768": tls.X25519MLKEM768,
}

var protocolVersions = map[tlsv3.TlsParameters_TlsProtocol]uint16{
	tlsv3.TlsParameters_TLSv1_0: tls.VersionTLS10,
	tlsv3.TlsParameters_TLSv1_1: tls.VersionTLS11,
	tlsv3.TlsParameters_TLSv1_2: tls.VersionTLS12,
	tlsv3.TlsParameters_TLSv1_3: tls.VersionTLS13,
}

// paramsFromProto converts tls_params; server selects the TLS 1.3 default
// maximum. path names the tls_params field.
func paramsFromProto(path string, pb *tlsv3.TlsParameters, server bool) (Params, error) {
	p := Params{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12}
	if server {
		p.MaxVersion = tls.VersionTLS13
	}
	var err error
	if p.MinVersion, err = protocolVersion(path+".tls_minimum_protocol_version", pb.GetTlsMinimumProtocolVersion(), p.MinVersion); err != nil {
		return p, err
	}
	if p.MaxVersion, err = protocolVersion(path+".tls_maximum_protocol_version", pb.GetTlsMaximumProtocolVersion(), p.MaxVersion); err != nil {
		return p, err
	}
	if p.MinVersion > p.MaxVersion {
		return p, fmt.Errorf("%s.tls_minimum_protocol_version = %s; must not be above tls_maximum_protocol_version (%s)",
			path, versionName(p.MinVersion), versionName(p.MaxVersion))
	}
	p.CipherSuites = defaultCipherSuites
	if names := pb.GetCipherSuites(); len(names) > 0 {
		if p.CipherSuites, err = cipherSuites(path+".cipher_suites", names); err != nil {
			return p, err
		}
	}
	p.Curves = defaultCurves
	if names := pb.GetEcdhCurves(); len(names) > 0 {
		if p.Curves, err = curves(path+".ecdh_curves", names); err != nil {
			return p, err
		}
	}
	return p, nil
}

func protocolVersion(path string, v tlsv3.TlsParameters_TlsProtocol, def uint16) (uint16, error) {
	if v == tlsv3.TlsParameters_TLS_AUTO {
		return def, nil
	}
	if ver, ok := protocolVersions[v]; ok {
		return ver, nil
	}
	return 0, fmt.Errorf("%s = %d; must be one of TLS_AUTO, TLSv1_0, TLSv1_1, TLSv1_2, TLSv1_3", path, int32(v))
}

func versionName(v uint16) string {
	for pb, ver := range protocolVersions {
		if ver == v {
			return pb.String()
		}
	}
	return fmt.Sprintf("0x%04x", v)
}

// cipherSuites parses Envoy's cipher list: each entry is a name, an
// equal-preference group "[A|B]", or several of those joined by ':'.
func cipherSuites(path string, entries []string) ([]uint16, error) {
	var out []uint16
	for i, entry := range entries {
		for name := range strings.SplitSeq(entry, ":") {
			name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
			for one := range strings.SplitSeq(name, "|") {
				id, ok := cipherNames[one]
				if !ok {
					return nil, fmt.Errorf("%s[%d] = %q: unknown or unsupported cipher suite %q; must be a BoringSSL TLS 1.0-1.2 cipher name such as ECDHE-RSA-AES128-GCM-SHA256", path, i, entry, one)
				}
				out = append(out, id)
			}
		}
	}
	return out, nil
}

func curves(path string, entries []string) ([]tls.CurveID, error) {
	var out []tls.CurveID
	for i, entry := range entries {
		for name := range strings.SplitSeq(entry, ":") {
			id, ok := curveNames[name]
			if !ok {
				return nil, fmt.Errorf("%s[%d] = %q: unknown or unsupported curve %q; must be one of X25519, P-256, P-384, P-521, X25519MLKEM768", path, i, entry, name)
			}
			out = append(out, id)
		}
	}
	return out, nil
}
