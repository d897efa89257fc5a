package admin

import (
	"net/http"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/legateproxy/legate/internal/pbjson"
	"github.com/legateproxy/legate/tlsutil"
)

// CertsEndpoint returns /certs: every live TLS context's CA and chain
// certificates as envoy.admin.v3.Certificates, printed with all fields.
func CertsEndpoint(reg *tlsutil.Registry) Endpoint {
	return Endpoint{
		Path: "/certs",
		Help: "print certs on machine",
		Handle: func(w http.ResponseWriter, _ *http.Request, _ Query) {
			writeProto(w, certificates(reg), pbjson.AllFields)
		},
	}
}

// certificates converts the registry's view into the admin message.
func certificates(reg *tlsutil.Registry) *adminv3.Certificates {
	out := &adminv3.Certificates{}
	for _, c := range reg.Certificates() {
		out.Certificates = append(out.Certificates, &adminv3.Certificate{
			CaCert:    certificateDetails(c.CA),
			CertChain: certificateDetails(c.Chain),
		})
	}
	return out
}

func certificateDetails(in []tlsutil.CertificateDetails) []*adminv3.CertificateDetails {
	out := make([]*adminv3.CertificateDetails, 0, len(in))
	for _, d := range in {
		pb := &adminv3.CertificateDetails{
			Path:                d.Path,
			SerialNumber:        d.SerialNumber,
			DaysUntilExpiration: d.DaysUntilExpiration,
			// Envoy keeps whole seconds.
			ValidFrom:      &timestamppb.Timestamp{Seconds: d.ValidFrom.Unix()},
			ExpirationTime: &timestamppb.Timestamp{Seconds: d.ExpirationTime.Unix()},
		}
		for _, s := range d.SANs {
			san := &adminv3.SubjectAlternateName{}
			switch s.Type {
			case tlsutil.SANDNS:
				san.Name = &adminv3.SubjectAlternateName_Dns{Dns: s.Value}
			case tlsutil.SANURI:
				san.Name = &adminv3.SubjectAlternateName_Uri{Uri: s.Value}
			default:
				san.Name = &adminv3.SubjectAlternateName_IpAddress{IpAddress: s.Value}
			}
			pb.SubjectAltNames = append(pb.SubjectAltNames, san)
		}
		out = append(out, pb)
	}
	return out
}
