package lb_test

import (
	"fmt"
	"math/rand/v2"
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
