package xds

import (
	"errors"
	"sync"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	xdswatch "github.com/legateproxy/legate/xds/watch"
)

// recordingApplier keeps the responses of its streams and NACKs while reject is set.
type recordingApplier struct {
	mu     sync.Mutex
	got    []xdswatch.Response
	reject error
}

func (a *recordingApplier) Apply(_ xdswatch.Stream, r xdswatch.Response) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, r)
	return a.reject
}

func (a *recordingApplier) Failed(xdswatch.Stream) {}

func (a *recordingApplier) responses() []xdswatch.Response {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]xdswatch.Response(nil), a.got...)
}

// TestStreamWildcard checks the watch API for types applied whole: a wildcard stream on ADS
// gets each state-of-the-world response with every resource, an Apply error NACKs it, the same
// applier gets the same Stream back and another applier is refused.
func TestStreamWildcard(t *testing.T) {
	cp := newControlPlane(t, true)
	a := &recordingApplier{reject: errors.New("cluster \"web\": refused")}
	var s xdswatch.Stream
	dr := &bootstrapv3.Bootstrap_DynamicResources{AdsConfig: grpcSource(corev3.ApiConfigSource_GRPC).GetApiConfigSource()}
	p := startProxy(t, dr, withDial(cp), func(ps *proxySetup) {
		ps.afterNew = func(px *proxy) {
			c := px.c
			var err error
			if s, err = c.Stream(xdswatch.ClusterType, adsSource(), true, a); err != nil {
				t.Fatal(err)
			}
			if again, err := c.Stream(xdswatch.ClusterType, adsSource(), true, a); err != nil || again != s {
				t.Errorf("Stream with the same applier = %v, %v; want the first stream", again, err)
			}
			if _, err := c.Stream(xdswatch.ClusterType, adsSource(), true, &recordingApplier{}); err == nil {
				t.Error("Stream with another applier of the same type and transport succeeded; want an error")
			}
			if !c.HasADS() {
				t.Error("HasADS() = false with ads_config set")
			}
		}
	})
	cp.set("1", []types.Resource{staticCluster("web", "10.0.0.1:80"), staticCluster("api", "10.0.0.2:80")}, nil)
	p.waitFor("a response", func() bool { return len(a.responses()) > 0 })
	r := a.responses()[0]
	if r.Version != "1" || len(r.Resources) != 2 || !r.Full || r.Names != nil {
		t.Errorf("response = version %q, %d resources, full %v, names %v; want version 1, 2 resources, full, no names", r.Version, len(r.Resources), r.Full, r.Names)
	}
	p.waitFor("the NACK with the applier's error", func() bool {
		for _, r := range cp.Requests() {
			if r.GetTypeUrl() == xdswatch.ClusterType && r.GetErrorDetail().GetMessage() == a.reject.Error() {
				return true
			}
		}
		return false
	})
}
