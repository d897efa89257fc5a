package cluster

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/stats"
)

// fakeClock is a manual Clock: timers fire when Advance passes their deadline.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	added  chan struct{}
}

type fakeTimer struct {
	c       *fakeClock
	when    time.Time
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Unix(1700000000, 0), added: make(chan struct{}, 100)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	t := &fakeTimer{c: c, when: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	select {
	case c.added <- struct{}{}:
	default:
	}
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	for i, x := range t.c.timers {
		if x == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			return was
		}
	}
	return false
}

// NewTicker is part of Clock; the cluster manager schedules with AfterFunc only.
func (c *fakeClock) NewTicker(time.Duration) clock.Ticker {
	panic("cluster: the manager is not expected to make tickers")
}

// Advance moves time forward and runs due timers on the caller's goroutine.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	rest := c.timers[:0]
	for _, t := range c.timers {
		if !t.when.After(c.now) {
			t.stopped = true
			due = append(due, t)
		} else {
			rest = append(rest, t)
		}
	}
	c.timers = rest
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}

// waitTimer waits until some goroutine has scheduled a timer.
func (c *fakeClock) waitTimer(t *testing.T) {
	t.Helper()
	select {
	case <-c.added:
	case <-time.After(10 * time.Second):
		t.Fatal("no timer was scheduled within 10s")
	}
}

func parseCluster(t testing.TB, y string) *config.Cluster {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	var pc clusterv3.Cluster
	if err := protojson.Unmarshal(j, &pc); err != nil {
		t.Fatalf("decode cluster: %v", err)
	}
	c, err := config.ClusterFromProto(&pc, config.Limits{})
	if err != nil {
		t.Fatalf("ClusterFromProto: %v", err)
	}
	return c
}

func staticYAML(name string, addrs ...string) string {
	s := "name: " + name + "\nload_assignment:\n  endpoints:\n  - lb_endpoints:\n"
	for _, a := range addrs {
		s += fmt.Sprintf("    - endpoint: {address: {socket_address: {address: %s, port_value: 80}}}\n", a)
	}
	return s
}

type testEnv struct {
	m     *Manager
	store *stats.Store
	clock *fakeClock
}

func newEnv(t testing.TB, mod func(*ManagerConfig)) *testEnv {
	t.Helper()
	store, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	cfg := ManagerConfig{Stats: store, Clock: clock, Rand: func() uint64 { return 7 }}
	if mod != nil {
		mod(&cfg)
	}
	m, err := NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{m: m, store: store, clock: clock}
}

func (e *testEnv) values() map[string]uint64 {
	out := map[string]uint64{}
	e.store.Each(stats.KindSet(stats.KindCounter, stats.KindGauge), func(st *stats.Stat) bool {
		out[st.Name()] = st.Value()
		return true
	})
	return out
}

func (e *testEnv) wantStats(t *testing.T, want map[string]uint64) {
	t.Helper()
	got := e.values()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d; want %d", k, got[k], v)
		}
	}
}

func addresses(ps *host.PrioritySet) []string {
	var out []string
	for _, s := range ps.Sets() {
		for _, h := range s.Hosts() {
			out = append(out, fmt.Sprintf("p%d %s %s w%d", s.Priority(), h.Address(), h.HealthString(), h.Weight()))
		}
	}
	sort.Strings(out)
	return out
}

