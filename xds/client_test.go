package xds

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/xds/resource"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// exercise pushes, updates and removes clusters and endpoints through cp and checks the
// proxy follows: the flow every transport must pass.
func exercise(t *testing.T, cp *controlPlane, p *proxy, src *corev3.ConfigSource) {
	t.Helper()
	defer underTraffic(t, p, "web", "api")()
	cp.set("1", []types.Resource{edsCluster("web", "web-svc", src)}, []types.Resource{assignment("web-svc", "10.0.0.1:80")})
	p.waitFor("web with 10.0.0.1:80", p.hasHosts("web", "10.0.0.1:80"))
	select {
	case <-p.ready:
	case <-time.After(10 * time.Second):
		t.Fatal("CDS init target not ready after the first update")
	}
	p.waitFor("CDS version 1", func() bool { return p.cm.VersionInfo() == "1" })
	if got := p.text("cluster_manager.cds.version_text"); got != "1" {
		t.Errorf("cluster_manager.cds.version_text = %q; want %q", got, "1")
	}
	if got := p.stat("cluster_manager.cds.version"); got != versionHash("1") {
		t.Errorf("cluster_manager.cds.version = %d; want %d", got, versionHash("1"))
	}

	// Endpoints change, a cluster is added.
	cp.set("2", []types.Resource{edsCluster("web", "web-svc", src), staticCluster("api", "10.0.1.1:8080")},
		[]types.Resource{assignment("web-svc", "10.0.0.2:80", "10.0.0.3:80")})
	p.waitFor("web with two new hosts", p.hasHosts("web", "10.0.0.2:80", "10.0.0.3:80"))
	p.waitFor("api", p.hasHosts("api", "10.0.1.1:8080"))
	if got := p.text("cluster.web.version_text"); got != "2" {
		t.Errorf("cluster.web.version_text = %q; want %q", got, "2")
	}
	if got := p.cm.Get("web").Version(); got != "1" {
		t.Errorf("web's cluster version = %q; want %q (unchanged cluster, only endpoints changed)", got, "1")
	}

	// web is removed.
	cp.set("3", []types.Resource{staticCluster("api", "10.0.1.1:8080")}, nil)
	p.waitFor("web removed", func() bool { return p.cm.Get("web") == nil && p.cm.VersionInfo() == "3" })
	if p.cm.Get("api") == nil {
		t.Error("api removed; want it kept")
	}
	if got := p.stat("cluster_manager.cds.update_rejected"); got != 0 {
		t.Errorf("cluster_manager.cds.update_rejected = %d; want 0", got)
	}
}

func TestSotWGRPC(t *testing.T) {
	cp := newControlPlane(t, false)
	src := grpcSource(corev3.ApiConfigSource_GRPC)
	// No Dial hook: the client dials a host of the bootstrap cluster "xds".
	p := startProxyWith(t, &bootstrapv3.Bootstrap_DynamicResources{CdsConfig: src}, func(p *proxy) {
		addStatic(t, p.cm, staticCluster("xds", cp.Addr()))
	})
	exercise(t, cp, p, src)
	if got := p.stat("control_plane.connected_state"); got != 1 {
		t.Errorf("control_plane.connected_state = %d; want 1", got)
	}
	// Separate CDS and EDS streams: every request names one type, and EDS ones name web-svc.
	var eds bool
	for _, r := range cp.Requests() {
		if r.GetTypeUrl() == resource.EndpointType && len(r.GetResourceNames()) == 1 && r.GetResourceNames()[0] == "web-svc" {
			eds = true
		}
		if r.GetTypeUrl() == resource.ClusterType && len(r.GetResourceNames()) != 0 {
			t.Errorf("CDS request names %q; want a wildcard (none)", r.GetResourceNames())
		}
	}
	if !eds {
		t.Error("no EDS request for web-svc")
	}
}

