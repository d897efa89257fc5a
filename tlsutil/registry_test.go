package tlsutil

import (
	"fmt"
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/tlsutil/tlstest"
)

func TestRegistry(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	ca := tlstest.NewCA(t, tlstest.Options{Serial: big.NewInt(0x0a1b2c),
		NotBefore: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)})
	leaf := ca.Issue(t, tlstest.Options{
		Serial:    new(big.Int).SetBytes([]byte{0x00, 0x7f, 0x00, 0xaa}),
		IPs:       []string{"10.0.0.1", "2001:db8::1"},
		URIs:      []string{"spiffe://example.com/a"},
		DNSNames:  []string{"a.example.com", "b.example.com"},
		Emails:    []string{"not@shown.example"},
		NotBefore: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:  time.Date(2026, 1, 20, 11, 0, 0, 0, time.UTC), // 9 days 23 hours away
	})
	expired := tlstest.SelfSigned(t, tlstest.Options{Serial: big.NewInt(0),
		NotBefore: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})

	reg := NewRegistry(clock)
	if got := reg.DaysUntilFirstCertExpiring(); got != math.MaxUint32 {
		t.Errorf("empty registry DaysUntilFirstCertExpiring = %d; want %d", got, uint64(math.MaxUint32))
	}
	deps := Deps{Registry: reg, Now: clock}
	caFile := writeFile(t, dir, "ca.pem", ca.CertPEM)
	server := newServer(t, fmt.Sprintf("common_tls_context: {tls_certificates: [{certificate_chain: {inline_string: %q}, private_key: {inline_string: %q}}], validation_context: {trusted_ca: {filename: %s}}}",
		leaf.CertPEM, leaf.KeyPEM, caFile), deps)
	newClient(t, "{}", deps)

	want := []ContextCertificates{
		{
			CA: []CertificateDetails{{
				Path: caFile, SerialNumber: "0a1b2c", SANs: []SAN{}, DaysUntilExpiration: 355,
				ValidFrom: ca.Cert.NotBefore, ExpirationTime: ca.Cert.NotAfter,
			}},
			Chain: []CertificateDetails{{
				Path: "<inline>", SerialNumber: "7f00aa",
				SANs: []SAN{
					{SANDNS, "a.example.com"}, {SANDNS, "b.example.com"},
					{SANURI, "spiffe://example.com/a"},
					{SANIP, "10.0.0.1"}, {SANIP, "2001:db8::1"},
				},
				DaysUntilExpiration: 9,
				ValidFrom:           leaf.Cert.NotBefore, ExpirationTime: leaf.Cert.NotAfter,
			}},
		},
		{CA: []CertificateDetails{}, Chain: []CertificateDetails{}},
	}
	if d := cmp.Diff(want, reg.Certificates()); d != "" {
		t.Errorf("Certificates (-want +got):\n%s", d)
	}
	if got := reg.DaysUntilFirstCertExpiring(); got != 9 {
		t.Errorf("DaysUntilFirstCertExpiring = %d; want 9", got)
	}

	expiredCtx := newServer(t, fmt.Sprintf("common_tls_context: {tls_certificates: [{certificate_chain: {inline_string: %q}, private_key: {inline_string: %q}}]}", expired.CertPEM, expired.KeyPEM), deps)
	got := reg.Certificates()[2].Chain[0]
	if got.DaysUntilExpiration != 0 || got.SerialNumber != "0" {
		t.Errorf("expired certificate: days %d, serial %q; want 0 and \"0\"", got.DaysUntilExpiration, got.SerialNumber)
	}
	if got := reg.DaysUntilFirstCertExpiring(); got != 0 {
		t.Errorf("DaysUntilFirstCertExpiring with an expired certificate = %d; want 0", got)
	}
	expiredCtx.Close()
	server.Close()
	if n := len(reg.Certificates()); n != 1 {
		t.Errorf("after closing two contexts the registry lists %d; want 1", n)
	}
}

func TestSerialHex(t *testing.T) {
	for _, tt := range []struct {
		serial *big.Int
		want   string
	}{
		{big.NewInt(0), "0"},
		{big.NewInt(1), "01"},
		{big.NewInt(0xabc), "0abc"},
		{new(big.Int).SetBytes([]byte{0x00, 0x00, 0xff, 0x01}), "ff01"},
		{big.NewInt(-0x1f), "-1f"},
	} {
		t.Run(tt.want, func(t *testing.T) {
			c := tlstest.SelfSigned(t, tlstest.Options{})
			c.Cert.SerialNumber = tt.serial
			if got := serialHex(c.Cert); got != tt.want {
				t.Errorf("serialHex(%v) = %q; want %q", tt.serial, got, tt.want)
			}
		})
	}
}