func TestStaticClusters(t *testing.T) {
	var readyCalls int
	e := newEnv(t, func(c *ManagerConfig) {
		c.Init = func(name string) (func(), error) {
			if name != InitTargetName {
				t.Errorf("init target = %q; want %q", name, InitTargetName)
			}
			return func() { readyCalls++ }, nil
		}
	})
	err := e.m.AddStatic([]*config.Cluster{
		parseCluster(t, staticYAML("b", "10.0.0.1", "10.0.0.2")),
		parseCluster(t, staticYAML("a:1", "10.0.0.3")+"alt_stat_name: \"\"\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if readyCalls != 1 {
		t.Errorf("init ready called %d times; want 1", readyCalls)
	}
	var names []string
	for _, c := range e.m.Snapshot() {
		names = append(names, c.Name())
	}
	if diff := cmp.Diff([]string{"a:1", "b"}, names); diff != "" {
		t.Errorf("Snapshot() names mismatch (-want +got):\n%s", diff)
	}
	c := e.m.Get("b")
	h, err := c.Pick(nil)
	if err != nil || h == nil {
		t.Fatalf("Pick() = %v, %v; want a host", h, err)
	}
	if c.Snapshot().HostStats(h) == nil {
		t.Errorf("HostStats(%v) = nil; want stats", h)
	}
	e.wantStats(t, map[string]uint64{
		"cluster_manager.cluster_added":              2,
		"cluster_manager.active_clusters":            2,
		"cluster_manager.warming_clusters":           0,
		"cluster.b.membership_total":                 2,
		"cluster.b.membership_healthy":               2,
		"cluster.b.max_host_weight":                  1,
		"cluster.b.update_attempt":                   1,
		"cluster.b.update_success":                   1,
		"cluster.a_1.membership_total":               1,
		"cluster.b.circuit_breakers.default.rq_open": 0,
	})
	if err := e.m.AddStatic([]*config.Cluster{parseCluster(t, staticYAML("b", "10.0.0.9"))}); err == nil {
		t.Errorf("AddStatic(duplicate) = nil; want a uniqueness error")
	}
}

func TestUpdateMergeWindow(t *testing.T) {
	e := newEnv(t, nil)
	cfg := parseCluster(t, "name: eds\ntype: EDS\neds_cluster_config: {service_name: svc}\ncommon_lb_config: {update_merge_window: 2s}")
	if _, err := e.m.AddOrUpdate(cfg, "v1"); err != nil {
		t.Fatal(err)
	}
	if e.m.Get("eds") != nil {
		t.Fatalf("Get(eds) before the first assignment = non-nil; want nil (warming)")
	}
	e.wantStats(t, map[string]uint64{"cluster_manager.warming_clusters": 1, "cluster.eds.warming_state": 1})
	c := e.m.Warming()[0]
	assign := func(weight uint32, health string) {
		t.Helper()
		cla := &endpointv3.ClusterLoadAssignment{}
		j := fmt.Sprintf(`{"cluster_name":"svc","endpoints":[{"lb_endpoints":[
			{"endpoint":{"address":{"socket_address":{"address":"10.0.0.1","port_value":80}}},"load_balancing_weight":%d,"health_status":%q},
			{"endpoint":{"address":{"socket_address":{"address":"10.0.0.2","port_value":80}}}}]}]}`, weight, health)
		if err := protojson.Unmarshal([]byte(j), cla); err != nil {
			t.Fatal(err)
		}
		if err := c.ApplyAssignment(cla); err != nil {
			t.Fatalf("ApplyAssignment: %v", err)
		}
	}
	assign(1, "HEALTHY") // first update: at once
	if e.m.Get("eds") != c {
		t.Fatalf("Get(eds) after the first assignment is not the warmed cluster")
	}
	want := []string{"p0 10.0.0.1:80 healthy w1", "p0 10.0.0.2:80 healthy w1"}
	if diff := cmp.Diff(want, addresses(c.Snapshot().PrioritySet)); diff != "" {
		t.Fatalf("hosts after first update (-want +got):\n%s", diff)
	}
	e.clock.Advance(500 * time.Millisecond)
	assign(5, "HEALTHY") // weight change inside the window: merged
	assign(5, "UNHEALTHY")
	if diff := cmp.Diff(want, addresses(c.Snapshot().PrioritySet)); diff != "" {
		t.Errorf("hosts inside the merge window (-want +got):\n%s", diff)
	}
	e.clock.Advance(2 * time.Second)
	want = []string{"p0 10.0.0.1:80 /failed_eds_health w5", "p0 10.0.0.2:80 healthy w1"}
	if diff := cmp.Diff(want, addresses(c.Snapshot().PrioritySet)); diff != "" {
		t.Errorf("hosts after the merge window (-want +got):\n%s", diff)
	}
	e.wantStats(t, map[string]uint64{"cluster_manager.cluster_updated_via_merge": 1, "cluster.eds.membership_healthy": 1})

	// A membership change applies at once and cancels a pending merge.
	e.clock.Advance(100 * time.Millisecond)
	assign(7, "UNHEALTHY")
	cla := &endpointv3.ClusterLoadAssignment{}
	if err := protojson.Unmarshal([]byte(`{"cluster_name":"svc","endpoints":[{"priority":1,"lb_endpoints":[{"endpoint":{"address":{"socket_address":{"address":"10.0.0.3","port_value":80}}}}]}]}`), cla); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyAssignment(cla); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"p1 10.0.0.3:80 healthy w1"}, addresses(c.Snapshot().PrioritySet)); diff != "" {
		t.Errorf("hosts after membership change (-want +got):\n%s", diff)
	}
	e.wantStats(t, map[string]uint64{"cluster_manager.update_merge_cancelled": 1, "cluster.eds.membership_change": 2})

	// After the window has passed, a health-only update applies at once.
	e.clock.Advance(3 * time.Second)
	if err := c.ApplyAssignment(cla); err != nil {
		t.Fatal(err)
	}
	e.wantStats(t, map[string]uint64{"cluster.eds.update_no_rebuild": 1})
	c.Snapshot().PrioritySet.Sets()[1].Hosts()[0].SetHealthFlag(host.FailedActiveHC)
	c.HealthChanged()
	e.wantStats(t, map[string]uint64{"cluster_manager.update_out_of_merge_window": 1, "cluster.eds.membership_healthy": 0})
}

