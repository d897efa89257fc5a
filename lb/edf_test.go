package lb_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/lb/internal/lbtest"
)

// period returns one period of s from its start.
func period(s *lb.Sequence) []int {
	out := make([]int, s.Len())
	for i := range out {
		out[i] = s.Next()
	}
	return out
}

// TestSequencePeriodCounts checks that a period of the EDF schedule holds each entry exactly
// weight/gcd times (float deadlines and the epsilon must not move a pick across the period's
// end), whatever the seed and weights.
func TestSequencePeriodCounts(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for trial := range 200 {
		n := 2 + r.IntN(20)
		weights := make([]uint32, n)
		for i := range weights {
			weights[i] = uint32(r.IntN(129)) // 0 included: never picked
		}
		weights[0] = 1 + uint32(r.IntN(128))
		seed := r.Uint64()
		t.Run(fmt.Sprintf("trial %d", trial), func(t *testing.T) {
			s := lb.NewSequence(weights, seed)
			if s == nil {
				t.Fatalf("NewSequence(%v) = nil", weights)
			}
			g := uint32(0)
			for _, w := range weights {
				g = gcd(g, w)
			}
			got := make([]uint32, n)
			for _, i := range period(s) {
				got[i]++
			}
			want := make([]uint32, n)
			for i, w := range weights {
				want[i] = w / g
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("NewSequence(%v, %d) picks per entry in a period mismatch (-want +got):\n%s", weights, seed, diff)
			}
		})
	}
}

func gcd(a, b uint32) uint32 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// TestSequenceSeeds checks the starting points: seed k starts where k picks from the started
// scheduler end (Envoy's initial picks).
func TestSequenceSeeds(t *testing.T) {
	weights := []uint32{5, 3, 2}
	from0 := period(lb.NewSequence(weights, 0))
	for k := range uint64(len(from0)) {
		got := period(lb.NewSequence(weights, k))
		want := append(append([]int(nil), from0[k:]...), from0[:k]...)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("seed %d: period mismatch (-rotated seed 0 +got):\n%s", k, diff)
		}
	}
}

func BenchmarkNewSequence(b *testing.B) {
	weights := make([]uint32, 100)
	for i := range weights {
		weights[i] = uint32(1 + i%128)
	}
	b.ReportAllocs()
	lbtest.ReportCPU(b, func() { lb.NewSequence(weights, 12345) })
}

// TestSequenceSerialOrder checks that one picker, whichever Ps it runs on, gets exactly the
// schedule's order: it never collides with itself, so the shared position is kept.
func TestSequenceSerialOrder(t *testing.T) {
	weights := []uint32{5, 1, 3, 2}
	want := period(lb.NewSequence(weights, 3))
	s := lb.NewSequence(weights, 3)
	for round := range 1000 {
		if got := period(s); !slices.Equal(got, want) {
			t.Fatalf("period %d = %v; want %v", round, got, want)
		}
	}
}

// TestSequenceSpread checks the positions kept per P once pickers collided: they start evenly
// spread over the period, and concurrent pickers still split picks by weight to within one
// period per position, whatever P each pick ran on.
func TestSequenceSpread(t *testing.T) {
	weights := []uint32{1, 2, 3, 4}
	s := lb.NewSequence(weights, 0)
	starts := s.Spread()
	for k, got := range starts {
		want := uint64(s.Len() * k / len(starts))
		if got != want && got != want+1 { // spread's own pick may have moved one
			t.Errorf("position %d starts at %d; want %d", k, got, want)
		}
	}
	const pickers, picks = 4, 25_000
	counts := make([][]int, pickers)
	var wg sync.WaitGroup
	for g := range pickers {
		counts[g] = make([]int, len(weights))
		wg.Go(func() {
			for range picks {
				counts[g][s.Next()]++
			}
		})
	}
	wg.Wait()
	checkSplit(t, counts, weights, pickers*picks+1, len(starts)) // and spread's pick
}

// TestSequenceTurnsSpread checks that pickers on two Ps taking turns on the shared position,
// without ever colliding on it, make each P keep its own position within a few picks: until
// then every pick writes one cache line from both cores.
func TestSequenceTurnsSpread(t *testing.T) {
	tests := []struct {
		name string
		ps   []int // the P of each pick, repeated
	}{
		{"two Ps in turn", []int{0, 1}},
		{"two picks each", []int{0, 0, 1, 1}},
		{"three Ps", []int{2, 0, 1}},
		{"one pick of another P", append(slices.Repeat([]int{0}, 200), 1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			weights := []uint32{3, 2, 1}
			want := period(lb.NewSequence(weights, 5))
			s := lb.NewSequence(weights, 5)
			limit := 2 * len(tc.ps)
			for k := range limit {
				got := s.NextOn(tc.ps[k%len(tc.ps)])
				if s.PerP() {
					return // this pick was the first on a position of its own
				}
				if got != want[k%len(want)] {
					t.Fatalf("pick %d on the shared position = %d; want %d", k, got, want[k%len(want)])
				}
			}
			if !s.PerP() {
				t.Errorf("after %d picks the shared position is still in use; want one per P", limit)
			}
		})
	}
}

