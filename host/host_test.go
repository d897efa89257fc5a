package host

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestHealthString(t *testing.T) {
	tests := []struct {
		name  string
		flags HealthFlag
		want  string
	}{
		{"none", 0, "healthy"},
		{"one", FailedOutlierCheck, "/failed_outlier_check"},
		// The example of the admin reference, in Envoy's fixed order whatever the bit order.
		{"reference example", EDSStatusDraining | PendingDynamicRemoval | DegradedEDSHealth | DegradedActiveHC | FailedOutlierCheck | FailedActiveHC,
			"/failed_active_hc/failed_outlier_check/degraded_active_hc/degraded_eds_health/pending_dynamic_removal/eds_status_draining"},
		{"all", FailedActiveHC | FailedOutlierCheck | FailedEDSHealth | DegradedActiveHC | DegradedEDSHealth | PendingDynamicRemoval | PendingActiveHC | ExcludedViaImmediateHCFail | ActiveHCTimeout | EDSStatusDraining,
			"/failed_active_hc/failed_outlier_check/failed_eds_health/degraded_active_hc/degraded_eds_health/pending_dynamic_removal/pending_active_hc/excluded_via_immediate_hc_fail/active_hc_timeout/eds_status_draining"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.flags.String(); got != tc.want {
				t.Errorf("String() = %q; want %q", got, tc.want)
			}
		})
	}
}

