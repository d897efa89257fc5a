package stats

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

type importStats struct {
	Rq      Counter `stat:"rq_total"`
	Active  Gauge   `stat:"cx_active,accumulate"`
	Gen     Gauge   `stat:"generation,accumulate"`
	Hidden  Gauge   `stat:"hidden_g,hidden"`
	Never   Gauge   `stat:"epoch,never_import"`
	Managed Gauge   `stat:"total_connections,accumulate"`
}

func newImportStore(t *testing.T) (*Store, *importStats) {
	t.Helper()
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	st := &importStats{}
	s.Register("server.", st)
	return s, st
}

// values lists every listed counter and gauge of s by name.
func values(s *Store) map[string]uint64 {
	out := map[string]uint64{}
	s.Each(KindSet(KindCounter, KindGauge), func(st *Stat) bool {
		out[st.Name()] += st.Value()
		return true
	})
	return out
}

func TestParentValues(t *testing.T) {
	s, st := newImportStore(t)
	st.Rq.Add(5)
	st.Active.Set(2)
	st.Hidden.Set(4)
	st.Never.Set(9)
	s.Counter("cluster.web.upstream_rq_200").Add(3)
	s.Counter("unused") // never incremented: left out
	want := ParentValues{
		Counters:     map[string]uint64{"server.rq_total": 5, "cluster.web.upstream_rq_200": 3},
		Gauges:       map[string]uint64{"server.cx_active": 2},
		HiddenGauges: map[string]uint64{"server.hidden_g": 4},
	}
	if d := cmp.Diff(want, s.ParentValues()); d != "" {
		t.Errorf("ParentValues() (-want +got):\n%s", d)
	}
}

func TestParentImport(t *testing.T) {
	s, st := newImportStore(t)
	web := &struct {
		Rq Counter `stat:"upstream_rq_total"`
	}{}
	webReg := s.Register("cluster.web.", web)
	st.Rq.Add(1)
	st.Active.Set(1)
	st.Gen.Set(1)
	imp := s.NewParentImport("server.total_connections")

	steps := []struct {
		name  string
		apply *ParentValues
		// release, when set, releases instead of applying.
		release bool
		want    map[string]uint64
	}{
		{
			name: "handover adds the parent's totals",
			apply: &ParentValues{
				Counters: map[string]uint64{"server.rq_total": 10, "cluster.web.upstream_rq_200": 4},
				Gauges:   map[string]uint64{"server.cx_active": 3, "server.generation": 1, "server.total_connections": 3},
			},
			want: map[string]uint64{"server.rq_total": 11, "cluster.web.upstream_rq_200": 4, "cluster.web.upstream_rq_total": 0,
				"server.cx_active": 4, "server.generation": 2, "server.hidden_g": 0, "server.epoch": 0, "server.total_connections": 0},
		},
		{
			name: "later deltas are forwarded, gauges follow the parent",
			apply: &ParentValues{
				Counters: map[string]uint64{"server.rq_total": 15, "cluster.web.upstream_rq_200": 4},
				Gauges:   map[string]uint64{"server.cx_active": 1, "server.generation": 1, "server.total_connections": 1},
			},
			want: map[string]uint64{"server.rq_total": 16, "cluster.web.upstream_rq_200": 4, "cluster.web.upstream_rq_total": 0,
				"server.cx_active": 2, "server.generation": 2, "server.hidden_g": 0, "server.epoch": 0, "server.total_connections": 0},
		},
		{
			name:    "the parent exits: gauges lose its share except the retained one",
			release: true,
			want: map[string]uint64{"server.rq_total": 16, "cluster.web.upstream_rq_200": 4, "cluster.web.upstream_rq_total": 0,
				"server.cx_active": 1, "server.generation": 2, "server.hidden_g": 0, "server.epoch": 0, "server.total_connections": 0},
		},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			if step.release {
				imp.Release("server.generation")
			} else {
				imp.Apply(*step.apply)
			}
			if d := cmp.Diff(step.want, values(s)); d != "" {
				t.Errorf("stats (-want +got):\n%s", d)
			}
		})
	}
	// The imported per-code counter lives under the cluster's registration,
	// so the child's own lookup finds the same counter.
	if got := webReg.Counter("upstream_rq_200").Value(); got != 4 {
		t.Errorf("cluster.web. Counter(upstream_rq_200) = %d; want the imported 4", got)
	}
}

func TestParentImportManagedAndReset(t *testing.T) {
	s, st := newImportStore(t)
	imp := s.NewParentImport("server.total_connections")
	imp.Apply(ParentValues{Counters: map[string]uint64{"server.rq_total": 10}, Gauges: map[string]uint64{"server.total_connections": 7}})
	if got := imp.ParentGauge("server.total_connections"); got != 7 {
		t.Errorf("ParentGauge = %d; want 7", got)
	}
	if got := st.Managed.Value(); got != 0 {
		t.Errorf("managed gauge = %d; want 0 (the server adds the parent's share)", got)
	}
	// The parent reset its counters: nothing is added until it grows again.
	imp.Apply(ParentValues{Counters: map[string]uint64{"server.rq_total": 2}})
	imp.Apply(ParentValues{Counters: map[string]uint64{"server.rq_total": 5}})
	if got := st.Rq.Value(); got != 13 {
		t.Errorf("rq_total = %d; want 10 + 3 after the parent's reset", got)
	}
	// A gauge the parent stopped reporting contributes nothing.
	if got := imp.ParentGauge("server.total_connections"); got != 0 {
		t.Errorf("ParentGauge after the parent dropped it = %d; want 0", got)
	}
}

func BenchmarkParentImport(b *testing.B) {
	s, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	v := ParentValues{Counters: map[string]uint64{}, Gauges: map[string]uint64{}}
	for i := range 2000 {
		name := "cluster.c" + string(rune('a'+i%26)) + ".rq_" + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
		s.Counter(name).Inc()
		v.Counters[name] = uint64(i)
	}
	imp := s.NewParentImport()
	imp.Apply(v) // the first Apply resolves names; measure the steady state
	for b.Loop() {
		for k := range v.Counters {
			v.Counters[k]++
		}
		imp.Apply(v)
	}
}