func TestEDSAssignment(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := e.m.AddOrUpdate(parseCluster(t, "name: eds\ntype: EDS\ncommon_lb_config: {update_merge_window: 0s}"), "1"); err != nil {
		t.Fatal(err)
	}
	c := e.m.Warming()[0]
	cla := &endpointv3.ClusterLoadAssignment{}
	j := `{"cluster_name":"eds","policy":{"overprovisioning_factor":200,"drop_overloads":[{"category":"lb","drop_percentage":{"numerator":5,"denominator":"HUNDRED"}}]},
	"endpoints":[
	 {"locality":{"zone":"a"},"load_balancing_weight":2,"lb_endpoints":[
	  {"endpoint":{"address":{"socket_address":{"address":"10.0.0.1","port_value":80}}},"health_status":"DRAINING"},
	  {"endpoint":{"address":{"socket_address":{"address":"10.0.0.2","port_value":80}}},"health_status":"TIMEOUT"},
	  {"endpoint":{"address":{"socket_address":{"address":"10.0.0.3","port_value":80}}},"health_status":"DEGRADED"}]},
	 {"locality":{"zone":"b"},"priority":1,"load_balancing_weight":3,"lb_endpoints":[
	  {"endpoint":{"address":{"socket_address":{"address":"10.0.0.4","port_value":80}}}}]}]}`
	if err := protojson.Unmarshal([]byte(j), cla); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyAssignment(cla); err != nil {
		t.Fatal(err)
	}
	snap := c.Snapshot()
	want := []string{
		"p0 10.0.0.1:80 /failed_eds_health/eds_status_draining w1",
		"p0 10.0.0.2:80 /failed_eds_health w1",
		"p0 10.0.0.3:80 /degraded_eds_health w1",
		"p1 10.0.0.4:80 healthy w1",
	}
	if diff := cmp.Diff(want, addresses(snap.PrioritySet)); diff != "" {
		t.Errorf("hosts (-want +got):\n%s", diff)
	}
	if got := snap.PrioritySet.Sets()[0].OverprovisioningFactor(); got != 200 {
		t.Errorf("OverprovisioningFactor() = %d; want 200", got)
	}
	if got := snap.PrioritySet.Sets()[1].LocalityWeights(); !cmp.Equal(got, []uint32{3}) {
		t.Errorf("LocalityWeights() = %v; want [3]", got)
	}
	if diff := cmp.Diff([]config.DropOverload{{Category: "lb", PerMillion: 50000}}, snap.DropOverloads); diff != "" {
		t.Errorf("DropOverloads (-want +got):\n%s", diff)
	}
	bad := &endpointv3.ClusterLoadAssignment{}
	if err := protojson.Unmarshal([]byte(`{"endpoints":[{"lb_endpoints":[{"endpoint":{"address":{"socket_address":{"address":"name.example","port_value":80}}}}]}]}`), bad); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyAssignment(bad); err == nil {
		t.Errorf("ApplyAssignment(hostname endpoint) = nil; want an error")
	}
	if diff := cmp.Diff(want, addresses(c.Snapshot().PrioritySet)); diff != "" {
		t.Errorf("hosts after a rejected assignment changed (-want +got):\n%s", diff)
	}
	empty := &endpointv3.ClusterLoadAssignment{ClusterName: "eds"}
	if err := c.ApplyAssignment(empty); err != nil {
		t.Fatal(err)
	}
	e.wantStats(t, map[string]uint64{"cluster.eds.update_empty": 1, "cluster.eds.update_failure": 1, "cluster.eds.update_success": 2})
}

