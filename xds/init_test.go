package xds

import (
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/internal/clock/clocktest"
	"github.com/legateproxy/legate/xds/resource"
)

func withClock(c clock.Clock) proxyOption { return func(s *proxySetup) { s.cfg.Clock = c } }

func TestInitialFetchTimeout(t *testing.T) {
	t.Run("EDS", func(t *testing.T) {
		fake := clocktest.NewFake(time.Unix(1700000000, 0))
		cp := newControlPlane(t, true)
		p := startProxy(t, adsResources(corev3.ApiConfigSource_GRPC), withDial(cp), withClock(fake))
		// The snapshot has the cluster but no assignment: the server never answers EDS.
		cp.set("1", []types.Resource{edsCluster("web", "web-svc", adsSource())}, nil)
		p.waitFor("CDS applied", func() bool { return p.cm.VersionInfo() == "1" })
		if p.cm.Get("web") != nil {
			t.Fatal("web active before any assignment; want it warming")
		}
		select {
		case <-p.ready:
			t.Fatal("init ready while web is warming")
		default:
		}
		fake.Advance(resource.DefaultInitialFetchTimeout)
		p.waitFor("web active without hosts", func() bool { return p.cm.Get("web") != nil })
		if got := p.hosts("web"); len(got) != 0 {
			t.Errorf("web hosts = %v; want none", got)
		}
		if got := p.stat("cluster.web.init_fetch_timeout"); got != 1 {
			t.Errorf("cluster.web.init_fetch_timeout = %d; want 1", got)
		}
		select {
		case <-p.ready:
		case <-time.After(10 * time.Second):
			t.Fatal("init not ready after the EDS initial fetch timeout")
		}
		// A late assignment still applies.
		cp.set("2", []types.Resource{edsCluster("web", "web-svc", adsSource())}, []types.Resource{assignment("web-svc", "10.0.0.1:80")})
		p.waitFor("late assignment", p.hasHosts("web", "10.0.0.1:80"))
	})
	t.Run("CDS", func(t *testing.T) {
		fake := clocktest.NewFake(time.Unix(1700000000, 0))
		cp := newControlPlane(t, true) // no snapshot: CDS is never answered
		p := startProxy(t, adsResources(corev3.ApiConfigSource_GRPC), withDial(cp), withClock(fake))
		p.waitFor("CDS requested", func() bool { return len(cp.Requests()) > 0 })
		fake.Advance(resource.DefaultInitialFetchTimeout)
		select {
		case <-p.ready:
		case <-time.After(10 * time.Second):
			t.Fatal("init not ready after the CDS initial fetch timeout")
		}
		if got := p.stat("cluster_manager.cds.init_fetch_timeout"); got != 1 {
			t.Errorf("cluster_manager.cds.init_fetch_timeout = %d; want 1", got)
		}
		// update_attempt: the start and the timeout.
		if got := p.stat("cluster_manager.cds.update_attempt"); got != 2 {
			t.Errorf("cluster_manager.cds.update_attempt = %d; want 2", got)
		}
	})
}

// TestBootstrapEDSCluster: a static_resources EDS cluster is subscribed without CDS.
func TestBootstrapEDSCluster(t *testing.T) {
	cp := newControlPlane(t, true)
	ads := grpcSource(corev3.ApiConfigSource_GRPC).GetApiConfigSource()
	p := startProxyWith(t, &bootstrapv3.Bootstrap_DynamicResources{AdsConfig: ads}, func(p *proxy) {
		addStatic(t, p.cm, edsCluster("boot", "", adsSource()))
	}, withDial(cp))
	cp.set("1", nil, []types.Resource{assignment("boot", "10.2.0.1:80")})
	p.waitFor("boot", p.hasHosts("boot", "10.2.0.1:80"))
	cp.set("2", nil, []types.Resource{assignment("boot", "10.2.0.2:80")})
	p.waitFor("boot updated", p.hasHosts("boot", "10.2.0.2:80"))
	if got := p.stat("cluster.boot.update_success"); got != 2 {
		t.Errorf("cluster.boot.update_success = %d; want 2", got)
	}
}
