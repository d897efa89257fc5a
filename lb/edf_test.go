package lb_test

import (
	"fmt"
	"math"
	"math/rand/v2"
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
	total := pickers*picks + 1 // and spread's pick
	for i, w := range weights {
		got := 0
		for g := range pickers {
			got += counts[g][i]
		}
		want := float64(total) * float64(w) / 10
		// Each position is inside one period, which holds w picks of entry i.
		if slack := float64(len(starts) * int(w)); math.Abs(float64(got)-want) > slack+1 {
			t.Errorf("entry %d (weight %d) picked %d times; want %.0f ± %.0f", i, w, got, want, slack+1)
		}
	}
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
