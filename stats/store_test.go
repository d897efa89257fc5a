package stats

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/legateproxy/legate/internal/clock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type clusterStats struct {
	UpstreamRqTotal  Counter     `stat:"upstream_rq_total"`
	UpstreamCxActive Gauge       `stat:"upstream_cx_active,accumulate"`
	UpstreamRqTime   Histogram   `stat:"upstream_rq_time,unit=ms"`
	Hidden           Gauge       `stat:"hidden_gauge,hidden"`
	Version          TextReadout `stat:"version_text"`
	Breakers         struct {
		CxOpen Gauge `stat:"cx_open"`
	} `stat:"circuit_breakers.default."`
}

func newStore(t testing.TB, cfg Config) *Store {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New() error: %v", err)
	}
	return s
}

func listNames(s *Store, kinds Kinds) []string {
	var out []string
	s.Each(kinds, func(st *Stat) bool {
		out = append(out, st.Name())
		return true
	})
	return out
}

var allKinds = KindSet(KindCounter, KindGauge, KindHistogram, KindTextReadout)

func TestRegisterNames(t *testing.T) {
	s := newStore(t, Config{})
	var a, b clusterStats
	s.Register("cluster.b.", &b)
	s.Register("cluster.a.", &a)
	s.Counter("cluster.a.upstream_rq_200").Inc()
	got := listNames(s, KindSet(KindCounter, KindGauge))
	want := []string{
		"cluster.a.circuit_breakers.default.cx_open",
		"cluster.a.hidden_gauge",
		"cluster.a.upstream_cx_active",
		"cluster.a.upstream_rq_200",
		"cluster.a.upstream_rq_total",
		"cluster.b.circuit_breakers.default.cx_open",
		"cluster.b.hidden_gauge",
		"cluster.b.upstream_cx_active",
		"cluster.b.upstream_rq_total",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Each() names (-want +got):\n%s", diff)
	}
}

type rootStats struct {
	A Counter `stat:"cluster.a.zzz"`
	B Counter `stat:"aaa"`
	C Counter `stat:"cluster_manager.x"`
}

type small struct {
	X Counter `stat:"x"`
	Y Gauge   `stat:"y.z"`
}

// TestEachOrderMatchesSort checks the group/merge ordering against a plain
// sort of all names, with prefixes that nest and a root registration.
func TestEachOrderMatchesSort(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, 5} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed))
			s := newStore(t, Config{})
			var want []string
			var root rootStats
			s.Register("", &root)
			want = append(want, "cluster.a.zzz", "aaa", "cluster_manager.x")
			parts := []string{"a", "b", "a.b", "x_y", "x", "c.d", "a_"}
			seen := map[string]bool{}
			for i := 0; i < 60; i++ {
				p := "cluster." + parts[rng.IntN(len(parts))] + "."
				if rng.IntN(3) == 0 {
					p += parts[rng.IntN(len(parts))] + "."
				}
				if seen[p] {
					continue
				}
				seen[p] = true
				s.Register(p, new(small))
				want = append(want, p+"x", p+"y.z")
				if rng.IntN(2) == 0 {
					n := p + "dyn_" + parts[rng.IntN(len(parts))]
					if !seen[n] {
						seen[n] = true
						s.Counter(n)
						want = append(want, n)
					}
				}
			}
			sort.Strings(want)
			got := listNames(s, allKinds)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Each() order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestManyUnderRootExplodes(t *testing.T) {
	s := newStore(t, Config{})
	var root rootStats
	s.Register("", &root)
	want := []string{"aaa", "cluster.a.zzz", "cluster_manager.x"}
	for i := 0; i < 3*maxGroup; i++ {
		p := fmt.Sprintf("cluster.c%02d.", i)
		s.Register(p, new(small))
		want = append(want, p+"x", p+"y.z")
	}
	sort.Strings(want)
	if diff := cmp.Diff(want, listNames(s, allKinds)); diff != "" {
		t.Errorf("Each() order (-want +got):\n%s", diff)
	}
}