// TestEDSWeightLimit: the spec limits host weights to 1..100; an assignment with a larger one
// is refused with its field path (a NACK), never clamped, and the hosts keep their weights.
func TestEDSWeightLimit(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := e.m.AddOrUpdate(parseCluster(t, "name: eds\ntype: EDS\ncommon_lb_config: {update_merge_window: 0s}"), "1"); err != nil {
		t.Fatal(err)
	}
	c := e.m.Warming()[0]
	assign := func(weight int) error {
		t.Helper()
		cla := &endpointv3.ClusterLoadAssignment{}
		j := fmt.Sprintf(`{"cluster_name":"eds","endpoints":[{"lb_endpoints":[{"endpoint":{"address":{"socket_address":{"address":"10.0.0.1","port_value":80}}},"load_balancing_weight":%d}]}]}`, weight)
		if err := protojson.Unmarshal([]byte(j), cla); err != nil {
			t.Fatal(err)
		}
		return c.ApplyAssignment(cla)
	}
	if err := assign(100); err != nil {
		t.Fatalf("ApplyAssignment(weight 100) = %v", err)
	}
	for _, w := range []int{101, 200} {
		err := assign(w)
		want := fmt.Sprintf(`cluster "eds": cluster_load_assignment.endpoints[0].lb_endpoints[0].load_balancing_weight = %d; must be in 1..100`, w)
		if err == nil || err.Error() != want {
			t.Errorf("ApplyAssignment(weight %d) = %v; want %q", w, err, want)
		}
	}
	if got := c.Snapshot().PrioritySet.Sets()[0].Hosts()[0].Weight(); got != 100 {
		t.Errorf("weight after the refused assignments = %d; want 100", got)
	}
	e.wantStats(t, map[string]uint64{"cluster.eds.update_failure": 2, "cluster.eds.update_success": 1})
}

func TestCDSUpdatesUnderConcurrentPicks(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := e.m.AddOrUpdate(parseCluster(t, staticYAML("web", "10.0.0.1")), "1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if c := e.m.Get("web"); c != nil {
					if h, err := c.Pick(nil); err == nil {
						c.Snapshot().HostStats(h)
					}
				}
			}
		}()
	}
	for i := range 50 {
		cfg := parseCluster(t, staticYAML("web", fmt.Sprintf("10.0.1.%d", i), "10.0.0.1"))
		changed, err := e.m.AddOrUpdate(cfg, fmt.Sprint(i))
		if err != nil || !changed {
			t.Fatalf("AddOrUpdate #%d = %v, %v; want true, nil", i, changed, err)
		}
		if changed, _ := e.m.AddOrUpdate(cfg, fmt.Sprint(i)); changed {
			t.Fatalf("AddOrUpdate(same config) = true; want false")
		}
		if i%10 == 0 {
			if !e.m.Remove("web") {
				t.Fatalf("Remove(web) = false; want true")
			}
		}
	}
	cancel()
	wg.Wait()
	e.wantStats(t, map[string]uint64{
		"cluster_manager.cluster_added":    6,
		"cluster_manager.cluster_modified": 45,
		"cluster_manager.cluster_removed":  5,
		"cluster_manager.active_clusters":  1,
		"cluster.web.membership_total":     2,
	})
	if e.m.Remove("missing") {
		t.Errorf("Remove(missing) = true; want false")
	}
}