func TestDeltaGRPC(t *testing.T) {
	cp := newControlPlane(t, false)
	src := grpcSource(corev3.ApiConfigSource_DELTA_GRPC)
	p := startProxy(t, &bootstrapv3.Bootstrap_DynamicResources{CdsConfig: src}, withDial(cp))
	exercise(t, cp, p, src)
	var sub, unsub bool
	p.waitFor("delta EDS subscribe and unsubscribe of web-svc", func() bool {
		for _, r := range cp.DeltaRequests() {
			if r.GetTypeUrl() != resource.EndpointType {
				continue
			}
			if len(r.GetResourceNamesSubscribe()) == 1 && r.GetResourceNamesSubscribe()[0] == "web-svc" {
				sub = true
			}
			if len(r.GetResourceNamesUnsubscribe()) == 1 && r.GetResourceNamesUnsubscribe()[0] == "web-svc" {
				unsub = true
			}
		}
		return sub && unsub
	})
}

func adsResources(api corev3.ApiConfigSource_ApiType) *bootstrapv3.Bootstrap_DynamicResources {
	return &bootstrapv3.Bootstrap_DynamicResources{
		AdsConfig: grpcSource(api).GetApiConfigSource(),
		CdsConfig: adsSource(),
	}
}

func TestADS(t *testing.T) {
	for _, api := range []corev3.ApiConfigSource_ApiType{corev3.ApiConfigSource_GRPC, corev3.ApiConfigSource_DELTA_GRPC} {
		t.Run(api.String(), func(t *testing.T) {
			cp := newControlPlane(t, true)
			p := startProxy(t, adsResources(api), withDial(cp))
			exercise(t, cp, p, adsSource())
			if api != corev3.ApiConfigSource_GRPC {
				return
			}
			// ADS ordering: the first EDS request follows the ACK of the CDS response that
			// introduced web.
			reqs := cp.Requests()
			cdsAck, firstEDS := -1, -1
			for i, r := range reqs {
				if r.GetTypeUrl() == resource.ClusterType && r.GetVersionInfo() == "1" && cdsAck < 0 {
					cdsAck = i
				}
				if r.GetTypeUrl() == resource.EndpointType && len(r.GetResourceNames()) > 0 && firstEDS < 0 {
					firstEDS = i
				}
			}
			if cdsAck < 0 || firstEDS < cdsAck {
				t.Errorf("CDS ACK at request %d, first EDS request at %d; want EDS after the CDS ACK", cdsAck, firstEDS)
			}
			if reqs[0].GetNode().GetId() != testNode {
				t.Errorf("first request node id = %q; want %q", reqs[0].GetNode().GetId(), testNode)
			}
		})
	}
}

