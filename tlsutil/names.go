package tlsutil

import "crypto/tls"

// VersionName returns a protocol version as BoringSSL's SSL_get_version names
// it, which is how Envoy prints it (%DOWNSTREAM_TLS_VERSION%,
// ssl.versions.<name>): "TLSv1", "TLSv1.1", "TLSv1.2" or "TLSv1.3"; "" for
// anything else.
func VersionName(v uint16) string {
	switch v {
	case tls.VersionTLS10:
		return "TLSv1"
	case tls.VersionTLS11:
		return "TLSv1.1"
	case tls.VersionTLS12:
		return "TLSv1.2"
	case tls.VersionTLS13:
		return "TLSv1.3"
	}
	return ""
}

// CipherName returns a cipher suite as BoringSSL's SSL_CIPHER_get_name names
// it (%DOWNSTREAM_TLS_CIPHER%, ssl.ciphers.<name>):
// "ECDHE-RSA-AES128-GCM-SHA256" for TLS 1.2 suites, the IANA name for TLS 1.3
// ones; Go's name for a suite BoringSSL does not have; "" for 0.
func CipherName(id uint16) string {
	if id == 0 {
		return ""
	}
	if n, ok := boringCipherNames[id]; ok {
		return n
	}
	return tls.CipherSuiteName(id)
}

// boringCipherNames are BoringSSL's names of the TLS 1.2 and older suites
// crypto/tls negotiates: cipherNames (the cipher_suites spellings) turned
// around. Read-only after init.
var boringCipherNames = func() map[uint16]string {
	m := make(map[uint16]string, len(cipherNames))
	for name, id := range cipherNames {
		m[id] = name
	}
	return m
}()

// CurveName returns a key exchange group as BoringSSL's SSL_get_curve_name
// names it (ssl.curves.<name>): "P-256", "P-384", "P-521", "X25519",
// "X25519MLKEM768"; Go's name for a group BoringSSL does not have; "" for 0
// (RSA key exchange).
func CurveName(id tls.CurveID) string {
	switch id {
	case 0:
		return ""
	case tls.CurveP256:
		return "P-256"
	case tls.CurveP384:
		return "P-384"
	case tls.CurveP521:
		return "P-521"
	case tls.X25519:
		return "X25519"
	case tls.X25519MLKEM768:
		return "X25519MLKEM768"
	}
	return id.String()
}
