package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/health"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/outlier"
)

// fakeProber answers health checks from a table: a host passes unless marked failing; a held
// host's check waits until released.
type fakeProber struct {
	mu   sync.Mutex
	fail map[string]bool
	hold map[string]chan struct{}
}

func newFakeProber() *fakeProber {
	return &fakeProber{fail: map[string]bool{}, hold: map[string]chan struct{}{}}
}

func (p *fakeProber) setFail(addr string, fail bool) {
	p.mu.Lock()
	p.fail[addr] = fail
	p.mu.Unlock()
}

// holdChecks makes checks of addr wait until the returned function is called.
func (p *fakeProber) holdChecks(addr string) (release func()) {
	ch := make(chan struct{})
	p.mu.Lock()
	p.hold[addr] = ch
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		delete(p.hold, addr)
		p.mu.Unlock()
		close(ch)
	}
}

func (p *fakeProber) Session(h *host.Host) health.ProbeSession {
	return &fakeProbe{p: p, addr: h.Address()}
}

type fakeProbe struct {
	p    *fakeProber
	addr string
}

func (s *fakeProbe) Check(ctx context.Context) health.Result {
	s.p.mu.Lock()
	hold, fail := s.p.hold[s.addr], s.p.fail[s.addr]
	s.p.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return health.Result{Outcome: health.Failed, Failure: health.Network, Err: ctx.Err()}
		}
	}
	if fail {
		return health.Result{Outcome: health.Failed, Failure: health.Active, HTTPStatus: 503, Err: errors.New("503")}
	}
	return health.Result{Outcome: health.Succeeded}
}

func (s *fakeProbe) Close() {}

// hcEnv is a manager whose health checks use a fakeProber and whose health and outlier
// callbacks are counted on events.
type hcEnv struct {
	*testEnv
	prober *fakeProber
	events chan struct{}
	ready  chan struct{}
}

func newHCEnv(t *testing.T) *hcEnv {
	t.Helper()
	ready := make(chan struct{}, 1)
	e := newEnv(t, func(cfg *ManagerConfig) {
		cfg.Init = func(string) (func(), error) { return func() { ready <- struct{}{} }, nil }
	})
	h := &hcEnv{testEnv: e, prober: newFakeProber(), events: make(chan struct{}, 4096), ready: ready}
	e.m.testProber = h.prober
	e.m.healthEvent = func() { h.events <- struct{}{} }
	return h
}

// waitEvents waits for n health or outlier callbacks to finish.
func (e *hcEnv) waitEvents(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		select {
		case <-e.events:
		case <-time.After(10 * time.Second):
			t.Fatalf("got %d of %d health callbacks within 10s", i, n)
		}
	}
}

// collectFailures subscribes to OnHostHealthFailure for the test and returns the sorted
// addresses notified so far; every notification must carry wantClose.
func (e *hcEnv) collectFailures(t *testing.T, wantClose bool) func() []string {
	var mu sync.Mutex
	var failed []string
	t.Cleanup(e.m.OnHostHealthFailure(func(h *host.Host, closeConns bool) {
		mu.Lock()
		defer mu.Unlock()
		if closeConns != wantClose {
			t.Errorf("OnHostHealthFailure(%s) closeConnections = %t; want %t", h.Address(), closeConns, wantClose)
		}
		failed = append(failed, h.Address())
	}))
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Sorted(slices.Values(failed))
	}
}

const hcYAML = `
health_checks:
- timeout: 1s
  interval: 5s
  no_traffic_interval: 5s
  unhealthy_threshold: 2
  healthy_threshold: 2
  http_health_check: {path: /healthz}
`

func flagsOf(ps *host.PrioritySet) map[string]string {
	out := map[string]string{}
	for _, s := range ps.Sets() {
		for _, h := range s.Hosts() {
			out[h.Address()] = h.HealthFlags().String()
		}
	}
	return out
}

func healthyCount(ps *host.PrioritySet) int {
	n := 0
	for _, s := range ps.Sets() {
		n += len(s.HealthyHosts())
	}
	return n
}