func TestOriginalDst(t *testing.T) {
	e := newEnv(t, nil)
	cfg := parseCluster(t, "name: odst\ntype: ORIGINAL_DST\nlb_policy: CLUSTER_PROVIDED\ncleanup_interval: 1s\noriginal_dst_lb_config: {use_http_header: true}")
	if err := e.m.AddStatic([]*config.Cluster{cfg}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v", err)
		}
	}()
	c := e.m.Get("odst")
	if diff := cmp.Diff([]string{"X-Envoy-Original-Dst-Host", "X-Proxy-Original-Dst-Host"}, c.OriginalDstHeaders()); diff != "" {
		t.Errorf("OriginalDstHeaders (-want +got):\n%s", diff)
	}
	h1, err := c.Pick(&lb.Context{OverrideHost: "10.1.1.1:8080"})
	if err != nil || h1.Address() != "10.1.1.1:8080" {
		t.Fatalf("Pick(new destination) = %v, %v; want 10.1.1.1:8080", h1, err)
	}
	h2, err := c.Pick(&lb.Context{OverrideHost: "10.1.1.1:8080"})
	if err != nil || h2 != h1 {
		t.Fatalf("Pick(same destination) = %v, %v; want the same host", h2, err)
	}
	if _, err := c.Pick(&lb.Context{OverrideHost: "not-an-address"}); err == nil {
		t.Errorf("Pick(invalid) = nil error; want an error")
	}
	e.wantStats(t, map[string]uint64{"cluster.odst.original_dst_host_invalid": 1, "cluster.odst.membership_total": 1})
	e.clock.waitTimer(t)
	e.clock.Advance(time.Second) // used since the last sweep: kept
	e.clock.waitTimer(t)         // the sweep is done once the next one is scheduled
	if got := c.Snapshot().PrioritySet.Hosts(); got != 1 {
		t.Fatalf("hosts after first sweep = %d; want 1", got)
	}
	e.clock.Advance(time.Second) // unused: removed
	e.clock.waitTimer(t)
	if got := c.Snapshot().PrioritySet.Hosts(); got != 0 {
		t.Errorf("hosts after second sweep = %d; want 0", got)
	}
}

func TestAggregate(t *testing.T) {
	e := newEnv(t, nil)
	agg := aggregateCluster(t, "primary", "secondary")
	err := e.m.AddStatic([]*config.Cluster{agg,
		parseCluster(t, staticYAML("primary", "10.0.0.1")),
		parseCluster(t, staticYAML("secondary", "10.0.0.2")),
	})
	if err != nil {
		t.Fatal(err)
	}
	c := e.m.Get("agg")
	if got := c.Snapshot().PrioritySet.Len(); got != 2 {
		t.Fatalf("aggregate levels = %d; want 2", got)
	}
	h, err := c.Pick(nil)
	if err != nil || h.Address() != "10.0.0.1:80" {
		t.Fatalf("Pick() = %v, %v; want the primary host", h, err)
	}
	e.m.Get("primary").Snapshot().PrioritySet.Sets()[0].Hosts()[0].SetHealthFlag(host.FailedActiveHC)
	e.m.Get("primary").HealthChanged()
	h, err = c.Pick(nil)
	if err != nil || h.Address() != "10.0.0.2:80" {
		t.Errorf("Pick() with primary down = %v, %v; want the secondary host", h, err)
	}
}

func TestConfigDump(t *testing.T) {
	e := newEnv(t, nil)
	if err := e.m.AddStatic([]*config.Cluster{parseCluster(t, staticYAML("b", "10.0.0.1")), parseCluster(t, staticYAML("a", "10.0.0.2"))}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.AddOrUpdate(parseCluster(t, "name: d\ntype: EDS"), "v7"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.AddOrUpdate(parseCluster(t, staticYAML("c", "10.0.0.3")), "v8"); err != nil {
		t.Fatal(err)
	}
	e.m.SetVersionInfo("v8")
	d := e.m.ConfigDump(func(n string) bool { return n != "b" })
	j, err := protojson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		VersionInfo    string `json:"versionInfo"`
		StaticClusters []struct {
			Cluster struct{ Name string } `json:"cluster"`
		} `json:"staticClusters"`
		DynamicActiveClusters []struct {
			VersionInfo string                `json:"versionInfo"`
			Cluster     struct{ Name string } `json:"cluster"`
		} `json:"dynamicActiveClusters"`
		DynamicWarmingClusters []struct {
			Cluster struct{ Name string } `json:"cluster"`
		} `json:"dynamicWarmingClusters"`
	}
	if err := jsonUnmarshal(j, &got); err != nil {
		t.Fatal(err)
	}
	if got.VersionInfo != "v8" || len(got.StaticClusters) != 1 || got.StaticClusters[0].Cluster.Name != "a" ||
		len(got.DynamicActiveClusters) != 1 || got.DynamicActiveClusters[0].VersionInfo != "v8" ||
		len(got.DynamicWarmingClusters) != 1 || got.DynamicWarmingClusters[0].Cluster.Name != "d" {
		t.Errorf("ConfigDump() = %s; want static [a], active [c v8], warming [d]", j)
	}
}
