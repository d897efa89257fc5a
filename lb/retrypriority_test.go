package lb_test

import (
	"testing"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/lb/internal/lbtest"
)

// retryBase is a balancer base over three levels: P0 with one of two hosts healthy
// (availability 70 with the default overprovisioning of 1.4), P1 and P2 all healthy.
func retryBase(t *testing.T) *lb.Base {
	t.Helper()
	ps, err := host.NewPrioritySet(level(t, 0, 1, 0, 1, 0), level(t, 1, 2, 0, 0, 0), level(t, 2, 2, 0, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	b, err := lb.NewBase(lb.Params{PrioritySet: ps}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// levelsFor returns the level ChoosePriority gives each of the hashes 0..99.
func levelsFor(b *lb.Base, ctx *lb.Context) [3]int {
	var n [3]int
	for h := range uint64(100) {
		p, _ := b.ChoosePriority(ctx, h)
		n[p]++
	}
	return n
}

// TestPreviousPrioritiesLoad follows Envoy's PreviousPrioritiesRetryPriority: the attempted
// levels leave the priority load every update_frequency attempts, the levels left share it by
// their availability, and once nothing is left the exclusions are forgotten.
func TestPreviousPrioritiesLoad(t *testing.T) {
	b := retryBase(t)
	type step struct {
		attempted uint32
		want      [3]int // hashes per level out of 100
	}
	for _, tc := range []struct {
		name      string
		frequency uint32
		steps     []step
	}{
		{"frequency 1", 1, []step{
			{0, [3]int{0, 100, 0}}, // P0 tried: P1 takes it all
			{1, [3]int{0, 0, 100}}, // P0 and P1 tried
			{2, [3]int{70, 30, 0}}, // every level tried: back to the cluster's load
		}},
		{"P1 tried first", 1, []step{
			{1, [3]int{70, 0, 30}}, // P2 takes what P1 took
		}},
		{"frequency 2", 2, []step{
			{0, [3]int{70, 30, 0}}, // one attempt: no update yet
			{1, [3]int{0, 0, 100}}, // the second updates with both levels tried
		}},
		{"off", 0, []step{
			{0, [3]int{70, 30, 0}},
			{1, [3]int{70, 30, 0}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ctx lb.Context
			ctx.ExcludePreviousPriorities(tc.frequency)
			if got := levelsFor(b, &ctx); got != [3]int{70, 30, 0} {
				t.Fatalf("before any attempt: hashes per level = %v, want the cluster's [70 30 0]", got)
			}
			for i, s := range tc.steps {
				ctx.AddAttemptedPriority(s.attempted)
				if got := levelsFor(b, &ctx); got != s.want {
					t.Errorf("after attempt %d (P%d): hashes per level = %v, want %v", i+1, s.attempted, got, s.want)
				}
			}
		})
	}
}

// TestPreviousPrioritiesNoAllocs: a pick with excluded levels allocates nothing.
func TestPreviousPrioritiesNoAllocs(t *testing.T) {
	b := retryBase(t)
	var ctx lb.Context
	ctx.ExcludePreviousPriorities(1)
	ctx.AddAttemptedPriority(0)
	if n := testing.AllocsPerRun(100, func() { _, _ = b.ChooseSource(&ctx, 42) }); n != 0 {
		t.Errorf("ChooseSource with excluded levels: %v allocs, want 0", n)
	}
	if src, ok := b.ChooseSource(&ctx, 42); !ok || src.Priority != 1 {
		t.Errorf("ChooseSource = %+v, %v; want priority 1", src, ok)
	}
}

// TestPlainIsChooseRandomSource: where Plain holds, ChooseRandomSource chooses priority 0's
// healthy hosts, which PlainHosts returns; Plain does not hold with several levels or in panic.
func TestPlainIsChooseRandomSource(t *testing.T) {
	one, err := lb.NewBase(lb.Params{PrioritySet: lbtest.PrioritySet(t, lbtest.Hosts(t, 4))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	panicking, err := lb.NewBase(lb.Params{PrioritySet: halfHealthy(t)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		b     *lb.Base
		plain bool
	}{{"one healthy level", one, true}, {"three levels", retryBase(t), false}, {"panic", panicking, false}} {
		for _, ctx := range []*lb.Context{nil, {}} {
			if got := c.b.Plain(ctx); got != c.plain {
				t.Fatalf("%s: Plain(%v) = %v, want %v", c.name, ctx, got, c.plain)
			}
			if !c.plain {
				continue
			}
			src, ok := c.b.ChooseRandomSource(ctx)
			if !ok || src != (lb.Source{Kind: lb.HealthyHosts}) {
				t.Fatalf("%s: ChooseRandomSource = %+v, %v where Plain holds", c.name, src, ok)
			}
			if got, want := c.b.PlainHosts(), c.b.Hosts(src); len(got) != len(want) || &got[0] != &want[0] {
				t.Fatalf("%s: PlainHosts is not Hosts(%+v)", c.name, src)
			}
		}
	}
}
