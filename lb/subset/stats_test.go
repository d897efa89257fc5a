package subset

import (
	"fmt"
	"testing"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/lb/internal/lbtest"
	"github.com/legateproxy/legate/lb/roundrobin"
)

func TestSubsetPickStats(t *testing.T) {
	zero := 0.0
	type counts struct{ Selected, Fallback, FallbackPanic uint64 }
	const picks = 50
	tests := []struct {
		name    string
		cfg     Config
		lbCfg   *lb.Config
		match   []lb.Criterion
		failing []int
		want    counts
	}{
		{name: "selected", cfg: Config{Selectors: [][]string{{"version"}}}, match: []lb.Criterion{crit("version", "v1")}, want: counts{Selected: picks}},
		{name: "fallback", cfg: Config{Selectors: [][]string{{"version"}}, FallbackPolicy: AnyEndpoint}, match: []lb.Criterion{crit("version", "v3")}, want: counts{Fallback: picks}},
		{name: "no fallback counts nothing", cfg: Config{Selectors: [][]string{{"version"}}}, match: []lb.Criterion{crit("version", "v3")}},
		{
			name:  "fallback panic",
			cfg:   Config{Selectors: [][]string{{"version"}}, FallbackPolicy: DefaultSubset, DefaultSubset: []lb.Criterion{crit("stage", "canary")}, PanicModeAny: true},
			lbCfg: &lb.Config{HealthyPanicThreshold: &zero}, match: []lb.Criterion{crit("version", "v3")}, failing: []int{1},
			want: counts{FallbackPanic: picks},
		},
		{
			name: "fallback panic over an empty default subset",
			cfg:  Config{Selectors: [][]string{{"version"}}, FallbackPolicy: DefaultSubset, DefaultSubset: []lb.Criterion{crit("stage", "dev")}, PanicModeAny: true},
			want: counts{FallbackPanic: picks},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hs := fleet(t)
			for _, i := range tc.failing {
				hs[i].SetHealthFlag(host.FailedActiveHC)
			}
			st := (&lb.Stats{}).Complete()
			b, err := New(lb.Params{PrioritySet: lbtest.PrioritySet(t, hs), Rand: lbtest.Rand(2), Stats: st}, tc.lbCfg, tc.cfg, roundrobin.Factory)
			if err != nil {
				t.Fatal(err)
			}
			ctx := &lb.Context{MetadataMatch: tc.match}
			for range picks {
				_, _ = b.Pick(ctx)
			}
			got := counts{st.SubsetsSelected.Value(), st.SubsetsFallback.Value(), st.SubsetsFallbackPanic.Value()}
			if got != tc.want {
				t.Errorf("subset stats = %+v; want %+v", got, tc.want)
			}
			lbtest.NoAllocs(t, b, ctx)
		})
	}
}

func TestCountChanges(t *testing.T) {
	st := (&lb.Stats{}).Complete()
	build := func(versions ...string) *Balancer {
		t.Helper()
		var hs []*host.Host
		for i, v := range versions {
			hs = append(hs, lbtest.Host(t, host.Config{Address: fmt.Sprintf("10.0.0.%d:80", i), Metadata: map[string]string{"version": v}}))
		}
		b, err := New(lb.Params{PrioritySet: lbtest.PrioritySet(t, hs), Stats: st}, nil, Config{Selectors: [][]string{{"version"}}}, roundrobin.Factory)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	type counts struct{ Created, Removed, Active uint64 }
	read := func() counts {
		return counts{st.SubsetsCreated.Value(), st.SubsetsRemoved.Value(), st.SubsetsActive.Value()}
	}
	first := build("v1", "v1", "v2")
	first.CountChanges(nil)
	if got, want := read(), (counts{Created: 2, Active: 2}); got != want {
		t.Errorf("after the first build: stats = %+v; want %+v", got, want)
	}
	second := build("v1", "v3", "v3", "v4")
	second.CountChanges(first)
	if got, want := read(), (counts{Created: 4, Removed: 1, Active: 3}); got != want {
		t.Errorf("after v2 left and v3, v4 came: stats = %+v; want %+v", got, want)
	}
	third := build("v1", "v3", "v4")
	third.CountChanges(second)
	if got, want := read(), (counts{Created: 4, Removed: 1, Active: 3}); got != want {
		t.Errorf("after a rebuild with the same subsets: stats = %+v; want %+v", got, want)
	}
}
