package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	healthcheckv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/health_check/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	alsv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/legateproxy/legate/tlsutil/tlstest"
	"github.com/legateproxy/legate/xds/xdstest"
)

// TestXDSScopedRoutesECDSAndGRPCAccessLog runs the binary against go-control-plane's server:
// an LDS listener whose connection manager takes its scopes from SRDS (and their routes from
// RDS), discovers its health_check filter over ECDS and logs to a real gRPC access log
// service. Requests reach the scope their header names, the discovered filter answers its
// path, the access log service receives the requests, and /config_dump shows the scopes and
// the filter configuration.
func TestXDSScopedRoutesECDSAndGRPCAccessLog(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "upstream") }))
	defer upstream.Close()
	als := startALS(t, func(m *alsv3.StreamAccessLogsMessage) []*accesslogdatav3.HTTPAccessLogEntry {
		return m.GetHttpLogs().GetLogEntry()
	})
	xds := xdstest.New(t, xdstest.Options{Node: "e2e-srds", ADS: true})
	cfg := adsBootstrap("e2e-srds", xds, []string{"lds_config"},
		clusterYAML("backend", upstream.Listener.Addr().String(), false), clusterYAML("als", als.addr, true))
	l := hcmListener(t, "ingress", 0, srdsScopes+`
      http_filters:
      - name: hc
        config_discovery:
          config_source: {ads: {}, resource_api_version: V3}
          type_urls: [type.googleapis.com/envoy.extensions.filters.http.health_check.v3.HealthCheck]
      - name: envoy.filters.http.router
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
      access_log:
      - name: envoy.access_loggers.http_grpc
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.access_loggers.grpc.v3.HttpGrpcAccessLogConfig
          common_config:
            log_name: e2e
            transport_api_version: V3
            grpc_service: {envoy_grpc: {cluster_name: als}}
            buffer_flush_interval: 0.05s
`)
	var hc healthcheckv3.HealthCheck
	fromYAMLProto(t, `{pass_through_mode: false, headers: [{name: ":path", string_match: {exact: /healthz}}]}`, &hc)
	hcAny, err := anypb.New(&hc)
	if err != nil {
		t.Fatal(err)
	}
	xds.Set("v1", map[resourcev3.Type][]types.Resource{
		resourcev3.ListenerType:        {l},
		resourcev3.ScopedRouteType:     {scopedRoute("sa", "ra", "a", false), scopedRoute("sb", "rb", "b", false)},
		resourcev3.RouteType:           {routeTo("ra", directRoute("scope a")), routeTo("rb", clusterRoute("backend"))},
		resourcev3.ExtensionConfigType: {&corev3.TypedExtensionConfig{Name: "hc", TypedConfig: hcAny}},
	})
	p := start(t, "-c", writeConfig(t, cfg))
	addr := p.boundListenerAddr("ingress")
	client := &http.Client{Timeout: 5 * time.Second}
	get := func(path, scope string) (int, string) {
		return scopedRequest(client, "GET", "http://"+addr+path, "", scope, "")
	}
	waitXDS(t, xds, "scope a", func() bool { s, b := get("/x", "a"); return s == 200 && b == "scope a" })
	for _, tc := range []struct {
		path, scope string
		status      int
		body        string
	}{
		{"/x", "b", 200, "upstream"},
		{"/x", "c", 404, ""},
		{"/x", "", 404, ""},
		{"/healthz", "b", 200, ""}, // answered by the discovered health_check filter
	} {
		if s, b := get(tc.path, tc.scope); s != tc.status || b != tc.body {
			t.Errorf("GET %s (x-scope %q) = %d %q; want %d %q", tc.path, tc.scope, s, b, tc.status, tc.body)
		}
	}
	waitXDS(t, xds, "the access log entries", func() bool {
		name, entries := als.seen()
		var paths []string
		for _, e := range entries {
			paths = append(paths, fmt.Sprintf("%s %d", e.GetRequest().GetPath(), e.GetResponse().GetResponseCode().GetValue()))
		}
		return name == "e2e" && strings.Contains(strings.Join(paths, ","), "/healthz 200")
	})
	_, _, dump := p.get("/config_dump")
	for _, want := range []string{"type.googleapis.com/envoy.admin.v3.EcdsConfigDump", `"ecds_filters"`, `"dynamic_scoped_route_configs"`, `"name": "scopes"`} {
		if !strings.Contains(dump, want) {
			t.Errorf("/config_dump lacks %s", want)
		}
	}
	_, _, st := p.get("/stats?filter=^(access_logs.grpc_access_log.logs_written|extension_config_discovery.http_filter.hc.config_reload|http.ingress.scoped_rds.scopes.update_success)$")
	for _, name := range []string{"access_logs.grpc_access_log.logs_written", "extension_config_discovery.http_filter.hc.config_reload", "http.ingress.scoped_rds.scopes.update_success"} {
		if !strings.Contains(st, name+": ") || strings.Contains(st, name+": 0\n") {
			t.Errorf("stat %s missing or 0 in:\n%s", name, st)
		}
	}
}

