package subset

import (
	"errors"
	"fmt"
	"testing"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/lb/internal/lbtest"
	"github.com/legateproxy/legate/lb/roundrobin"
)

func crit(name, value string) lb.Criterion { return lb.Criterion{Name: name, Value: value} }

// fleet: v1/prod, v1/canary, v2/prod, v2/prod(unhealthy), and one host without metadata.
func fleet(t *testing.T) []*host.Host {
	md := []map[string]string{
		{"version": "v1", "stage": "prod"},
		{"version": "v1", "stage": "canary"},
		{"version": "v2", "stage": "prod"},
		{"version": "v2", "stage": "prod"},
		nil,
	}
	hs := make([]*host.Host, len(md))
	for i, m := range md {
		hs[i] = lbtest.Host(t, host.Config{Address: fmt.Sprintf("10.0.0.%d:80", i), Metadata: m})
	}
	return hs
}

func TestSubsetSelection(t *testing.T) {
	zero := 0.0
	tests := []struct {
		name    string
		cfg     Config
		match   []lb.Criterion
		want    []int // hosts that may be picked; nil means ErrNoHealthyHost
		lbCfg   *lb.Config
		failing []int
	}{
		{"matching subset", Config{Selectors: [][]string{{"version"}}}, []lb.Criterion{crit("version", "v1")}, []int{0, 1}, nil, nil},
		{"two keys", Config{Selectors: [][]string{{"stage", "version"}}}, []lb.Criterion{crit("stage", "prod"), crit("version", "v1")}, []int{0}, nil, nil},
		{"keys must equal a selector", Config{Selectors: [][]string{{"stage", "version"}}}, []lb.Criterion{crit("version", "v1")}, nil, nil, nil},
		{"no fallback", Config{Selectors: [][]string{{"version"}}}, []lb.Criterion{crit("version", "v3")}, nil, nil, nil},
		{"no criteria takes the fallback", Config{Selectors: [][]string{{"version"}}, FallbackPolicy: AnyEndpoint}, nil, []int{0, 1, 2, 3, 4}, nil, nil},
		{"any endpoint", Config{Selectors: [][]string{{"version"}}, FallbackPolicy: AnyEndpoint}, []lb.Criterion{crit("version", "v3")}, []int{0, 1, 2, 3, 4}, nil, nil},
		{"default subset", Config{Selectors: [][]string{{"version"}}, FallbackPolicy: DefaultSubset, DefaultSubset: []lb.Criterion{crit("stage", "prod")}},
			[]lb.Criterion{crit("version", "v3")}, []int{0, 2, 3}, nil, nil},
		{"empty default subset is no fallback", Config{Selectors: [][]string{{"version"}}, FallbackPolicy: DefaultSubset, DefaultSubset: []lb.Criterion{crit("stage", "dev")}},
			[]lb.Criterion{crit("version", "v3")}, nil, nil, nil},
		{"panic mode any", Config{Selectors: [][]string{{"version"}}, FallbackPolicy: DefaultSubset, DefaultSubset: []lb.Criterion{crit("stage", "canary")}, PanicModeAny: true},
			[]lb.Criterion{crit("version", "v3")}, []int{0, 2, 3, 4}, &lb.Config{HealthyPanicThreshold: &zero}, []int{1}},
		{"panic mode any over an empty default subset", Config{Selectors: [][]string{{"version"}}, FallbackPolicy: DefaultSubset, DefaultSubset: []lb.Criterion{crit("stage", "dev")}, PanicModeAny: true},
			[]lb.Criterion{crit("version", "v3")}, []int{0, 1, 2, 3, 4}, nil, nil},
		{"panic mode any without fallback", Config{Selectors: [][]string{{"version"}}, PanicModeAny: true},
			[]lb.Criterion{crit("version", "v3")}, []int{0, 1, 2, 3, 4}, nil, nil},
		{"subset health", Config{Selectors: [][]string{{"version"}}}, []lb.Criterion{crit("version", "v2")}, []int{2}, nil, []int{3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hs := fleet(t)
			for _, i := range tc.failing {
				hs[i].SetHealthFlag(host.FailedActiveHC)
			}
			b, err := New(lb.Params{PrioritySet: lbtest.PrioritySet(t, hs), Rand: lbtest.Rand(2)}, tc.lbCfg, tc.cfg, roundrobin.Factory)
			if err != nil {
				t.Fatal(err)
			}
			ctx := &lb.Context{MetadataMatch: tc.match}
			if tc.want == nil {
				if h, err := b.Pick(ctx); !errors.Is(err, lb.ErrNoHealthyHost) {
					t.Errorf("Pick() = %v, %v; want ErrNoHealthyHost", h, err)
				}
				return
			}
			allowed := map[*host.Host]bool{}
			for _, i := range tc.want {
				allowed[hs[i]] = true
			}
			counts := lbtest.Count(t, b, ctx, 100)
			for h, n := range counts {
				if !allowed[h] {
					t.Errorf("Pick() returned %v %d times; want one of %v", h, n, tc.want)
				}
			}
			if len(counts) != len(tc.want) {
				t.Errorf("picked %d distinct hosts; want %d", len(counts), len(tc.want))
			}
		})
	}
}

func TestInvalidConfig(t *testing.T) {
	ps := lbtest.PrioritySet(t, fleet(t))
	if _, err := New(lb.Params{PrioritySet: ps}, nil, Config{Selectors: [][]string{{}}}, roundrobin.Factory); err == nil {
		t.Errorf("New(empty selector) error = nil; want error")
	}
}

func TestPickDoesNotAllocate(t *testing.T) {
	b, err := New(lb.Params{PrioritySet: lbtest.PrioritySet(t, fleet(t))}, nil,
		Config{Selectors: [][]string{{"version"}}, FallbackPolicy: AnyEndpoint}, roundrobin.Factory)
	if err != nil {
		t.Fatal(err)
	}
	lbtest.NoAllocs(t, b, &lb.Context{MetadataMatch: []lb.Criterion{crit("version", "v1")}})
	lbtest.NoAllocs(t, b, &lb.Context{MetadataMatch: []lb.Criterion{crit("version", "v9")}})
}

func BenchmarkPick(b *testing.B) {
	build := func(p lb.Params) (lb.Balancer, error) {
		return New(p, nil, Config{Selectors: [][]string{{"version"}}, FallbackPolicy: AnyEndpoint}, roundrobin.Factory)
	}
	lbtest.BenchPick(b, build, func() *lb.Context { return &lb.Context{MetadataMatch: []lb.Criterion{crit("version", "v1")}} })
}
