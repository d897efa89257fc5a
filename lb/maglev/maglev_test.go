package maglev

import (
	"fmt"
	"testing"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/lb/internal/lbtest"
)

func TestTableMatchesEnvoy(t *testing.T) {
	// Vectors from Envoy's maglev_lb_test.cc: hash i → expected host index for i in 0..size-1.
	tests := []struct {
		name        string
		weights     []uint32
		useHostname bool
		size        uint64
		want        []int
		minE, maxE  uint64
	}{
		{"basic", []uint32{1, 1, 1, 1, 1, 1}, false, 7, []int{2, 4, 0, 1, 5, 0, 3}, 1, 2},
		{"hostname", []uint32{1, 1, 1, 1, 1, 1}, true, 7, []int{2, 5, 0, 3, 4, 1, 0}, 1, 2},
		{"weighted", []uint32{1, 2}, false, 17, []int{1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 0, 1}, 6, 11},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hosts := make([]*host.Host, len(tc.weights))
			for i, w := range tc.weights {
				hosts[i] = lbtest.Host(t, host.Config{Address: fmt.Sprintf("127.0.0.1:%d", 90+i), Hostname: fmt.Sprint(90 + i), Weight: w})
			}
			b, err := New(lb.Params{PrioritySet: lbtest.PrioritySet(t, hosts)},
				&lb.Config{Maglev: lb.MaglevConfig{TableSize: tc.size}, UseHostnameForHashing: tc.useHostname})
			if err != nil {
				t.Fatal(err)
			}
			tab := b.Table(0).(*Table)
			if tab.MinEntriesPerHost != tc.minE || tab.MaxEntriesPerHost != tc.maxE {
				t.Errorf("min, max entries = %d, %d; want %d, %d", tab.MinEntriesPerHost, tab.MaxEntriesPerHost, tc.minE, tc.maxE)
			}
			for i := range 3 * len(tc.want) {
				got, err := b.Pick(&lb.Context{HashKey: uint64(i), HasHashKey: true})
				if want := hosts[tc.want[i%len(tc.want)]]; err != nil || got != want {
					t.Errorf("Pick(hash %d) = %v, %v; want %v", i, got, err, want)
				}
			}
		})
	}
}

func TestLocalityWeightedMatchesEnvoy(t *testing.T) {
	// Envoy's LocalityWeightedDifferentLocalityWeights: zones A (w 8), B (w 0), C (w 2).
	a, b, c := host.Locality{Zone: "A"}, host.Locality{Zone: "B"}, host.Locality{Zone: "C"}
	hosts := []*host.Host{
		lbtest.Host(t, host.Config{Address: "127.0.0.1:90", Locality: a, Weight: 1}),
		lbtest.Host(t, host.Config{Address: "127.0.0.1:91", Locality: c, Weight: 2}),
		lbtest.Host(t, host.Config{Address: "127.0.0.1:92", Locality: b, Weight: 3}),
	}
	set, err := host.NewSet(host.SetConfig{Hosts: hosts, LocalityWeights: map[host.Locality]uint32{a: 8, b: 0, c: 2}})
	if err != nil {
		t.Fatal(err)
	}
	ps, _ := host.NewPrioritySet(set)
	bal, err := New(lb.Params{PrioritySet: ps}, &lb.Config{Maglev: lb.MaglevConfig{TableSize: 17}, LocalityWeighted: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []int{1, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0}
	for i, w := range want {
		if got, _ := bal.Pick(&lb.Context{HashKey: uint64(i), HasHashKey: true}); got != hosts[w] {
			t.Errorf("Pick(hash %d) = %v; want %v", i, got, hosts[w])
		}
	}
}

func TestRetryPerturbsHash(t *testing.T) {
	// Envoy's maglev retry test: hash 10 on the basic table picks :91; rejecting it moves to :90.
	hosts := make([]*host.Host, 6)
	for i := range hosts {
		hosts[i] = lbtest.Host(t, host.Config{Address: fmt.Sprintf("127.0.0.1:%d", 90+i)})
	}
	b, err := New(lb.Params{PrioritySet: lbtest.PrioritySet(t, hosts)}, &lb.Config{Maglev: lb.MaglevConfig{TableSize: 7}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := &lb.Context{HashKey: 10, HasHashKey: true, RetryCount: 2}
	if got, _ := b.Pick(ctx); got != hosts[1] {
		t.Fatalf("Pick(10) = %v; want %v", got, hosts[1])
	}
	ctx.AddAttempted(hosts[1])
	if got, _ := b.Pick(ctx); got != hosts[0] {
		t.Errorf("Pick(10) after rejecting %v = %v; want %v", hosts[1], got, hosts[0])
	}
}

func TestTableSizeValidation(t *testing.T) {
	ps := lbtest.PrioritySet(t, lbtest.Hosts(t, 2))
	if _, err := New(lb.Params{PrioritySet: ps}, &lb.Config{Maglev: lb.MaglevConfig{TableSize: 8}}); err == nil {
		t.Errorf("New(table_size 8) error = nil; want a prime-number error")
	}
}

func TestDistribution(t *testing.T) {
	hosts := lbtest.Hosts(t, 4, 1, 2, 3, 4)
	b, err := New(lb.Params{PrioritySet: lbtest.PrioritySet(t, hosts), Rand: lbtest.Rand(7)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lbtest.ChiSquare(t, hosts, []float64{1, 2, 3, 4}, lbtest.Count(t, b, nil, 100000))
}

func TestPickDoesNotAllocate(t *testing.T) {
	b, err := New(lb.Params{PrioritySet: lbtest.PrioritySet(t, lbtest.Hosts(t, 100))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lbtest.NoAllocs(t, b, &lb.Context{HashKey: 42, HasHashKey: true})
}

func BenchmarkPick(b *testing.B) {
	lbtest.BenchPick(b, func(p lb.Params) (lb.Balancer, error) { return New(p, nil) }, lbtest.HashContext)
}

func BenchmarkBuild(b *testing.B) {
	hosts := lbtest.Hosts(b, 100)
	ws := make([]lb.WeightedHost, len(hosts))
	for i, h := range hosts {
		ws[i] = lb.WeightedHost{Host: h, Weight: 0.01}
	}
	b.Run("hosts=100", func(b *testing.B) {
		lbtest.ReportCPU(b, func() { NewTable(ws, 0.01, lb.DefaultMaglevTableSize, false) })
	})
}
