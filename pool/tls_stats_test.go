package pool

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/tlsutil"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// TestUpstreamTLSStats connects to a TLS upstream through a tlsutil client context whose
// stats are cluster.up.ssl.*, and checks the counters by name after a good handshake and
// after one whose subject alt name check fails.
func TestUpstreamTLSStats(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "test ca"})
	leaf := ca.Issue(t, tlstest.Options{CommonName: "upstream", DNSNames: []string{"up.example.com"}})
	tests := []struct {
		name    string
		san     string
		wantErr bool
		want    func(cipher string) map[string]uint64
	}{
		{name: "good handshake", san: "up.example.com", want: func(cipher string) map[string]uint64 {
			return map[string]uint64{"cluster.up.ssl.handshake": 1, "cluster.up.ssl.versions.TLSv1.2": 1,
				"cluster.up.ssl.ciphers." + cipher: 1, "cluster.up.ssl.curves.X25519": 1}
		}},
		{name: "subject alt name mismatch", san: "other.example.com", wantErr: true, want: func(string) map[string]uint64 {
			return map[string]uint64{"cluster.up.ssl.fail_verify_san": 1}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ciphers := make(chan string, 1)
			srv, _ := newCountedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ciphers <- tlsutil.CipherName(r.TLS.CipherSuite)
				fmt.Fprint(w, "ok")
			}))
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leaf.Cert.Raw}, PrivateKey: leaf.Key}},
				CurvePreferences: []tls.CurveID{tls.X25519}}
			srv.StartTLS()
			defer srv.Close()
			cm, store := newClusterManager(t, staticCluster("", srv.Listener.Addr().String()))
			inline := &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: ca.CertPEM}}
			cfg, err := tlsutil.UpstreamFromProto("transport_socket", &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
				ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
					TrustedCa: inline,
					MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{{SanType: tlsv3.SubjectAltNameMatcher_DNS,
						Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: tt.san}}}},
				}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			cc, err := tlsutil.NewClientContext(cfg, tlsutil.Deps{Stats: tlsutil.NewStatsScopes(store), StatPrefix: "cluster.up."})
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			m := newManager(t, cm, store, func(c *ManagerConfig) {
				c.TLS = func(*host.Host) *tls.Config { return cc.Config() }
				c.TLSStats = cc.Stats
			})
			err = roundTrip(m, onlyHost(t, m), "/")
			if (err != nil) != tt.wantErr {
				t.Fatalf("round trip error = %v; want error %v", err, tt.wantErr)
			}
			var cipher string
			if !tt.wantErr {
				cipher = <-ciphers
			}
			got := map[string]uint64{}
			store.Each(stats.KindSet(stats.KindCounter), func(st *stats.Stat) bool {
				if strings.Contains(st.Name(), ".ssl.") && st.Value() > 0 {
					got[st.Name()] = st.Value()
				}
				return true
			})
			if diff := cmp.Diff(tt.want(cipher), got); diff != "" {
				t.Errorf("ssl stats (-want +got):\n%s", diff)
			}
		})
	}
}
