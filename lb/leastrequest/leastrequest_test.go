package leastrequest

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/cputime"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/lb/internal/lbtest"
)

func TestUnweightedPowerOfChoices(t *testing.T) {
	oneLine(t)
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
	oneLine(t)
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
	oneLine(t)
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

// oneLine runs the test on one P, so that the hosts it makes keep their requests in flight on one
// line and the requests a test adds by hand are the ones its picks read, whichever P runs it.
func oneLine(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

// TestPerPAvoidsSlowHost: on four Ps, each pick weighs hosts by the requests its own P has in
// flight, and a slow host, whose requests never end, is still avoided by every P (each P's
// requests pile up on it), while the fast hosts share the rest evenly; the host's total counts
// every P's requests.
func TestPerPAvoidsSlowHost(t *testing.T) {
	prev := runtime.GOMAXPROCS(4)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	const nhosts, goroutines, picks = 10, 8, 4000
	hosts := lbtest.Hosts(t, nhosts)
	b, err := New(lb.Params{PrioritySet: lbtest.PrioritySet(t, hosts)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	slow := hosts[0]
	var counts [nhosts]atomic.Int64
	index := map[*host.Host]int{}
	for i, h := range hosts {
		index[h] = i
	}
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range picks {
				h, err := b.Pick(nil)
				if err != nil {
					t.Error(err)
					return
				}
				counts[index[h]].Add(1)
				if tok := h.ActiveRequestStarted(); h != slow {
					h.ActiveRequestEnded(tok)
				}
			}
		})
	}
	wg.Wait()
	total := int64(goroutines * picks)
	// Uniform picks would give the slow host 10%; once each P has a request on it, it wins only
	// when both samples are it (1%).
	if n := counts[0].Load(); n > total*3/100 {
		t.Errorf("slow host picks = %d of %d; want under 3%%", n, total)
	}
	if got, want := slow.ActiveRequests(), counts[0].Load(); got != want {
		t.Errorf("slow host ActiveRequests() = %d; want %d (every P's requests)", got, want)
	}
	for i := 1; i < nhosts; i++ {
		if got := hosts[i].ActiveRequests(); got != 0 {
			t.Errorf("host %d ActiveRequests() = %d; want 0", i, got)
		}
	}
	// The fast hosts share the rest evenly. Not a chi-square: a goroutine descheduled between
	// its request's start and end keeps that host busy on its P meanwhile, which the P then
	// rightly avoids, so picks are not independent draws.
	share := float64(total-counts[0].Load()) / (nhosts - 1)
	got := make([]int64, nhosts)
	for i := range counts {
		got[i] = counts[i].Load()
	}
	t.Logf("picks per host on %d Ps (host 0 slow): %v", runtime.GOMAXPROCS(0), got)
	for i := 1; i < nhosts; i++ {
		if n := float64(counts[i].Load()); n < share*0.65 || n > share*1.35 {
			t.Errorf("fast host %d picks = %.0f; want %.0f ± 35%%", i, n, share)
		}
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

// BenchmarkPickRequest is a pick followed by what the pool does for the request it sends: count
// it in flight on the host and take it off when it ends. Serially and on every P, with the
// process CPU per request: a line every P writes shows up as more CPU in parallel, the more so
// the fewer the hosts.
func BenchmarkPickRequest(b *testing.B) {
	for _, n := range []int{3, 100} {
		bal, err := New(lb.Params{PrioritySet: lbtest.PrioritySet(b, lbtest.Hosts(b, n))}, nil)
		if err != nil {
			b.Fatal(err)
		}
		request := func() {
			h, _ := bal.Pick(nil)
			h.ActiveRequestEnded(h.ActiveRequestStarted())
		}
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			lbtest.ReportCPU(b, request)
		})
		b.Run(fmt.Sprintf("hosts=%d/parallel", n), func(b *testing.B) {
			b.ReportAllocs()
			cputime.Report(b, func() {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						request()
					}
				})
			})
		})
	}
}