func TestUnregister(t *testing.T) {
	s := newStore(t, Config{})
	var a, b small
	ra := s.Register("a.", &a)
	s.Register("b.", &b)
	ra.Counter("dyn").Inc()
	ra.Unregister()
	ra.Unregister()
	if diff := cmp.Diff([]string{"b.x", "b.y.z"}, listNames(s, allKinds)); diff != "" {
		t.Errorf("after Unregister (-want +got):\n%s", diff)
	}
	a.X.Inc() // still works
	if got := a.X.Value(); got != 1 {
		t.Errorf("Value() = %d; want 1", got)
	}
}

func TestMatcher(t *testing.T) {
	re, err := RegexMatcher("m", `.*\.y\..*`)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		m    *Matcher
		want []string
	}{
		{"nil", nil, []string{"a.x", "a.y.z", "dyn.rq"}},
		{"reject_all", &Matcher{RejectAll: true}, nil},
		{"exclusion", &Matcher{Exclusion: []StringMatcher{re}}, []string{"a.x", "dyn.rq"}},
		{"inclusion", &Matcher{Inclusion: []StringMatcher{PrefixMatcher("dyn.")}}, []string{"dyn.rq"}},
		{"inclusion_suffix", &Matcher{Inclusion: []StringMatcher{SuffixMatcher(".X")}}, nil},
		{"inclusion_ignore_case", &Matcher{Inclusion: []StringMatcher{{Suffix: ".X", kind: matchSuffix, IgnoreCase: true}}}, []string{"a.x"}},
		{"exclusion_contains", &Matcher{Exclusion: []StringMatcher{ContainsMatcher(".y"), ExactMatcher("dyn.rq")}}, []string{"a.x"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, Config{Matcher: tc.m})
			var a small
			s.Register("a.", &a)
			c := s.Counter("dyn.rq")
			c.Inc()
			a.Y.Set(3)
			if diff := cmp.Diff(tc.want, listNames(s, allKinds)); diff != "" {
				t.Errorf("listed (-want +got):\n%s", diff)
			}
			if c.Value() != 1 || a.Y.Value() != 3 {
				t.Errorf("rejected stats stopped working: counter %d gauge %d", c.Value(), a.Y.Value())
			}
		})
	}
}

func TestUsedAndReset(t *testing.T) {
	s := newStore(t, Config{})
	var c clusterStats
	s.Register("c.", &c)
	if c.UpstreamRqTotal.Used() || c.UpstreamCxActive.Used() || c.Version.Used() || c.UpstreamRqTime.Used() {
		t.Fatal("fresh stats report used")
	}
	c.UpstreamRqTotal.Add(5)
	c.UpstreamCxActive.Set(0)
	c.Version.Set("v")
	c.UpstreamRqTime.Record(3)
	if c.UpstreamRqTime.Used() {
		t.Error("histogram used before a flush")
	}
	s.Flush()
	if !c.UpstreamRqTotal.Used() || !c.UpstreamCxActive.Used() || !c.Version.Used() || !c.UpstreamRqTime.Used() {
		t.Error("written stats not used")
	}
	s.ResetCounters()
	if got := c.UpstreamRqTotal.Value(); got != 0 {
		t.Errorf("Value() after reset = %d; want 0", got)
	}
	if !c.UpstreamRqTotal.Used() {
		t.Error("reset cleared used")
	}
	c.UpstreamRqTotal.Inc()
	if got := c.UpstreamRqTotal.Value(); got != 1 {
		t.Errorf("Value() = %d; want 1", got)
	}
	c.UpstreamCxActive.Add(5)
	c.UpstreamCxActive.Sub(2)
	c.UpstreamCxActive.Dec()
	c.UpstreamCxActive.Inc()
	if got := c.UpstreamCxActive.Value(); got != 3 {
		t.Errorf("gauge = %d; want 3", got)
	}
}

func TestHiddenAndModes(t *testing.T) {
	s := newStore(t, Config{})
	var c clusterStats
	s.Register("c.", &c)
	s.Gauge("dyn.g", HiddenAccumulate)
	var hidden []string
	s.Each(KindSet(KindGauge), func(st *Stat) bool {
		if st.Hidden() {
			hidden = append(hidden, st.Name())
		}
		return true
	})
	if diff := cmp.Diff([]string{"c.hidden_gauge", "dyn.g"}, hidden); diff != "" {
		t.Errorf("hidden (-want +got):\n%s", diff)
	}
}

