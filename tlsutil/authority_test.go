package tlsutil

import (
	"errors"
	"fmt"
	"testing"

	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// TestConfigForAuthority runs real handshakes with the configurations auto_sni and
// auto_san_validation ask for: the name replaces the configured sni (but an IP address is
// never sent as SNI), and with SAN validation the certificate must carry the name (a DNS
// wildcard, or an IP address SAN), with or without a validation context.
func TestConfigForAuthority(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, tlstest.Options{})
	srv := ca.Issue(t, tlstest.Options{DNSNames: []string{"*.a.example"}, IPs: []string{"127.0.0.1"}})
	caFile := writeFile(t, dir, "ca.pem", ca.CertPEM)
	verified := newClient(t, fmt.Sprintf("sni: configured.example\ncommon_tls_context: {validation_context: {trusted_ca: {filename: %s}}}", caFile), Deps{})
	bare := newClient(t, "sni: configured.example", Deps{})
	for _, tt := range []struct {
		name     string
		c        *ClientContext
		host     string
		sni, san bool
		wantSNI  string
		wantErr  error
	}{
		{"sni only", bare, "b.example", true, false, "b.example", nil},
		{"san wildcard", verified, "x.a.example", true, true, "x.a.example", nil},
		{"san mismatch", verified, "b.example", true, true, "b.example", ErrVerifySAN},
		{"san mismatch without validation context", bare, "b.example", true, true, "b.example", ErrVerifySAN},
		{"san without sni", verified, "x.a.example", false, true, "configured.example", nil},
		{"ip is not sni but is the san", verified, "127.0.0.1", true, true, "configured.example", nil},
		{"ip san mismatch", verified, "127.0.0.2", true, true, "configured.example", ErrVerifySAN},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := handshake(t, goServer(t, srv.CertPEM, srv.KeyPEM), tt.c.ConfigForAuthority(tt.host, tt.sni, tt.san))
			if r.serverName != tt.wantSNI {
				t.Errorf("server saw SNI %q; want %q", r.serverName, tt.wantSNI)
			}
			if !errors.Is(r.clientErr, tt.wantErr) {
				t.Errorf("handshake error %v; want %v", r.clientErr, tt.wantErr)
			}
		})
	}
	if bare.ConfigForAuthority("", true, true) != bare.Config() {
		t.Error("ConfigForAuthority of no name is not Config()")
	}
}

// TestConfigForAuthorityBounded checks the per-name configurations are cached, one per name,
// and that names past the bound get a configuration without being kept.
func TestConfigForAuthorityBounded(t *testing.T) {
	c := newClient(t, "{}", Deps{})
	if c.ConfigForAuthority("a.example", true, false) != c.ConfigForAuthority("a.example", true, false) {
		t.Fatal("two configurations for one name; want one cached")
	}
	for i := range maxAuthorityConfigs + 10 {
		name := fmt.Sprintf("n%d.example", i)
		if got := c.ConfigForAuthority(name, true, false).ServerName; got != name {
			t.Fatalf("ServerName %q; want %q", got, name)
		}
	}
	l := c.st.cur.Load().client
	n := 0
	l.authorities.Range(func(any, any) bool { n++; return true })
	if n != maxAuthorityConfigs || int(l.nAuthority.Load()) != n {
		t.Fatalf("cached %d configurations (count %d); want the bound, %d", n, l.nAuthority.Load(), maxAuthorityConfigs)
	}
}
