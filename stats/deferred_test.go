package stats

import (
	"slices"
	"testing"
)

type deferredTraffic struct {
	RqTotal  Counter `stat:"upstream_rq_total"`
	CxActive Gauge   `stat:"upstream_cx_active,accumulate"`
}

type deferredFlag struct {
	Initialized Gauge `stat:"T.initialized,hidden"`
}

// TestRegisterDeferred: deferred stats are in no listing (Each, EachTagged)
// until one is used; the hidden initialized gauge then reads 1.
func TestRegisterDeferred(t *testing.T) {
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	var flag deferredFlag
	var traffic deferredTraffic
	s.Register("cluster.a.", &flag)
	s.RegisterDeferred("cluster.a.", &traffic, &flag.Initialized)
	names := func() (each, tagged []string) {
		s.Each(KindSet(KindCounter, KindGauge), func(st *Stat) bool { each = append(each, st.Name()); return true })
		for _, k := range []Kind{KindCounter, KindGauge} {
			s.EachTagged(k, func(*Stat) bool { return true }, func(st *TaggedStat, _ bool) bool {
				tagged = append(tagged, st.Name())
				return true
			})
		}
		slices.Sort(tagged)
		return each, tagged
	}
	each, tagged := names()
	if want := []string{"cluster.a.T.initialized"}; !slices.Equal(each, want) || !slices.Equal(tagged, want) {
		t.Errorf("before use: Each %v, EachTagged %v; want only %v", each, tagged, want)
	}
	if flag.Initialized.Value() != 0 {
		t.Errorf("initialized = %d before use; want 0", flag.Initialized.Value())
	}
	traffic.RqTotal.Inc()
	each, tagged = names()
	want := []string{"cluster.a.T.initialized", "cluster.a.upstream_cx_active", "cluster.a.upstream_rq_total"}
	if !slices.Equal(each, want) || !slices.Equal(tagged, want) {
		t.Errorf("after use: Each %v, EachTagged %v; want %v", each, tagged, want)
	}
	if flag.Initialized.Value() != 1 {
		t.Errorf("initialized = %d after use; want 1", flag.Initialized.Value())
	}
}