func TestHealthCheckedClusterWarmsAfterFirstRound(t *testing.T) {
	e := newHCEnv(t)
	if err := e.m.AddStatic([]*config.Cluster{parseCluster(t, staticYAML("web", "10.0.0.1", "10.0.0.2")+hcYAML)}); err != nil {
		t.Fatal(err)
	}
	if c := e.m.Get("web"); c != nil {
		t.Fatalf("Get(web) = %v before any check; want nil (warming)", c)
	}
	w := e.m.Warming()
	if len(w) != 1 {
		t.Fatalf("Warming() has %d clusters; want 1", len(w))
	}
	want := map[string]string{"10.0.0.1:80": "/failed_active_hc", "10.0.0.2:80": "/failed_active_hc"}
	if diff := cmp.Diff(want, flagsOf(w[0].Snapshot().PrioritySet)); diff != "" {
		t.Errorf("initial flags (-want +got):\n%s", diff)
	}
	select {
	case <-e.ready:
		t.Fatal("init target ready before the first health checks")
	default:
	}
	runManager(t, e.testEnv)
	e.waitEvents(t, 2)
	select {
	case <-e.ready:
	case <-time.After(10 * time.Second):
		t.Fatal("init target not ready after the first round of checks")
	}
	c := e.m.Get("web")
	if c == nil {
		t.Fatal("Get(web) = nil after the first round; want the warm cluster")
	}
	// Warming publishes the checked hosts at once, not after the merge window.
	if got := healthyCount(c.Snapshot().PrioritySet); got != 2 {
		t.Errorf("healthy hosts = %d; want 2", got)
	}
	e.wantStats(t, map[string]uint64{
		"cluster.web.health_check.attempt": 2,
		"cluster.web.health_check.success": 2,
		"cluster.web.health_check.healthy": 2,
		"cluster.web.membership_healthy":   2,
		"cluster.web.warming_state":        0,
	})
}

func TestHealthFailurePublishesThroughMergeWindow(t *testing.T) {
	e := newHCEnv(t)
	y := staticYAML("web", "10.0.0.1", "10.0.0.2", "10.0.0.3") + hcYAML + "close_connections_on_host_health_failure: true\n"
	if err := e.m.AddStatic([]*config.Cluster{parseCluster(t, y)}); err != nil {
		t.Fatal(err)
	}
	failed := e.collectFailures(t, true)
	runManager(t, e.testEnv)
	e.waitEvents(t, 3)
	c := e.m.Get("web")

	// Two hosts fail at the same tick: the first change is out of the merge window and applies
	// at once; the second (held back until the first is published) waits for the window.
	e.prober.setFail("10.0.0.1:80", true)
	e.prober.setFail("10.0.0.2:80", true)
	release := e.prober.holdChecks("10.0.0.2:80")
	e.clock.Advance(5 * time.Second)
	e.waitEvents(t, 2)
	if got := healthyCount(c.Snapshot().PrioritySet); got != 2 {
		t.Errorf("healthy hosts after the first failure = %d; want 2", got)
	}
	release()
	e.waitEvents(t, 1)
	if got := healthyCount(c.Snapshot().PrioritySet); got != 2 {
		t.Errorf("healthy hosts inside the merge window = %d; want 2 (the second change is merged)", got)
	}
	e.clock.Advance(time.Second)
	if got := healthyCount(c.Snapshot().PrioritySet); got != 1 {
		t.Errorf("healthy hosts after the merge window = %d; want 1", got)
	}
	e.wantStats(t, map[string]uint64{
		"cluster_manager.update_out_of_merge_window": 1,
		"cluster_manager.cluster_updated_via_merge":  1,
		"cluster.web.health_check.failure":           2,
		"cluster.web.health_check.healthy":           1,
	})
	if diff := cmp.Diff([]string{"10.0.0.1:80", "10.0.0.2:80"}, failed()); diff != "" {
		t.Errorf("health failure notifications (-want +got):\n%s", diff)
	}

	// With two of three hosts failed, the cluster is below the 50% panic threshold: the
	// balancer uses every host.
	picked := map[string]bool{}
	for range 30 {
		h, err := c.Pick(&lb.Context{})
		if err != nil {
			t.Fatalf("Pick() = %v", err)
		}
		picked[h.Address()] = true
	}
	if len(picked) != 3 {
		t.Errorf("picks in panic mode reached %d hosts; want all 3", len(picked))
	}
}

// TestHealthGRPCCheckOnHTTP2Cluster: a gRPC health check on an HTTP/2 cluster is accepted. The
// refusals (two health checks, gRPC without HTTP/2, bad outlier detection) are the config path's,
// tested in config's TestClusterErrors.
func TestHealthGRPCCheckOnHTTP2Cluster(t *testing.T) {
	e := newHCEnv(t)
	y := staticYAML("web", "10.0.0.1") + "http2_protocol_options: {}\n" + `
health_checks:
- timeout: 1s
  interval: 5s
  unhealthy_threshold: 2
  healthy_threshold: 2
  grpc_health_check: {}
`
	if err := e.m.AddStatic([]*config.Cluster{parseCluster(t, y)}); err != nil {
		t.Errorf("AddStatic() = %v; want nil", err)
	}
}