func TestCoarseHealth(t *testing.T) {
	tests := []struct {
		flags    HealthFlag
		want     Health
		excluded bool
	}{
		{0, Healthy, false},
		{PendingDynamicRemoval, Healthy, false},
		{DegradedActiveHC, Degraded, false},
		{DegradedEDSHealth | FailedEDSHealth, Unhealthy, false},
		{ActiveHCTimeout, Unhealthy, false},
		{EDSStatusDraining, Unhealthy, false},
		{PendingActiveHC, Healthy, true},
		{ExcludedViaImmediateHCFail | FailedActiveHC, Unhealthy, true},
	}
	for _, tc := range tests {
		t.Run(tc.flags.String(), func(t *testing.T) {
			if got := tc.flags.Coarse(); got != tc.want {
				t.Errorf("Coarse() = %v; want %v", got, tc.want)
			}
			if got := tc.flags.Excluded(); got != tc.excluded {
				t.Errorf("Excluded() = %v; want %v", got, tc.excluded)
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name       string
		cfg        Config
		wantErr    bool
		wantWeight uint32
	}{
		{"default weight", Config{Address: "10.0.0.1:80"}, false, 1},
		{"max weight", Config{Address: "10.0.0.1:80", Weight: 100}, false, 100},
		{"weight too large", Config{Address: "10.0.0.1:80", Weight: 101}, true, 0},
		{"no address", Config{}, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := New(tc.cfg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("New() error = %v; want error %v", err, tc.wantErr)
			}
			if err == nil && h.Weight() != tc.wantWeight {
				t.Errorf("Weight() = %d; want %d", h.Weight(), tc.wantWeight)
			}
		})
	}
}

func TestSetWeightNeverClamps(t *testing.T) {
	h, err := New(Config{Address: "10.0.0.1:80", Weight: 7})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []uint32{0, 101, 200} {
		h.SetWeight(w)
		if got := h.Weight(); got != 7 {
			t.Errorf("after SetWeight(%d) Weight() = %d; want 7 (unchanged)", w, got)
		}
	}
	h.SetWeight(100)
	if got := h.Weight(); got != 100 {
		t.Errorf("after SetWeight(100) Weight() = %d; want 100", got)
	}
}

func TestAtomicFlagsAndCounters(t *testing.T) {
	h, err := New(Config{Address: "10.0.0.1:80"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				h.AddActiveRequests(1)
				h.AddActiveRequests(-1)
			}
			if i%2 == 0 {
				h.SetHealthFlag(FailedActiveHC)
			} else {
				h.SetHealthFlag(FailedOutlierCheck)
			}
		}()
	}
	wg.Wait()
	if got := h.ActiveRequests(); got != 0 {
		t.Errorf("ActiveRequests() = %d; want 0", got)
	}
	if got := h.HealthString(); got != "/failed_active_hc/failed_outlier_check" {
		t.Errorf("HealthString() = %q; want both failure flags", got)
	}
	if prev := h.ClearHealthFlag(FailedActiveHC | FailedOutlierCheck); !prev.Excluded() && prev.Coarse() != Unhealthy {
		t.Errorf("ClearHealthFlag() previous = %v; want unhealthy", prev)
	}
	if !h.Healthy() {
		t.Errorf("Healthy() = false after clearing; want true")
	}
}

func TestSetPartitions(t *testing.T) {
	a, b := Locality{Zone: "a"}, Locality{Zone: "b"}
	mk := func(addr string, loc Locality, f HealthFlag) *Host {
		h, err := New(Config{Address: addr, Locality: loc, Health: f})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	hs := []*Host{
		mk("1:1", a, 0), mk("2:2", b, 0), mk("3:3", b, DegradedActiveHC),
		mk("4:4", b, FailedActiveHC), mk("5:5", a, PendingActiveHC),
	}
	s, err := NewSet(SetConfig{Hosts: hs, LocalLocality: &b, LocalityWeights: map[Locality]uint32{a: 10, b: 20}})
	if err != nil {
		t.Fatal(err)
	}
	addrs := func(hs []*Host) []string {
		var out []string
		for _, h := range hs {
			out = append(out, h.Address())
		}
		return out
	}
	got := map[string][]string{
		"healthy": addrs(s.HealthyHosts()), "degraded": addrs(s.DegradedHosts()), "excluded": addrs(s.ExcludedHosts()),
		"local locality": addrs(s.HostsPerLocality()[0]), "other locality": addrs(s.HostsPerLocality()[1]),
	}
	want := map[string][]string{
		"healthy": {"1:1", "2:2"}, "degraded": {"3:3"}, "excluded": {"5:5"},
		"local locality": {"2:2", "3:3", "4:4"}, "other locality": {"1:1", "5:5"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("partitions mismatch (-want +got):\n%s", diff)
	}
	if !s.HasLocalLocality() {
		t.Errorf("HasLocalLocality() = false; want true")
	}
	// Zone b: 1 healthy of 3 → 20 × min(1, 1.4/3); zone a: 1 of 1 non-excluded → 10.
	approx := cmpopts.EquateApprox(0, 1e-9)
	if diff := cmp.Diff([]float64{20 * 1.4 / 3, 10}, s.HealthyLocalityWeights(), approx); diff != "" {
		t.Errorf("HealthyLocalityWeights() mismatch (-want +got):\n%s", diff)
	}
	f, err := s.Filter(func(h *Host) bool { return h.Address() != "4:4" }, true, true)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]uint32{13, 10}, f.LocalityWeights()); diff != "" {
		t.Errorf("scaled LocalityWeights() mismatch (-want +got):\n%s", diff)
	}
}

func TestPrioritySet(t *testing.T) {
	h0, _ := New(Config{Address: "1:1"})
	h2, _ := New(Config{Address: "2:2", Priority: 2})
	ps, err := Build([]*Host{h0, h2}, SetConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if ps.Len() != 3 || len(ps.Sets()[1].Hosts()) != 0 || ps.Sets()[2].Hosts()[0] != h2 || ps.Hosts() != 2 {
		t.Errorf("Build() levels = %d, hosts = %d; want 3 levels (P1 empty), 2 hosts", ps.Len(), ps.Hosts())
	}
	s, _ := NewSet(SetConfig{Priority: 1})
	if _, err := NewPrioritySet(s, s); err == nil {
		t.Errorf("NewPrioritySet(duplicate priority) error = nil; want error")
	}
}

// TestActiveRequestsEndOnTheirLine: a request counted on one P and ended on another (a goroutine
// that moved, or here another goroutine) comes off the line it was counted on, so no P's line
// drifts and the total is exact.
func TestActiveRequestsEndOnTheirLine(t *testing.T) {
	h, err := New(Config{Address: "10.0.0.1:80"})
	if err != nil {
		t.Fatal(err)
	}
	if tok := h.ActiveRequestStarted(); tok != 0 {
		t.Fatalf("ActiveRequestStarted() before TrackActiveRequests = %d; want 0 (not counted)", tok)
	}
	h.TrackActiveRequests()
	tokens := make(chan uint8, 64)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 500 {
				tokens <- h.ActiveRequestStarted()
			}
		})
		wg.Go(func() {
			for range 500 {
				h.ActiveRequestEnded(<-tokens)
			}
		})
	}
	wg.Wait()
	if got := h.ActiveRequests(); got != 0 {
		t.Errorf("ActiveRequests() = %d; want 0", got)
	}
	for p := range maxActiveLines {
		if got := h.ActiveRequestsOn(p); got != 0 {
			t.Errorf("ActiveRequestsOn(%d) = %d; want 0", p, got)
		}
	}
}

