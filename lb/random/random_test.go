package random

import (
	"testing"

	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/lb/internal/lbtest"
)

func TestOneDrawChoosesPriorityAndHost(t *testing.T) {
	hosts := lbtest.Hosts(t, 3)
	b, err := New(lb.Params{PrioritySet: lbtest.PrioritySet(t, hosts), Rand: lbtest.Fixed(7)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Pick(nil); got != hosts[1] {
		t.Errorf("Pick() with draw 7 = %v; want %v (7 mod 3)", got, hosts[1])
	}
}

func TestDistributionIgnoresWeights(t *testing.T) {
	// Envoy's RANDOM policy is uniform over the chosen host list whatever the weights.
	hosts := lbtest.Hosts(t, 5, 1, 2, 3, 4, 5)
	b, err := New(lb.Params{PrioritySet: lbtest.PrioritySet(t, hosts), Rand: lbtest.Rand(11)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lbtest.ChiSquare(t, hosts, []float64{1, 1, 1, 1, 1}, lbtest.Count(t, b, nil, 50000))
}

func TestPickDoesNotAllocate(t *testing.T) {
	b, err := New(lb.Params{PrioritySet: lbtest.PrioritySet(t, lbtest.Hosts(t, 100))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lbtest.NoAllocs(t, b, nil)
}

func BenchmarkPick(b *testing.B) {
	lbtest.BenchPick(b, func(p lb.Params) (lb.Balancer, error) { return New(p, nil) }, lbtest.PlainContext)
}