// TestSequenceMigratingPickerKeepsOrder checks that one picker that moves to another P now and
// then keeps the shared position, and with it exactly the schedule's order.
func TestSequenceMigratingPickerKeepsOrder(t *testing.T) {
	weights := []uint32{5, 1, 3, 2}
	want := period(lb.NewSequence(weights, 3))
	s := lb.NewSequence(weights, 3)
	for k := range 10_000 {
		p := (k / 100) % 3 // a move every 100 picks, over three Ps
		if got := s.NextOn(p); got != want[k%len(want)] {
			t.Fatalf("pick %d (on P %d) = %d; want %d", k, p, got, want[k%len(want)])
		}
	}
	if s.PerP() {
		t.Error("a picker moving every 100 picks made each P keep its own position; want the shared one")
	}
}

// TestSequencePositionsFollowGOMAXPROCS checks that positions made per P while GOMAXPROCS was 1
// give each P its own position, on its own cache line, once GOMAXPROCS is raised: a table sized
// once and indexed by a mask had both Ps of a `-cpu 1,2` benchmark write one position, which
// doubled or tripled the CPU per pick in one process of three. Each P then walks the schedule
// in order from its own start, and the position P 0 had keeps its place.
func TestSequencePositionsFollowGOMAXPROCS(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	weights := []uint32{3, 2, 1, 4}
	want := period(lb.NewSequence(weights, 0))
	s := lb.NewSequence(weights, 0)
	// As the benchmark harness does: a pick on P 1 while there were two Ps, then one on P 0
	// with GOMAXPROCS 1, which is a turn between Ps: each P keeps its own position from then.
	s.NextOn(1)
	s.NextOn(0)
	if !s.PerP() {
		t.Fatal("a pick on P 0 just after one on P 1 kept the shared position; want one per P")
	}
	const procs = 4
	runtime.GOMAXPROCS(procs)
	lines := map[uintptr]int{}
	walks := make([][]int, procs)
	for k := range 3 * len(want) {
		id := k % procs
		walks[id] = append(walks[id], s.NextOn(id))
		addr := s.PositionAddr(id)
		if addr == 0 {
			t.Fatalf("P %d of %d picked without a position of its own", id, procs)
		}
		if other, ok := lines[addr/64]; ok && other != id {
			t.Fatalf("Ps %d and %d pick on the same cache line after GOMAXPROCS rose to %d", other, id, procs)
		}
		lines[addr/64] = id
	}
	for id, walk := range walks {
		// P 0 picked entry 0 of the period, the start of seed 0, and goes on from there.
		from := []int{1}
		if id > 0 {
			from = nil
			for i := range want {
				from = append(from, i)
			}
		}
		if !slices.ContainsFunc(from, func(i int) bool { return walksFrom(walk, want, i) }) {
			t.Errorf("P %d picked %v; want the period %v in order from %v", id, walk, want, from)
		}
	}
}

// walksFrom reports whether walk is the periodic schedule want from its entry i on.
func walksFrom(walk, want []int, i int) bool {
	for j, got := range walk {
		if got != want[(i+j)%len(want)] {
			return false
		}
	}
	return true
}

// TestSequenceGrowsUnderConcurrentPicks raises GOMAXPROCS after the positions were made for one
// P while goroutines pick: the table grows under them (a race detector run checks the
// publication) and every pick still lands on a position, so the split by weight holds to
// within one period per position.
func TestSequenceGrowsUnderConcurrentPicks(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	weights := []uint32{1, 2, 3, 4}
	s := lb.NewSequence(weights, 0)
	s.Spread() // one position: GOMAXPROCS is 1
	runtime.GOMAXPROCS(8)
	const pickers, picks = 16, 20_000
	counts := make([][]int, pickers)
	var wg sync.WaitGroup
	for g := range pickers {
		counts[g] = make([]int, len(weights))
		wg.Go(func() {
			for k := range picks {
				counts[g][s.Next()]++
				if k%256 == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	wg.Wait()
	checkSplit(t, counts, weights, pickers*picks+1, 8) // and Spread's pick
}

// checkSplit checks that total picks, counted per picker in counts, split over the entries by
// weights (summing to 10) to within positions periods: each position is inside one period,
// which holds w picks of an entry of weight w.
func checkSplit(t *testing.T, counts [][]int, weights []uint32, total, positions int) {
	t.Helper()
	for i, w := range weights {
		got := 0
		for g := range counts {
			got += counts[g][i]
		}
		want := float64(total) * float64(w) / 10
		if slack := float64(positions * int(w)); math.Abs(float64(got)-want) > slack+1 {
			t.Errorf("entry %d (weight %d) picked %d times; want %.0f ± %.0f", i, w, got, want, slack+1)
		}
	}
}

// TestSequenceOneEntry: a sequence with one entry of non-zero weight picks it every time, on
// any P and from any seed, also when entries of weight 0 come before it.
func TestSequenceOneEntry(t *testing.T) {
	for _, c := range []struct {
		weights []uint32
		want    int
	}{
		{[]uint32{1}, 0},
		{[]uint32{7}, 0},
		{[]uint32{0, 5}, 1},
		{[]uint32{0, 0, 3, 0}, 2},
	} {
		for seed := range uint64(5) {
			s := lb.NewSequence(c.weights, seed)
			for i := range 10 {
				if got := s.Next(); got != c.want {
					t.Fatalf("weights %v seed %d: pick %d = %d, want %d", c.weights, seed, i, got, c.want)
				}
			}
		}
	}
}