func assignment(t *testing.T, addrs ...string) *endpointv3.ClusterLoadAssignment {
	t.Helper()
	j := `{"cluster_name":"eds","endpoints":[{"lb_endpoints":[`
	for i, a := range addrs {
		if i > 0 {
			j += ","
		}
		j += `{"endpoint":{"address":{"socket_address":{"address":"` + a + `","port_value":80}}}}`
	}
	j += `]}]}`
	cla := &endpointv3.ClusterLoadAssignment{}
	if err := protojson.Unmarshal([]byte(j), cla); err != nil {
		t.Fatal(err)
	}
	return cla
}

func TestHealthCheckedEDSMembership(t *testing.T) {
	tests := []struct {
		name string
		// extra cluster YAML
		extra string
		// wantAfterRemoval are the hosts right after discovery drops 10.0.0.2.
		wantAfterRemoval map[string]string
	}{
		{
			name:             "removed host stays while it passes",
			extra:            "common_lb_config: {ignore_new_hosts_until_first_hc: true}\n",
			wantAfterRemoval: map[string]string{"10.0.0.1:80": "healthy", "10.0.0.2:80": "/pending_dynamic_removal"},
		},
		{
			name:             "ignore_health_on_host_removal",
			extra:            "common_lb_config: {ignore_new_hosts_until_first_hc: true}\nignore_health_on_host_removal: true\n",
			wantAfterRemoval: map[string]string{"10.0.0.1:80": "healthy"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newHCEnv(t)
			if _, err := e.m.AddOrUpdate(parseCluster(t, "name: eds\ntype: EDS\n"+hcYAML+tt.extra), "1"); err != nil {
				t.Fatal(err)
			}
			runManager(t, e.testEnv)
			c := e.m.Warming()[0]
			if err := c.ApplyAssignment(assignment(t, "10.0.0.1")); err != nil {
				t.Fatal(err)
			}
			e.waitEvents(t, 1)
			if e.m.Get("eds") != c {
				t.Fatal("EDS cluster not warm after its first host's first check")
			}

			// A host added later starts failed and excluded until its first check.
			release := e.prober.holdChecks("10.0.0.2:80")
			if err := c.ApplyAssignment(assignment(t, "10.0.0.1", "10.0.0.2")); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"10.0.0.1:80": "healthy", "10.0.0.2:80": "/failed_active_hc/pending_active_hc"}
			if diff := cmp.Diff(want, flagsOf(c.Snapshot().PrioritySet)); diff != "" {
				t.Errorf("flags of a new host (-want +got):\n%s", diff)
			}
			if n := len(c.Snapshot().PrioritySet.Sets()[0].ExcludedHosts()); n != 1 {
				t.Errorf("excluded hosts = %d; want 1", n)
			}
			release()
			e.waitEvents(t, 1)
			want = map[string]string{"10.0.0.1:80": "healthy", "10.0.0.2:80": "healthy"}
			if diff := cmp.Diff(want, flagsOf(c.Snapshot().PrioritySet)); diff != "" {
				t.Errorf("flags after the first check (-want +got):\n%s", diff)
			}

			if err := c.ApplyAssignment(assignment(t, "10.0.0.1")); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantAfterRemoval, flagsOf(c.Snapshot().PrioritySet)); diff != "" {
				t.Errorf("hosts after discovery dropped one (-want +got):\n%s", diff)
			}
			if len(tt.wantAfterRemoval) == 1 {
				return
			}
			// The kept host fails its next check: EDS removes it at once.
			e.prober.setFail("10.0.0.2:80", true)
			e.clock.Advance(5 * time.Second)
			e.waitEvents(t, 2)
			want = map[string]string{"10.0.0.1:80": "healthy"}
			if diff := cmp.Diff(want, flagsOf(c.Snapshot().PrioritySet)); diff != "" {
				t.Errorf("hosts after the removed host failed (-want +got):\n%s", diff)
			}
			e.wantStats(t, map[string]uint64{"cluster.eds.health_check.healthy": 1, "cluster.eds.membership_total": 1})
		})
	}
}

const outlierYAML = `
outlier_detection:
  consecutive_5xx: 3
  max_ejection_percent: 50
  interval: 10s
  base_ejection_time: 30s
`

