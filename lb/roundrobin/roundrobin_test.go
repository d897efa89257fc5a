package roundrobin

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/lb/internal/lbtest"
)

func picks(t *testing.T, b lb.Balancer, hosts []*host.Host, n int) []int {
	t.Helper()
	index := map[*host.Host]int{}
	for i, h := range hosts {
		index[h] = i
	}
	out := make([]int, n)
	for i := range out {
		h, err := b.Pick(nil)
		if err != nil {
			t.Fatalf("Pick() error = %v", err)
		}
		out[i] = index[h]
	}
	return out
}

func TestSchedule(t *testing.T) {
	tests := []struct {
		name    string
		weights []uint32
		seed    uint64
		want    []int
	}{
		// Equal weights: plain rotation from the random start (seed 5 mod 3 = 2).
		{"equal weights rotate from random offset", []uint32{1, 1, 1}, 5, []int{2, 0, 1, 2, 0, 1}},
		// EDF deadlines: host 2 at 1/3, 2/3, 1; host 1 at 1/2, 1; host 0 at 1; at the tie at 1
		// host 0, queued first, goes first.
		{"weighted EDF order", []uint32{1, 2, 3}, 0, []int{2, 1, 2, 0, 1, 2, 2, 1, 2, 0, 1, 2}},
		{"weighted EDF from offset", []uint32{1, 2, 3}, 3, []int{0, 1, 2, 2, 1, 2}},
		// Envoy's RoundRobinLoadBalancerTest.Weighted (random() returns 0).
		{"Envoy Weighted", []uint32{1, 2}, 0, []int{1, 0, 1, 1, 0, 1}},
		// Envoy's RoundRobinLoadBalancerTest.WeightedSeed (random() returns 1).
		{"Envoy WeightedSeed", []uint32{1, 2}, 1, []int{0, 1, 1, 0, 1, 1}},
		// Host 0 (weight 2) is due at 1/2 and again at 1, where host 1 has waited since the
		// start: Envoy's scheduler picks the entry queued first (host 1), where a lower-index
		// tie-break would pick host 0 twice in a row.
		{"tie goes to the entry queued first", []uint32{2, 1}, 0, []int{0, 1, 0, 0, 1, 0}},
		// Weights with a common divisor schedule as the host weights do.
		{"common divisor", []uint32{4, 2}, 0, []int{0, 1, 0, 0, 1, 0}},
		// createWithPicks caps the initial picks at UINT_MAX/10 and uses the low 32 bits.
		{"seed beyond the pick cap", []uint32{1, 2}, 1<<32 + 429496729 + 1, []int{0, 1, 1, 0, 1, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hosts := lbtest.Hosts(t, len(tc.weights), tc.weights...)
			b, err := New(lb.Params{PrioritySet: lbtest.PrioritySet(t, hosts), Rand: lbtest.Fixed(tc.seed)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, picks(t, b, hosts, len(tc.want))); diff != "" {
				t.Errorf("pick order mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDistribution(t *testing.T) {
	weights := []uint32{1, 5, 10, 100, 3}
	hosts := lbtest.Hosts(t, len(weights), weights...)
	b, err := New(lb.Params{PrioritySet: lbtest.PrioritySet(t, hosts), Rand: lbtest.Rand(3)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lbtest.ChiSquare(t, hosts, []float64{1, 5, 10, 100, 3}, lbtest.Count(t, b, nil, 11900))
}

func TestHealthAndPanic(t *testing.T) {
	tests := []struct {
		name        string
		unhealthy   int
		wantAllUsed bool
	}{
		{"unhealthy hosts skipped", 1, false},
		{"panic uses all hosts", 3, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hosts := lbtest.Hosts(t, 4)
			for _, h := range hosts[:tc.unhealthy] {
				h.SetHealthFlag(host.FailedOutlierCheck)
			}
			b, err := New(lb.Params{PrioritySet: lbtest.PrioritySet(t, hosts), Rand: lbtest.Rand(1)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			counts := lbtest.Count(t, b, nil, 400)
			if got := counts[hosts[0]] > 0; got != tc.wantAllUsed {
				t.Errorf("unhealthy host picked = %v; want %v (counts %v)", got, tc.wantAllUsed, counts)
			}
		})
	}
}

func TestRetrySkipsAttempted(t *testing.T) {
	hosts := lbtest.Hosts(t, 3)
	b, err := New(lb.Params{PrioritySet: lbtest.PrioritySet(t, hosts), Rand: lbtest.Fixed(0)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := &lb.Context{RetryCount: 2}
	ctx.AddAttempted(hosts[0])
	if got, _ := b.Pick(ctx); got != hosts[1] {
		t.Errorf("Pick() with %v attempted = %v; want %v", hosts[0], got, hosts[1])
	}
}

func TestPickDoesNotAllocate(t *testing.T) {
	b, err := New(lb.Params{PrioritySet: lbtest.PrioritySet(t, lbtest.Hosts(t, 100, 1, 2, 3))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lbtest.NoAllocs(t, b, &lb.Context{})
}

func BenchmarkPick(b *testing.B) {
	build := func(p lb.Params) (lb.Balancer, error) { return New(p, nil) }
	b.Run("equal", func(b *testing.B) { lbtest.BenchPick(b, build, lbtest.PlainContext) })
	b.Run("weighted", func(b *testing.B) { lbtest.BenchPick(b, build, lbtest.PlainContext, 1, 2, 3, 4) })
}

// TestEnvoyInitializationPicksAllHosts is Envoy's
// RoundRobinLoadBalancerTest.WeightedInitializationPicksAllHosts: balancers seeded 0..9 over
// weights {6, 3, 1} pick first host 0 six times, host 1 three times and host 2 once.
func TestEnvoyInitializationPicksAllHosts(t *testing.T) {
	weights := []uint32{6, 3, 1}
	hosts := lbtest.Hosts(t, len(weights), weights...)
	ps := lbtest.PrioritySet(t, hosts)
	got := make([]int, len(hosts))
	for seed := range uint64(10) {
		b, err := New(lb.Params{PrioritySet: ps, Rand: lbtest.Fixed(seed)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got[picks(t, b, hosts, 1)[0]]++
	}
	if diff := cmp.Diff([]int{6, 3, 1}, got); diff != "" {
		t.Errorf("first picks per host mismatch (-want +got):\n%s", diff)
	}
}
