package leastrequest

import (
	"testing"

	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/lb/internal/lbtest"
)

func TestUnweightedPowerOfChoices(t *testing.T) {
	hosts := lbtest.Hosts(t, 4)
	hosts[0].AddActiveRequests(10)
	hosts[1].AddActiveRequests(1)
	tests := []struct {
		name string
		rand []uint64 // one draw per choice (one priority level: no draw for it)
		want int
	}{
		{"fewer active wins", []uint64{0, 1}, 1},
		{"first kept on tie", []uint64{2, 3}, 2},
		{"same host twice", []uint64{0, 4}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := New(lb.Params{PrioritySet: lbtest.PrioritySet(t, hosts), Rand: lbtest.Fixed(tc.rand...)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := b.Pick(nil); got != hosts[tc.want] {
				t.Errorf("Pick() = %v; want %v", got, hosts[tc.want])
			}
		})
	}
}

func TestChoiceCountAvoidsBusyHost(t *testing.T) {
	hosts := lbtest.Hosts(t, 4)
	hosts[0].AddActiveRequests(5)
	b, err := New(lb.Params{PrioritySet: lbtest.PrioritySet(t, hosts), Rand: lbtest.Rand(9)},
		&lb.Config{LeastRequest: lb.LeastRequestConfig{ChoiceCount: 3}})
	if err != nil {
		t.Fatal(err)
	}
	// The busy host wins only when all three samples are it: 1/64.
	counts := lbtest.Count(t, b, nil, 64000)
	if c := counts[hosts[0]]; c < 700 || c > 1300 {
		t.Errorf("busy host picks = %d; want about 1000", c)
	}
}

func TestWeightedDistribution(t *testing.T) {
	weights := []uint32{1, 2, 3, 4}
	tests := []struct {
		name string
		bias *float64
	}{
		{"default bias", nil},
		{"bias 0", new(float64)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hosts := lbtest.Hosts(t, 4, weights...)
			b, err := New(lb.Params{PrioritySet: lbtest.PrioritySet(t, hosts), Rand: lbtest.Rand(5)},
				&lb.Config{LeastRequest: lb.LeastRequestConfig{ActiveRequestBias: tc.bias}})
			if err != nil {
				t.Fatal(err)
			}
			// No request in flight: the split is the static weights.
			lbtest.ChiSquare(t, hosts, []float64{1, 2, 3, 4}, lbtest.Count(t, b, nil, 50000))
		})
	}
}

func TestWeightedShiftsAwayFromBusyHost(t *testing.T) {
	hosts := lbtest.Hosts(t, 2, 1, 3)
	hosts[1].AddActiveRequests(8)
	b, err := New(lb.Params{PrioritySet: lbtest.PrioritySet(t, hosts), Rand: lbtest.Rand(5)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	counts := lbtest.Count(t, b, nil, 20000)
	// Static share of host 1 is 75%. With 8 requests in flight (factor 1/9) the two sampled
	// candidates give it 9/16 + 2·(3/16)·(1/9)/(10/9) = 0.60.
	if share := float64(counts[hosts[1]]) / 20000; share < 0.58 || share > 0.62 {
		t.Errorf("busy host share = %.3f; want 0.60 ± 0.02", share)
	}
}

func TestPickDoesNotAllocate(t *testing.T) {
	for _, ws := range [][]uint32{nil, {1, 2, 3}} {
		b, err := New(lb.Params{PrioritySet: lbtest.PrioritySet(t, lbtest.Hosts(t, 100, ws...))}, nil)
		if err != nil {
			t.Fatal(err)
		}
		lbtest.NoAllocs(t, b, &lb.Context{})
	}
}

func BenchmarkPick(b *testing.B) {
	build := func(p lb.Params) (lb.Balancer, error) { return New(p, nil) }
	b.Run("equal", func(b *testing.B) { lbtest.BenchPick(b, build, lbtest.PlainContext) })
	b.Run("weighted", func(b *testing.B) { lbtest.BenchPick(b, build, lbtest.PlainContext, 1, 2, 3, 4) })
}
