package xds

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"sync/atomic"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/legateproxy/legate/tlsutil"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// mtlsUpstream is a TLS server that requires a client certificate signed by ca and reports
// the common name of each connection's client certificate.
type mtlsUpstream struct {
	addr string
	cns  chan string
}

func startMTLSUpstream(t *testing.T, ca *tlstest.Cert) *mtlsUpstream {
	t.Helper()
	srv := ca.Issue(t, tlstest.Options{CommonName: "upstream", IPs: []string{"127.0.0.1"}})
	pair, err := tls.X509KeyPair(srv.CertPEM, srv.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	lis, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool,
	})
	if err != nil {
		t.Fatal(err)
	}
	u := &mtlsUpstream{addr: lis.Addr().String(), cns: make(chan string, 100)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			tc := conn.(*tls.Conn)
			if tc.Handshake() == nil {
				u.cns <- tc.ConnectionState().PeerCertificates[0].Subject.CommonName
			}
			tc.Close()
		}
	}()
	t.Cleanup(func() { lis.Close(); <-done })
	return u
}

// sdsTLSCluster is a static cluster whose client certificate comes over SDS (ADS).
func sdsTLSCluster(name, addr, secret string, timeout time.Duration) *clusterv3.Cluster {
	c := staticCluster(name, addr)
	src := adsSource()
	if timeout > 0 {
		src.InitialFetchTimeout = durationpb.New(timeout)
	}
	c.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{
		TypedConfig: mustAny(&tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: secret, SdsConfig: src}},
		}}),
	}}
	return c
}

func pemSecret(name string, c *tlstest.Cert) *tlsv3.Secret {
	inline := func(b []byte) *corev3.DataSource {
		return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b}}
	}
	return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: inline(c.CertPEM), PrivateKey: inline(c.KeyPEM),
	}}}
}