func TestTryRegisterErrors(t *testing.T) {
	s := newStore(t, Config{})
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"not_pointer", small{}, "want a non-nil pointer"},
		{"no_tag", &struct{ C Counter }{}, "missing"},
		{"bad_unit", &struct {
			H Histogram `stat:"h,unit=parsec"`
		}{}, "unit"},
		{"bad_option", &struct {
			C Counter `stat:"c,hidden"`
		}{}, "not valid for a counter"},
		{"dup", &struct {
			A Counter `stat:"c"`
			B Counter `stat:"c"`
		}{}, "declared twice"},
		{"dot", &struct {
			A Counter `stat:".c"`
		}{}, "must be non-empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.TryRegister("p.", tc.v)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("TryRegister() error = %v; want one containing %q", err, tc.want)
			}
		})
	}
}

func TestDynamicKindConflict(t *testing.T) {
	s := newStore(t, Config{})
	c := s.Counter("x")
	g := s.Gauge("x", Accumulate)
	g.Set(4)
	if c2 := s.Counter("x"); c2 != c {
		t.Error("Counter(x) twice gave different counters")
	}
	if got := listNames(s, allKinds); !slices.Equal(got, []string{"x"}) {
		t.Errorf("names = %v; want [x]", got)
	}
}

func TestRecentLookups(t *testing.T) {
	s := newStore(t, Config{})
	s.Counter("alpha")
	if got := s.RecentLookupsTotal(); got != 1 {
		t.Errorf("total = %d; want 1", got)
	}
	if on, list := s.RecentLookups(); on || list != nil {
		t.Errorf("RecentLookups() = %v, %v; want off and empty", on, list)
	}
	if err := s.EnableRecentLookups(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"alpha", "beta", "alpha", "gamma", "beta", "alpha"} {
		s.Counter(n)
	}
	on, list := s.RecentLookups()
	want := []Lookup{{"gamma", 1}, {"beta", 2}, {"alpha", 3}}
	if diff := cmp.Diff(want, list); diff != "" || !on {
		t.Errorf("RecentLookups() on=%v (-want +got):\n%s", on, diff)
	}
	if got := s.RecentLookupsTotal(); got != 7 {
		t.Errorf("total = %d; want 7", got)
	}
	for i := 0; i < 150; i++ {
		s.Counter(fmt.Sprintf("n%03d", i))
	}
	if _, list := s.RecentLookups(); len(list) != recentCapacity || list[0].Name != "n050" {
		t.Errorf("after overflow: %d names, first %v; want %d, n050", len(list), list[0], recentCapacity)
	}
	s.ClearRecentLookups()
	if on, list := s.RecentLookups(); !on || len(list) != 0 || s.RecentLookupsTotal() != 0 {
		t.Errorf("after clear: on=%v list=%v total=%d", on, list, s.RecentLookupsTotal())
	}
	s.Counter("x")
	s.DisableRecentLookups()
	s.Counter("y")
	if on, list := s.RecentLookups(); on || len(list) != 0 || s.RecentLookupsTotal() != 2 {
		t.Errorf("after disable: on=%v list=%v total=%d", on, list, s.RecentLookupsTotal())
	}
	fake := newStore(t, Config{FakeSymbolTable: true})
	if err := fake.EnableRecentLookups(); err != ErrLookupsUnavailable {
		t.Errorf("Enable with fake symbol table = %v; want ErrLookupsUnavailable", err)
	}
}

// fakeClock's one ticker is ch, which the test sends on to flush: the send returns once Run has
// taken the tick.
type fakeClock struct{ ch chan time.Time }

func (f *fakeClock) Now() time.Time { return time.Unix(100, 0) }
func (f *fakeClock) AfterFunc(time.Duration, func()) clock.Timer {
	panic("stats: the store is not expected to schedule callbacks")
}
func (f *fakeClock) NewTicker(time.Duration) clock.Ticker { return f }
func (f *fakeClock) C() <-chan time.Time                  { return f.ch }
func (f *fakeClock) Stop()                                {}

type chanSink chan *Snapshot

func (c chanSink) Flush(s *Snapshot) { c <- s }