func TestNACKKeepsServing(t *testing.T) {
	cp := newControlPlane(t, true)
	p := startProxy(t, adsResources(corev3.ApiConfigSource_GRPC), withDial(cp))
	good := edsCluster("web", "web-svc", adsSource())
	cp.set("1", []types.Resource{good}, []types.Resource{assignment("web-svc", "10.0.0.1:80")})
	p.waitFor("web", p.hasHosts("web", "10.0.0.1:80"))

	bad := edsCluster("web", "web-svc", adsSource())
	bad.LbPolicy = clusterv3.Cluster_RING_HASH
	bad.LbConfig = &clusterv3.Cluster_RingHashLbConfig_{RingHashLbConfig: &clusterv3.Cluster_RingHashLbConfig{
		MinimumRingSize: wrapperspb.UInt64(9000000),
	}}
	cp.set("2", []types.Resource{bad, staticCluster("api", "10.0.1.1:8080")}, []types.Resource{assignment("web-svc", "10.0.0.1:80")})
	var nack *struct{ nonce, detail, version string }
	p.waitFor("a NACK of version 2", func() bool {
		for _, r := range cp.Requests() {
			if r.GetTypeUrl() == resource.ClusterType && r.GetErrorDetail() != nil {
				nack = &struct{ nonce, detail, version string }{r.GetResponseNonce(), r.GetErrorDetail().GetMessage(), r.GetVersionInfo()}
				return true
			}
		}
		return false
	})
	if nack.nonce == "" || !strings.Contains(nack.detail, `cluster "web"`) || !strings.Contains(nack.detail, "MinimumRingSize") {
		t.Errorf("NACK nonce %q, error_detail %q; want a nonce and a detail naming cluster \"web\" and MinimumRingSize", nack.nonce, nack.detail)
	}
	if nack.version != "1" {
		t.Errorf("NACK version_info = %q; want the last accepted %q", nack.version, "1")
	}
	// The valid part (api) applies; web keeps its previous version serving.
	p.waitFor("api", p.hasHosts("api", "10.0.1.1:8080"))
	if got := p.hosts("web"); len(got) != 1 {
		t.Errorf("web hosts = %v; want the previous one still serving", got)
	}
	if got := p.cm.Get("web").Config().LbPolicy; got == "RING_HASH" {
		t.Errorf("web lb_policy = %s; want the previous version's", got)
	}
	// go-control-plane answers a NACK by resending the version it holds, so it may be
	// rejected more than once.
	if got := p.stat("cluster_manager.cds.update_rejected"); got == 0 {
		t.Errorf("cluster_manager.cds.update_rejected = %d; want >= 1", got)
	}
	if got := p.cm.VersionInfo(); got != "1" {
		t.Errorf("version_info = %q; want %q", got, "1")
	}
	dump := p.d.ClustersConfigDump(nil).(*adminv3.ClustersConfigDump)
	var es *adminv3.UpdateFailureState
	for _, dc := range dump.GetDynamicActiveClusters() {
		if dc.GetErrorState() != nil {
			es = dc.GetErrorState()
		}
	}
	if es == nil || es.GetVersionInfo() != "2" || !strings.Contains(es.GetDetails(), "MinimumRingSize") || es.GetFailedConfiguration() == nil {
		t.Errorf("error_state = %v; want version 2, the reason and the failed configuration", es)
	}

	// Fixing the cluster clears the error state.
	cp.set("3", []types.Resource{good, staticCluster("api", "10.0.1.1:8080")}, []types.Resource{assignment("web-svc", "10.0.0.1:80")})
	p.waitFor("version 3", func() bool { return p.cm.VersionInfo() == "3" })
	if extras := p.d.ClustersDumpExtras(); len(extras) != 0 {
		t.Errorf("error states after the fix = %v; want none", extras)
	}
}

func TestREST(t *testing.T) {
	cp := newControlPlane(t, false)
	src := &corev3.ConfigSource{
		ResourceApiVersion: corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_ApiConfigSource{ApiConfigSource: &corev3.ApiConfigSource{
			ApiType:             corev3.ApiConfigSource_REST,
			TransportApiVersion: corev3.ApiVersion_V3,
			ClusterNames:        []string{"xds"},
			RefreshDelay:        durationpb.New(20 * time.Millisecond),
		}},
	}
	p := startProxy(t, &bootstrapv3.Bootstrap_DynamicResources{CdsConfig: src}, withDial(cp))
	exercise(t, cp, p, src)
}

func TestReconnectAndResync(t *testing.T) {
	cp := newControlPlane(t, true)
	p := startProxy(t, adsResources(corev3.ApiConfigSource_GRPC), withDial(cp))
	cp.set("1", []types.Resource{edsCluster("web", "web-svc", adsSource())}, []types.Resource{assignment("web-svc", "10.0.0.1:80")})
	p.waitFor("web", p.hasHosts("web", "10.0.0.1:80"))

	cp.Stop()
	p.waitFor("disconnected", func() bool {
		return p.stat("control_plane.connected_state") == 0 && p.stat("cluster_manager.cds.update_failure") > 0
	})
	if got := p.hosts("web"); len(got) != 1 {
		t.Errorf("web hosts while the control plane is down = %v; want the last ones", got)
	}
	cp.set("2", []types.Resource{edsCluster("web", "web-svc", adsSource())}, []types.Resource{assignment("web-svc", "10.0.0.9:80")})
	cp.Restart()
	p.waitFor("resync to 10.0.0.9", p.hasHosts("web", "10.0.0.9:80"))
	p.waitFor("connected", func() bool { return p.stat("control_plane.connected_state") == 1 })
	if got := p.stat("cluster.web.update_failure"); got == 0 {
		t.Errorf("cluster.web.update_failure = 0; want the outage counted")
	}
}