// handshakeCN opens a new TLS connection with ctx and returns the client certificate's common
// name the upstream saw.
func handshakeCN(t *testing.T, ctx *tlsutil.ClientContext, u *mtlsUpstream) (string, error) {
	t.Helper()
	d := tls.Dialer{Config: ctx.Config()}
	dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := d.DialContext(dctx, "tcp", u.addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	// TLS 1.3: the server verifies the client certificate after the client's handshake ends;
	// a read waits for its verdict (the server closes the connection either way).
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	conn.Read(make([]byte, 1))
	select {
	case cn := <-u.cns:
		return cn, nil
	case <-time.After(5 * time.Second):
		return "", net.ErrClosed
	}
}

// TestUpstreamSDS: a CDS cluster whose client certificate comes over SDS warms until the
// secret arrives (shown in dynamic_warming_clusters), then serves; a rotated secret reaches new
// handshakes (the upstream sees the new certificate); and a secret that never comes releases
// the cluster after its initial_fetch_timeout, counted in sds.<name>.init_fetch_timeout.
func TestUpstreamSDS(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{})
	certA := ca.Issue(t, tlstest.Options{CommonName: "client-a"})
	certB := ca.Issue(t, tlstest.Options{CommonName: "client-b"})
	up := startMTLSUpstream(t, ca)
	for _, api := range []corev3.ApiConfigSource_ApiType{corev3.ApiConfigSource_GRPC, corev3.ApiConfigSource_DELTA_GRPC} {
		t.Run(api.String(), func(t *testing.T) {
			cp := newControlPlane(t, true)
			certs := tlsutil.NewRegistry(time.Now)
			dr := &bootstrapv3.Bootstrap_DynamicResources{AdsConfig: grpcSource(api).GetApiConfigSource(), CdsConfig: adsSource()}
			var reloadedB atomic.Bool
			var sdsRef atomic.Pointer[tlsutil.SDS]
			p := startProxy(t, dr, withDial(cp), func(s *proxySetup) {
				s.secretsChanged = func() {
					// The SDS owner is set before any secret can arrive.
					sec, _ := sdsRef.Load().Secret("client")
					isB := sec.Certificate != nil && string(sec.Certificate.CertificateChain.Inline) == string(certB.CertPEM)
					if err := certs.Reload(); err != nil {
						t.Errorf("Reload: %v", err)
					}
					if isB {
						reloadedB.Store(true)
					}
				}
				s.afterNew = func(px *proxy) { sdsRef.Store(px.sds) }
			})
			snapshot := func(v string, secrets ...*tlsv3.Secret) {
				res := map[resourcev3.Type][]types.Resource{resourcev3.ClusterType: {
					sdsTLSCluster("tls", up.addr, "client", 0),
					sdsTLSCluster("never", up.addr, "missing", 50*time.Millisecond),
				}}
				for _, s := range secrets {
					res[resourcev3.SecretType] = append(res[resourcev3.SecretType], s)
				}
				cp.Set(v, res)
			}

			// 1. No secret yet: the cluster warms in the client, not in the manager.
			snapshot("1")
			p.waitFor("CDS v1", func() bool { return p.stat("cluster_manager.cds.update_success") >= 1 })
			if cl := p.cm.Get("tls"); cl != nil {
				t.Fatalf("cluster tls active before its secret arrived; want warming")
			}
			dump := p.d.ClustersConfigDump(nil).(*adminv3.ClustersConfigDump)
			warming := false
			for _, dc := range dump.DynamicWarmingClusters {
				warming = warming || (dumpName(dc) == "tls" && dc.GetVersionInfo() == "1")
			}
			if !warming {
				t.Fatalf("dynamic_warming_clusters = %v; want tls at version 1", dump.DynamicWarmingClusters)
			}

			// 2. The secret that never comes times out: that cluster is released.
			p.waitFor("never released", func() bool { return p.cm.Get("never") != nil })
			if got := p.stat("sds.missing.init_fetch_timeout"); got != 1 {
				t.Errorf("sds.missing.init_fetch_timeout = %d; want 1", got)
			}

			// 3. The secret arrives: the cluster is added and handshakes send certificate A.
			snapshot("2", pemSecret("client", certA))
			p.waitFor("cluster tls active", func() bool { return p.cm.Get("tls") != nil })
			cfg, err := tlsutil.Upstream(nil, "tls", p.cm.Get("tls").Config().TransportSocket)
			if err != nil {
				t.Fatal(err)
			}
			ctx, err := tlsutil.NewClientContext(*cfg, tlsutil.Deps{Secrets: p.sds, Registry: certs})
			if err != nil {
				t.Fatalf("NewClientContext after the secret arrived: %v", err)
			}
			defer ctx.Close()
			if cn, err := handshakeCN(t, ctx, up); err != nil || cn != "client-a" {
				t.Fatalf("upstream saw client certificate %q (err %v); want client-a", cn, err)
			}

			// 4. Rotation: once the contexts reloaded, a new connection presents certificate B.
			// (Waiting for the reload first: a session ticket stored while a reload runs
			// could resume certificate A's session.)
			snapshot("3", pemSecret("client", certB))
			p.waitFor("reload with certificate B", reloadedB.Load)
			if cn, err := handshakeCN(t, ctx, up); err != nil || cn != "client-b" {
				t.Fatalf("after rotation the upstream saw client certificate %q (err %v); want client-b", cn, err)
			}
			dump = p.d.ClustersConfigDump(nil).(*adminv3.ClustersConfigDump)
			if len(dump.DynamicWarmingClusters) != 0 {
				t.Errorf("dynamic_warming_clusters = %v; want none", dump.DynamicWarmingClusters)
			}

			// 5. Removing the cluster ends its secret subscription.
			cp.Set("4", map[resourcev3.Type][]types.Resource{resourcev3.ClusterType: {}, resourcev3.SecretType: {pemSecret("client", certB)}})
			p.waitFor("tls removed", func() bool { return p.cm.Get("tls") == nil })
			p.waitFor("secret subscription ended", func() bool {
				return len(p.c.SecretsConfigDump(nil).GetDynamicActiveSecrets()) == 0
			})
		})
	}
}

// dumpName is the cluster name of a clusters dump entry.
func dumpName(dc *adminv3.ClustersConfigDump_DynamicCluster) string {
	cl := &clusterv3.Cluster{}
	if dc.GetCluster().UnmarshalTo(cl) != nil {
		return ""
	}
	return cl.GetName()
}
