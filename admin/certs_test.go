package admin

import (
	"fmt"
	"math/big"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/legateproxy/legate/tlsutil"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

const certsWithContexts = `{
 "certificates": [
  {
   "ca_cert": [
    {
     "path": "/etc/ssl/ca.pem",
     "serial_number": "0a1b2c",
     "subject_alt_names": [],
     "days_until_expiration": "355",
     "valid_from": "2025-01-01T00:00:00Z",
     "expiration_time": "2027-01-01T00:00:00Z"
    }
   ],
   "cert_chain": [
    {
     "path": "\u003cinline\u003e",
     "serial_number": "7f00aa",
     "subject_alt_names": [
      {
       "dns": "example.com"
      },
      {
       "dns": "www.example.com"
      },
      {
       "uri": "spiffe://example.com/web"
      },
      {
       "ip_address": "127.0.0.1"
      },
      {
       "ip_address": "::1"
      }
     ],
     "days_until_expiration": "9",
     "valid_from": "2026-01-01T00:00:00Z",
     "expiration_time": "2026-01-20T11:00:00Z"
    }
   ]
  },
  {
   "ca_cert": [],
   "cert_chain": []
  }
 ]
}
`

func TestCertsEndpoint(t *testing.T) {
	now := time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	ca := tlstest.NewCA(t, tlstest.Options{Serial: big.NewInt(0x0a1b2c),
		NotBefore: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)})
	leaf := ca.Issue(t, tlstest.Options{
		Serial:    big.NewInt(0x7f00aa),
		DNSNames:  []string{"example.com", "www.example.com"},
		IPs:       []string{"127.0.0.1", "::1"},
		URIs:      []string{"spiffe://example.com/web"},
		NotBefore: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:  time.Date(2026, 1, 20, 11, 0, 0, 0, time.UTC),
	})
	files := map[string][]byte{"/etc/ssl/ca.pem": ca.CertPEM}
	deps := func(reg *tlsutil.Registry) tlsutil.Deps {
		return tlsutil.Deps{Registry: reg, Now: clock, ReadFile: func(name string) ([]byte, error) {
			if b, ok := files[name]; ok {
				return b, nil
			}
			return nil, fmt.Errorf("open %s: no such file", name)
		}}
	}

	tests := []struct {
		name  string
		build func(t *testing.T, reg *tlsutil.Registry)
		want  string
	}{
		{"no contexts", func(*testing.T, *tlsutil.Registry) {}, "{\n \"certificates\": []\n}\n"},
		{"server with CA and a client without certificates", func(t *testing.T, reg *tlsutil.Registry) {
			s, err := tlsutil.NewServerContext(tlsutil.DownstreamConfig{Path: "listener", Common: tlsutil.CommonConfig{
				Certificates: []tlsutil.CertificateConfig{{
					CertificateChain: tlsutil.DataSource{Kind: tlsutil.SourceInline, Inline: leaf.CertPEM},
					PrivateKey:       tlsutil.DataSource{Kind: tlsutil.SourceInline, Inline: leaf.KeyPEM},
				}},
				Validation: &tlsutil.ValidationConfig{TrustedCA: tlsutil.DataSource{Kind: tlsutil.SourceFile, Filename: "/etc/ssl/ca.pem"}},
			}}, deps(reg))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			c, err := tlsutil.NewClientContext(tlsutil.UpstreamConfig{Path: "cluster"}, deps(reg))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
		}, certsWithContexts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := tlsutil.NewRegistry(clock)
			tt.build(t, reg)
			srv, _ := testServer(t, CertsEndpoint(reg))
			code, hdr, body := fetch(t, "GET", srv.URL+"/certs", "", "")
			if code != 200 || hdr.Get("Content-Type") != "application/json" {
				t.Errorf("status %d, Content-Type %q; want 200 and application/json", code, hdr.Get("Content-Type"))
			}
			if d := cmp.Diff(tt.want, body); d != "" {
				t.Errorf("/certs body (-want +got):\n%s", d)
			}
			var got adminv3.Certificates
			if err := (protojson.UnmarshalOptions{}).Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("strict decode into admin.v3.Certificates: %v", err)
			}
			if d := cmp.Diff(certificates(reg), &got, protocmp.Transform()); d != "" {
				t.Errorf("decoded /certs (-want +got):\n%s", d)
			}
		})
	}
}

func TestCertsDecodedFields(t *testing.T) {
	var got adminv3.Certificates
	if err := protojson.Unmarshal([]byte(certsWithContexts), &got); err != nil {
		t.Fatal(err)
	}
	chain := got.GetCertificates()[0].GetCertChain()[0]
	want := &adminv3.CertificateDetails{
		Path:         "<inline>",
		SerialNumber: "7f00aa",
		SubjectAltNames: []*adminv3.SubjectAlternateName{
			{Name: &adminv3.SubjectAlternateName_Dns{Dns: "example.com"}},
			{Name: &adminv3.SubjectAlternateName_Dns{Dns: "www.example.com"}},
			{Name: &adminv3.SubjectAlternateName_Uri{Uri: "spiffe://example.com/web"}},
			{Name: &adminv3.SubjectAlternateName_IpAddress{IpAddress: "127.0.0.1"}},
			{Name: &adminv3.SubjectAlternateName_IpAddress{IpAddress: "::1"}},
		},
		DaysUntilExpiration: 9,
		ValidFrom:           timestamppb.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		ExpirationTime:      timestamppb.New(time.Date(2026, 1, 20, 11, 0, 0, 0, time.UTC)),
	}
	if d := cmp.Diff(want, chain, protocmp.Transform()); d != "" {
		t.Errorf("golden cert_chain[0] (-want +got):\n%s", d)
	}
}
