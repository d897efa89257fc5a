package als

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

func TestTLSProperties(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "als ca"})
	peer := ca.Issue(t, tlstest.Options{CommonName: "client", URIs: []string{"spiffe://example.com/client"}, DNSNames: []string{"client.example.com"}})
	local := ca.Issue(t, tlstest.Options{CommonName: "proxy", DNSNames: []string{"proxy.example.com"}})
	start := time.Unix(1700000000, 0)
	san := func(uri, dns string) *accesslogdatav3.TLSProperties_CertificateProperties_SubjectAltName {
		if uri != "" {
			return &accesslogdatav3.TLSProperties_CertificateProperties_SubjectAltName{San: &accesslogdatav3.TLSProperties_CertificateProperties_SubjectAltName_Uri{Uri: uri}}
		}
		return &accesslogdatav3.TLSProperties_CertificateProperties_SubjectAltName{San: &accesslogdatav3.TLSProperties_CertificateProperties_SubjectAltName_Dns{Dns: dns}}
	}
	for _, tc := range []struct {
		name  string
		entry accesslog.Entry
		want  *accesslogdatav3.TLSProperties
	}{
		{"plain", accesslog.Entry{}, nil},
		{"inspected sni", accesslog.Entry{RequestedServerName: "db.example.com"}, &accesslogdatav3.TLSProperties{TlsSniHostname: "db.example.com"}},
		{"mutual tls", accesslog.Entry{RequestedServerName: "db.example.com", DownstreamTLS: &accesslog.TLSInfo{Local: local.Cert, State: tls.ConnectionState{
			Version: tls.VersionTLS13, CipherSuite: tls.TLS_AES_256_GCM_SHA384, PeerCertificates: []*x509.Certificate{peer.Cert},
		}}}, &accesslogdatav3.TLSProperties{
			TlsVersion: accesslogdatav3.TLSProperties_TLSv1_3, TlsCipherSuite: wrapperspb.UInt32(uint32(tls.TLS_AES_256_GCM_SHA384)), TlsSniHostname: "db.example.com",
			LocalCertificateProperties: &accesslogdatav3.TLSProperties_CertificateProperties{Subject: "CN=proxy", Issuer: "CN=als ca",
				SubjectAltName: []*accesslogdatav3.TLSProperties_CertificateProperties_SubjectAltName{san("", "proxy.example.com")}},
			PeerCertificateProperties: &accesslogdatav3.TLSProperties_CertificateProperties{Subject: "CN=client", Issuer: "CN=als ca",
				SubjectAltName: []*accesslogdatav3.TLSProperties_CertificateProperties_SubjectAltName{san("spiffe://example.com/client", ""), san("", "client.example.com")}},
		}},
		{"sni from the handshake", accesslog.Entry{DownstreamTLS: &accesslog.TLSInfo{State: tls.ConnectionState{Version: tls.VersionTLS12, ServerName: "h.example.com"}}},
			&accesslogdatav3.TLSProperties{TlsVersion: accesslogdatav3.TLSProperties_TLSv1_2, TlsSniHostname: "h.example.com"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.entry
			e.StartTime, e.Type = start, accesslog.TypeTCPConnectionEnd
			got := commonProperties(&e, nil)
			want := &accesslogdatav3.AccessLogCommon{SampleRate: 1, StartTime: timestamppb.New(start), TlsProperties: tc.want, AccessLogType: accesslogdatav3.AccessLogType_TcpConnectionEnd}
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Errorf("commonProperties (-want +got):\n%s", diff)
			}
		})
	}
}