// TestXDSUpstreamSDS runs the binary with a CDS cluster whose client certificate comes over
// SDS: requests through an LDS listener reach a real mTLS upstream (which closes every
// connection, so each request handshakes anew) with the first certificate, then with the
// rotated one.
func TestXDSUpstreamSDS(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{})
	srvCert := ca.Issue(t, tlstest.Options{CommonName: "upstream", IPs: []string{"127.0.0.1"}})
	pair, err := tls.X509KeyPair(srvCert.CertPEM, srvCert.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	upstream := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	// Session tickets stay on: a session resumed across the rotation must not keep the first
	// certificate's identity.
	upstream.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	upstream.StartTLS()
	defer upstream.Close()
	_, uport, _ := net.SplitHostPort(upstream.Listener.Addr().String())

	xds := xdstest.New(t, xdstest.Options{Node: "e2e-sds", ADS: true})
	cfg := adsBootstrap("e2e-sds", xds, []string{"cds_config", "lds_config"})
	var uportN uint32
	fmt.Sscan(uport, &uportN)
	tlsCluster := staticCluster("tls", uportN)
	upTLS, err := anypb.New(&tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: "client", SdsConfig: &corev3.ConfigSource{
			ResourceApiVersion: corev3.ApiVersion_V3, ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	tlsCluster.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: upTLS}}
	secret := func(c *tlstest.Cert) *tlsv3.Secret {
		return &tlsv3.Secret{Name: "client", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: c.CertPEM}},
			PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: c.KeyPEM}},
		}}}
	}
	set := func(version string, s *tlsv3.Secret) {
		t.Helper()
		tlsCluster := proto.Clone(tlsCluster).(*clusterv3.Cluster) // each version a new cluster object
		xds.Set(version, map[resourcev3.Type][]types.Resource{
			resourcev3.ClusterType:  {tlsCluster},
			resourcev3.ListenerType: {ldsListener(t, 0, "r1")}, // the kernel picks the port
			resourcev3.RouteType:    {routeTo("r1", clusterRoute("tls"))},
			resourcev3.SecretType:   {s},
		})
	}
	set("v1", secret(ca.Issue(t, tlstest.Options{CommonName: "client-a"})))
	p := start(t, "-c", writeConfig(t, cfg))
	url := "http://" + p.boundListenerAddr("dyn") + "/"
	client := &http.Client{Timeout: 5 * time.Second}
	get := func() string {
		resp, err := client.Get(url)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return fmt.Sprintf("%d %s", resp.StatusCode, b)
	}
	waitFor := func(what, want string) {
		t.Helper()
		var last string
		if !awaitXDS(xds, func() bool { last = get(); return last == want }) {
			_, _, d1 := p.get("/config_dump?resource=dynamic_active_secrets")
			_, _, d2 := p.get("/config_dump?resource=dynamic_active_clusters")
			_, _, d3 := p.get("/certs")
			t.Fatalf("timed out waiting for %s: last response %q; want %q\n%s\n%s\n%s", what, last, want, d1, d2, d3)
		}
	}
	waitFor("the first certificate", "200 client-a")
	set("v2", secret(ca.Issue(t, tlstest.Options{CommonName: "client-b"})))
	waitFor("the rotated certificate", "200 client-b")
	_, _, dump := p.get("/config_dump?resource=dynamic_active_secrets")
	if !strings.Contains(dump, `"name": "client"`) || !strings.Contains(dump, `"version_info": "v2"`) {
		t.Errorf("dynamic_active_secrets: want client at v2:\n%s", dump)
	}
	// A CDS update replaces the cluster: the replaced configuration's TLS context leaves
	// /certs (one context left, the new one's), and traffic keeps its certificate.
	tlsCluster.ConnectTimeout = durationpb.New(2 * time.Second)
	set("v3", secret(ca.Issue(t, tlstest.Options{CommonName: "client-c"})))
	waitFor("the replaced cluster's certificate", "200 client-c")
	deadline := time.Now().Add(20 * time.Second)
	for {
		// A request that picked the replaced cluster may have answered client-c; the new
		// cluster's context exists once a request reaches it.
		resp := get()
		_, _, certs := p.get("/certs")
		if n := strings.Count(certs, `"cert_chain"`); n == 1 && resp == "200 client-c" {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("/certs lists %d certificate chains after the cluster was replaced; want 1 (the replaced context retired):\n%s", n, certs)
		}
		<-time.After(100 * time.Millisecond)
	}
}