// TestActiveLinesFollowGOMAXPROCS raises GOMAXPROCS after a host's in-flight lines were made
// for one P: a request started on a P beyond them counts on a line of its own (not P 0's), a
// balancer's handle made before reads it, and the counts stay exact as requests end.
func TestActiveLinesFollowGOMAXPROCS(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	h, err := New(Config{Address: "10.0.0.1:80"})
	if err != nil {
		t.Fatal(err)
	}
	handle := h.Lines()
	if n := h.activeN.Load(); n != 1 {
		t.Fatalf("lines made with GOMAXPROCS 1 = %d; want 1", n)
	}
	const procs = 4
	runtime.GOMAXPROCS(procs)
	// Goroutines start requests until one was counted on a line other than P 0's (the runtime
	// starts the idle Ps' threads when goroutines are runnable); bounded, not timed.
	var mu sync.Mutex
	var tokens []uint8
	var beyond atomic.Bool
	var wg sync.WaitGroup
	for range procs {
		wg.Go(func() {
			for i := 0; i < 100_000 && !beyond.Load(); i++ {
				tok := h.ActiveRequestStarted()
				mu.Lock()
				tokens = append(tokens, tok)
				mu.Unlock()
				if tok > 1 {
					beyond.Store(true)
				}
				if i%64 == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	wg.Wait()
	if !beyond.Load() {
		t.Fatal("no request was counted on a line other than P 0's")
	}
	perLine := map[int]int64{}
	for _, tok := range tokens {
		perLine[int(tok)-1]++
	}
	if got := h.ActiveRequests(); got != int64(len(tokens)) {
		t.Errorf("ActiveRequests() = %d; want %d", got, len(tokens))
	}
	lines := map[uintptr]int{}
	for p := range procs {
		if got, want := h.ActiveRequestsOn(p), perLine[p]; got != want {
			t.Errorf("ActiveRequestsOn(%d) = %d; want %d", p, got, want)
		}
		if got, want := handle.On(p), perLine[p]; got != want {
			t.Errorf("a handle made before: On(%d) = %d; want %d", p, got, want)
		}
		a := uintptr(unsafe.Pointer(h.lineFor(h.active.Load(), uint64(h.activeN.Load()), uint64(p))))
		if other, ok := lines[a/64]; ok {
			t.Errorf("Ps %d and %d count on one cache line", other, p)
		}
		lines[a/64] = p
	}
	for _, tok := range tokens {
		h.ActiveRequestEnded(tok)
	}
	if got := h.ActiveRequests(); got != 0 {
		t.Errorf("ActiveRequests() after the ends = %d; want 0", got)
	}
	for p := range maxActiveLines {
		if got := h.ActiveRequestsOn(p); got != 0 {
			t.Errorf("ActiveRequestsOn(%d) after the ends = %d; want 0", p, got)
		}
	}
}