func TestFileCDS(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cds.yaml")
	write := func(body string) {
		tmp := filepath.Join(dir, "cds.yaml.tmp")
		if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	const cluster = `
  - "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
    name: %s
    connect_timeout: 1s
    load_assignment:
      cluster_name: %s
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: %s, port_value: 80}}}
`
	resp := func(version string, clusters ...[3]string) string {
		s := "version_info: \"" + version + "\"\nresources:\n"
		for _, c := range clusters {
			s += fmt.Sprintf(cluster, c[0], c[1], c[2])
		}
		return s
	}
	write(resp("a", [3]string{"one", "one", "10.1.0.1"}))
	src := &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_PathConfigSource{PathConfigSource: &corev3.PathConfigSource{Path: path}}}
	p := startProxy(t, &bootstrapv3.Bootstrap_DynamicResources{CdsConfig: src})
	p.waitFor("one", p.hasHosts("one", "10.1.0.1:80"))

	write(resp("b", [3]string{"two", "two", "10.1.0.2"}))
	p.waitFor("two replaces one", func() bool { return p.cm.Get("one") == nil && p.cm.Get("two") != nil })
	if got := p.cm.VersionInfo(); got != "b" {
		t.Errorf("version_info = %q; want %q", got, "b")
	}

	// A file with a broken new version of two is rejected and two keeps serving.
	write("version_info: c\nresources:\n- \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: two\n  connect_timeout: -1s\n")
	p.waitFor("rejection", func() bool { return p.stat("cluster_manager.cds.update_rejected") == 1 })
	if got := p.hosts("two"); len(got) != 1 {
		t.Errorf("two's hosts after a rejected file = %v; want the previous one", got)
	}
	if got := p.cm.VersionInfo(); got != "b" {
		t.Errorf("version_info after a rejected file = %q; want %q", got, "b")
	}
}

func TestCDSValidation(t *testing.T) {
	tests := []struct {
		name string
		dr   *bootstrapv3.Bootstrap_DynamicResources
		want string
	}{
		{"ads without ads_config", &bootstrapv3.Bootstrap_DynamicResources{CdsConfig: adsSource()}, "ads_config is not"},
		{"v2 resources", &bootstrapv3.Bootstrap_DynamicResources{CdsConfig: &corev3.ConfigSource{
			ResourceApiVersion: corev3.ApiVersion_V2, ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		}}, "resource_api_version = V2; only V3 is supported"},
		{"REST ADS", &bootstrapv3.Bootstrap_DynamicResources{AdsConfig: &corev3.ApiConfigSource{
			ApiType: corev3.ApiConfigSource_REST, ClusterNames: []string{"x"}, RefreshDelay: durationpb.New(time.Second),
		}}, "ADS needs GRPC or DELTA_GRPC"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newTestClient(tc.dr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New() = %v, %v; want an error containing %q", p, err, tc.want)
			}
		})
	}
}

// underTraffic picks hosts from the named clusters every millisecond until the returned
// function is called, and fails the test when an active cluster with hosts fails a pick: the
// updates must never leave the data plane without a usable snapshot.
func underTraffic(t *testing.T, p *proxy, names ...string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var picks, failures atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			for _, n := range names {
				cl := p.cm.Get(n)
				if cl == nil || cl.Snapshot().PrioritySet.Hosts() == 0 {
					continue
				}
				picks.Add(1)
				if _, err := cl.Pick(&lb.Context{}); err != nil {
					failures.Add(1)
				}
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		if f := failures.Load(); f != 0 {
			t.Errorf("%d of %d picks failed during updates; want none", f, picks.Load())
		}
	}
}