func TestOutlierEjectionRepublishes(t *testing.T) {
	e := newHCEnv(t)
	if err := e.m.AddStatic([]*config.Cluster{parseCluster(t, staticYAML("web", "10.0.0.1", "10.0.0.2")+outlierYAML)}); err != nil {
		t.Fatal(err)
	}
	failed := e.collectFailures(t, false)
	runManager(t, e.testEnv)
	c := e.m.Get("web")
	if c == nil {
		t.Fatal("a cluster without health checks is warm at once")
	}
	snap := c.Snapshot()
	if snap.Outlier() == nil || c.Outlier() == nil {
		t.Fatal("Outlier() = nil; want the detector")
	}
	h := snap.PrioritySet.Sets()[0].Hosts()[0]
	for range 3 {
		c.ReportResult(h, outlier.HTTPStatus(503))
	}
	e.waitEvents(t, 1)
	if !h.HasHealthFlag(host.FailedOutlierCheck) {
		t.Fatalf("flags = %s; want /failed_outlier_check", h.HealthFlags())
	}
	// The ejection is merged: the last apply was at start-up, inside the window.
	if got := healthyCount(c.Snapshot().PrioritySet); got != 2 {
		t.Errorf("healthy hosts before the merge window ends = %d; want 2", got)
	}
	e.clock.Advance(time.Second)
	if got := healthyCount(c.Snapshot().PrioritySet); got != 1 {
		t.Errorf("healthy hosts after the merge window = %d; want 1", got)
	}
	e.wantStats(t, map[string]uint64{
		"cluster.web.outlier_detection.ejections_enforced_consecutive_5xx": 1,
		"cluster.web.outlier_detection.ejections_active":                   1,
		"cluster.web.membership_healthy":                                   1,
	})
	if diff := cmp.Diff([]string{"10.0.0.1:80"}, failed()); diff != "" {
		t.Errorf("health failure notifications (-want +got):\n%s", diff)
	}
	// base_ejection_time later the host returns (the interval sweep at 10 s, 20 s, 30 s).
	for range 3 {
		e.clock.Advance(10 * time.Second)
	}
	e.waitEvents(t, 1)
	if h.HasHealthFlag(host.FailedOutlierCheck) {
		t.Errorf("flags = %s after base_ejection_time; want healthy", h.HealthFlags())
	}
}

func TestActiveHealthCheckUnejects(t *testing.T) {
	e := newHCEnv(t)
	if err := e.m.AddStatic([]*config.Cluster{parseCluster(t, staticYAML("web", "10.0.0.1", "10.0.0.2")+hcYAML+outlierYAML)}); err != nil {
		t.Fatal(err)
	}
	runManager(t, e.testEnv)
	e.waitEvents(t, 2)
	c := e.m.Get("web")
	h := c.Snapshot().PrioritySet.Sets()[0].Hosts()[0]
	for range 3 {
		c.Snapshot().Outlier().Report(h, outlier.HTTPStatus(500))
	}
	e.waitEvents(t, 1)
	if !h.HasHealthFlag(host.FailedOutlierCheck) {
		t.Fatalf("flags = %s; want /failed_outlier_check", h.HealthFlags())
	}
	e.clock.Advance(5 * time.Second) // both hosts are checked; the pass unejects h
	e.waitEvents(t, 3)
	if h.HasHealthFlag(host.FailedOutlierCheck) {
		t.Errorf("flags = %s after a passing health check; want healthy", h.HealthFlags())
	}
	e.wantStats(t, map[string]uint64{"cluster.web.outlier_detection.ejections_active": 0})
}

func TestHealthEventLogReopen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hc.log")
	e := newHCEnv(t)
	y := staticYAML("web", "10.0.0.1") + hcYAML + "  event_log_path: " + path + "\n"
	if err := e.m.AddStatic([]*config.Cluster{parseCluster(t, y)}); err != nil {
		t.Fatal(err)
	}
	runManager(t, e.testEnv)
	e.waitEvents(t, 1)
	rotated := filepath.Join(dir, "hc.log.1")
	if err := os.Rename(path, rotated); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Reopen(); err != nil {
		t.Fatalf("Reopen() = %v", err)
	}
	e.prober.setFail("10.0.0.1:80", true)
	e.clock.Advance(5 * time.Second)
	e.waitEvents(t, 1)
	for _, tt := range []struct{ file, want string }{
		{rotated, `"add_healthy_event":{"first_check":true}`},
		{path, `"eject_unhealthy_event":{"failure_type":"ACTIVE","http_status_code":503}`},
	} {
		b, err := os.ReadFile(tt.file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), tt.want) {
			t.Errorf("%s = %q; want a line with %s", filepath.Base(tt.file), b, tt.want)
		}
	}
}