func TestRunFlushesSinks(t *testing.T) {
	clk := &fakeClock{ch: make(chan time.Time)}
	s := newStore(t, Config{Clock: clk})
	var c clusterStats
	s.Register("cluster.web.", &c)
	sink := make(chanSink, 1)
	s.AddSink(sink)
	hooks := 0
	s.BeforeFlush(func() { hooks++ })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()

	c.UpstreamRqTotal.Add(3)
	c.UpstreamRqTime.Record(200)
	clk.ch <- time.Unix(105, 0)
	snap := recv(t, sink)
	if got := snap.Counters[0]; got.Name != "cluster.web.upstream_rq_total" || got.Delta != 3 || got.Value != 3 ||
		got.TagExtractedName != "cluster.upstream_rq_total" || len(got.Tags) != 1 || got.Tags[0].Value != "web" {
		t.Errorf("counter sample = %+v", got)
	}
	if got := snap.Histograms[0]; got.Interval.Count() != 1 || !got.Used {
		t.Errorf("histogram sample count = %d used=%v; want 1, true", got.Interval.Count(), got.Used)
	}
	s.ResetCounters()
	c.UpstreamRqTotal.Add(2)
	clk.ch <- time.Unix(110, 0)
	snap = recv(t, sink)
	if got := snap.Counters[0]; got.Delta != 2 || got.Value != 2 {
		t.Errorf("after reset: delta %d value %d; want 2, 2", got.Delta, got.Value)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run() = %v", err)
	}
	if hooks != 2 {
		t.Errorf("hooks ran %d times; want 2", hooks)
	}
}

func recv(t *testing.T, c chanSink) *Snapshot {
	t.Helper()
	select {
	case s := <-c:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no flush")
		return nil
	}
}

func TestEachTaggedOrder(t *testing.T) {
	s := newStore(t, Config{})
	for _, n := range []string{"b", "a", "a.b"} {
		s.Register("cluster."+n+".", new(small))
	}
	s.Counter("cluster_manager.x").Inc()
	s.Counter("cluster.a.upstream_rq_200").Inc()
	s.Counter("cluster.b.upstream_rq_503").Inc()
	type line struct {
		Group, Name string
		First       bool
	}
	var got []line
	s.EachTagged(KindCounter, func(*Stat) bool { return true }, func(st *TaggedStat, first bool) bool {
		got = append(got, line{st.TagExtractedName, st.Name(), first})
		return true
	})
	want := []line{
		{"cluster.b.x", "cluster.a.b.x", true},
		{"cluster.upstream_rq", "cluster.a.upstream_rq_200", true},
		{"cluster.upstream_rq", "cluster.b.upstream_rq_503", false},
		{"cluster.x", "cluster.a.x", true},
		{"cluster.x", "cluster.b.x", false},
		{"cluster_manager.x", "cluster_manager.x", true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("EachTagged (-want +got):\n%s", diff)
	}
}

func TestCompareSplit(t *testing.T) {
	tests := []struct {
		a1, a2, b1, b2 string
		tokens         bool
		want           int
	}{
		{"a.", "b", "a.b", "", false, 0},
		{"a.b", "", "a_b", "", false, -1},
		{"a.b", "", "a_b", "", true, -1},
		{"a", ".b", "a", "", true, 1},
		{"cluster.x", "", "cluster_manager.y", "", true, -1},
		{"ab", "", "a.b", "", true, 1},
		{"ab", "", "a.b", "", false, 1},
		{"a-", "", "a.", "", true, 1},
		{"a-", "", "a.", "", false, -1},
	}
	for _, tc := range tests {
		t.Run(tc.a1+tc.a2+"_"+tc.b1+tc.b2, func(t *testing.T) {
			if got := compareSplit(tc.a1, tc.a2, tc.b1, tc.b2, tc.tokens); got != tc.want {
				t.Errorf("compareSplit() = %d; want %d", got, tc.want)
			}
		})
	}
}

func TestServerStatsRegister(t *testing.T) {
	s := newStore(t, Config{})
	var srv ServerStats
	s.Register("server.", &srv)
	got := listNames(s, allKinds)
	for _, n := range []string{"server.compilation_settings.fips_mode", "server.main_thread.watchdog_mega_miss", "server.initialization_time_ms", "server.stats_recent_lookups"} {
		if !slices.Contains(got, n) {
			t.Errorf("missing %s in %v", n, got)
		}
	}
}