func TestCDSRemovalReleasesHealthState(t *testing.T) {
	e := newHCEnv(t)
	if _, err := e.m.AddOrUpdate(parseCluster(t, staticYAML("web", "10.0.0.1", "10.0.0.2")+hcYAML+outlierYAML), "1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.m.Run(ctx) }()
	e.waitEvents(t, 2)
	c := e.m.Get("web")
	h := c.Snapshot().PrioritySet.Sets()[0].Hosts()[0]
	for range 3 {
		c.ReportResult(h, outlier.HTTPStatus(502))
	}
	e.waitEvents(t, 1)
	e.wantStats(t, map[string]uint64{"cluster.web.health_check.healthy": 2, "cluster.web.outlier_detection.ejections_active": 1})
	if !e.m.Remove("web") {
		t.Fatal("Remove(web) = false")
	}
	cancel()
	if err := <-done; err != nil { // Run waits for the cluster's health state to be released
		t.Fatal(err)
	}
	if _, ok := e.values()["cluster.web.health_check.healthy"]; ok {
		t.Errorf("cluster.web.health_check.healthy still registered after the cluster was removed")
	}
}

// BenchmarkHealthChangedRepublish is the cost of one health flip in a 1,000-host cluster without
// a merge window: a new snapshot (partitions, balancer) per change.
func BenchmarkHealthChangedRepublish(b *testing.B) {
	e := newEnv(b, nil)
	addrs := make([]string, 1000)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)
	}
	y := staticYAML("web", addrs...) + "common_lb_config: {update_merge_window: 0s}\n"
	if err := e.m.AddStatic([]*config.Cluster{parseCluster(b, y)}); err != nil {
		b.Fatal(err)
	}
	c := e.m.Get("web")
	h := c.Snapshot().PrioritySet.Sets()[0].Hosts()[0]
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			h.SetHealthFlag(host.FailedActiveHC)
		} else {
			h.ClearHealthFlag(host.FailedActiveHC)
		}
		c.HealthChanged()
	}
}

// TestEDSHealthComposesWithActiveHealth checks that EDS health_status and active health checking
// each own their flags: neither clears the other's, and the host is healthy only when both agree.
func TestEDSHealthComposesWithActiveHealth(t *testing.T) {
	e := newHCEnv(t)
	if _, err := e.m.AddOrUpdate(parseCluster(t, "name: eds\ntype: EDS\ncommon_lb_config: {update_merge_window: 0s}\n"+hcYAML), "1"); err != nil {
		t.Fatal(err)
	}
	runManager(t, e.testEnv)
	c := e.m.Warming()[0]
	withStatus := func(status string) *endpointv3.ClusterLoadAssignment {
		cla := &endpointv3.ClusterLoadAssignment{}
		j := `{"cluster_name":"eds","endpoints":[{"lb_endpoints":[{"endpoint":{"address":{"socket_address":{"address":"10.0.0.1","port_value":80}}},"health_status":"` + status + `"}]}]}`
		if err := protojson.Unmarshal([]byte(j), cla); err != nil {
			t.Fatal(err)
		}
		return cla
	}
	if err := c.ApplyAssignment(withStatus("UNHEALTHY")); err != nil {
		t.Fatal(err)
	}
	e.waitEvents(t, 1) // first check passes: only the active-HC flag clears
	steps := []struct {
		name string
		do   func()
		want string
	}{
		{"EDS unhealthy, check passed", func() {}, "/failed_eds_health"},
		{"check fails", func() {
			e.prober.setFail("10.0.0.1:80", true)
			e.clock.Advance(5 * time.Second)
			e.waitEvents(t, 1)
		}, "/failed_active_hc/failed_eds_health"},
		{"EDS healthy again", func() {
			if err := c.ApplyAssignment(withStatus("HEALTHY")); err != nil {
				t.Fatal(err)
			}
		}, "/failed_active_hc"},
		{"check passes twice", func() {
			e.prober.setFail("10.0.0.1:80", false)
			e.clock.Advance(5 * time.Second)
			e.waitEvents(t, 1)
			e.clock.Advance(5 * time.Second)
			e.waitEvents(t, 1)
		}, "healthy"},
	}
	for _, s := range steps {
		s.do()
		snap := c.Snapshot()
		if got := flagsOf(snap.PrioritySet)["10.0.0.1:80"]; got != s.want {
			t.Errorf("%s: flags = %s; want %s", s.name, got, s.want)
		}
		wantHealthy := 0
		if s.want == "healthy" {
			wantHealthy = 1
		}
		if got := healthyCount(snap.PrioritySet); got != wantHealthy {
			t.Errorf("%s: healthy hosts in the snapshot = %d; want %d", s.name, got, wantHealthy)
		}
	}
}
