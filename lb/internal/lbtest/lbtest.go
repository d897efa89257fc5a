package lbtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/cputime"
	"github.com/legateproxy/legate/lb"
)

// Host builds a host or fails the test.
func Host(t testing.TB, cfg host.Config) *host.Host {
	t.Helper()
	h, err := host.New(cfg)
	if err != nil {
		t.Fatalf("host.New(%+v) = %v", cfg, err)
	}
	return h
}

// Hosts builds n hosts 10.0.x.y:80 with the given weights (cycled; nil means weight 1).
func Hosts(t testing.TB, n int, weights ...uint32) []*host.Host {
	t.Helper()
	out := make([]*host.Host, n)
	for i := range out {
		w := uint32(1)
		if len(weights) > 0 {
			w = weights[i%len(weights)]
		}
		out[i] = Host(t, host.Config{Address: fmt.Sprintf("10.0.%d.%d:80", i/256, i%256), Weight: w})
	}
	return out
}

// PrioritySet builds a priority set from sets of hosts, level i from sets[i].
func PrioritySet(t testing.TB, sets ...[]*host.Host) *host.PrioritySet {
	t.Helper()
	var ss []*host.Set
	for i, hs := range sets {
		s, err := host.NewSet(host.SetConfig{Priority: uint32(i), Hosts: hs})
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s)
	}
	ps, err := host.NewPrioritySet(ss...)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// Rand returns a deterministic random source seeded with seed, safe for concurrent use.
func Rand(seed uint64) func() uint64 {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return func() uint64 {
		mu.Lock()
		defer mu.Unlock()
		return r.Uint64()
	}
}

// Fixed returns a random source that yields vals in order, then repeats them.
func Fixed(vals ...uint64) func() uint64 {
	i := 0
	return func() uint64 {
		v := vals[i%len(vals)]
		i++
		return v
	}
}

// Count picks n times and counts picks per host.
func Count(t testing.TB, b lb.Balancer, ctx *lb.Context, n int) map[*host.Host]int {
	t.Helper()
	counts := map[*host.Host]int{}
	for range n {
		h, err := b.Pick(ctx)
		if err != nil {
			t.Fatalf("Pick() error = %v", err)
		}
		counts[h]++
	}
	return counts
}

// ChiSquare checks that counts follow the expected proportions (weights, any scale) with a
// chi-square test at roughly the 0.1% level; hosts with weight 0 must get no pick.
func ChiSquare(t testing.TB, hosts []*host.Host, weights []float64, counts map[*host.Host]int) {
	t.Helper()
	var total, wsum float64
	for i, h := range hosts {
		total += float64(counts[h])
		wsum += weights[i]
	}
	var chi float64
	df := -1
	for i, h := range hosts {
		if weights[i] == 0 {
			if counts[h] != 0 {
				t.Errorf("host %s got %d picks; want 0", h, counts[h])
			}
			continue
		}
		df++
		exp := total * weights[i] / wsum
		d := float64(counts[h]) - exp
		chi += d * d / exp
	}
	// Wilson–Hilferty approximation of the 99.9% quantile of chi-square with df degrees.
	k := float64(max(df, 1))
	z := 3.09
	a := 2 / (9 * k)
	q := 1 - a + z*math.Sqrt(a)
	limit := k * q * q * q
	if chi > limit {
		t.Errorf("chi-square = %.1f with %d degrees of freedom; want <= %.1f (counts not proportional to weights)", chi, df, limit)
	}
}

// NoAllocs fails the test when b.Pick(ctx) allocates.
func NoAllocs(t *testing.T, b lb.Balancer, ctx *lb.Context) {
	t.Helper()
	if n := testing.AllocsPerRun(200, func() { _, _ = b.Pick(ctx) }); n != 0 {
		t.Errorf("Pick() allocations = %v; want 0", n)
	}
}

// BenchPick benchmarks Pick over sizes of hosts with weights (nil: equal), serially and in
// parallel (BenchBalancer).
func BenchPick(b *testing.B, build func(lb.Params) (lb.Balancer, error), ctx func() *lb.Context, weights ...uint32) {
	for _, n := range []int{10, 100, 10000} {
		bal, err := build(lb.Params{PrioritySet: PrioritySet(b, Hosts(b, n, weights...))})
		if err != nil {
			b.Fatal(err)
		}
		BenchBalancer(b, fmt.Sprintf("hosts=%d", n), bal, ctx)
	}
}

// BenchBalancer benchmarks bal.Pick as name, serially, and as name/parallel, b.N picks split
// over GOMAXPROCS goroutines (each with its own ctx()), reporting the process CPU time per
// pick beside the wall time.
func BenchBalancer(b *testing.B, name string, bal lb.Balancer, ctx func() *lb.Context) {
	b.Run(name, func(b *testing.B) {
		c := ctx()
		b.ReportAllocs()
		ReportCPU(b, func() { _, _ = bal.Pick(c) })
	})
	b.Run(name+"/parallel", func(b *testing.B) {
		b.ReportAllocs()
		// Picks that scale cost the same CPU per pick in parallel as serially; contention
		// on a shared cache line shows up here even when other load hides it in ns/op.
		cputime.Report(b, func() {
			parallel(b, func(n int) {
				c := ctx()
				for range n {
					_, _ = bal.Pick(c)
				}
			})
		})
	})
}

// parallel runs b.N iterations split over GOMAXPROCS goroutines, each calling run with its
// share. It stands in for b.RunParallel, whose per-goroutine testing.PB is 32 bytes written on
// every iteration: two of them sharing a cache line made about one run in five measure the
// harness's false sharing (2.5 times the CPU per pick) rather than the balancer.
func parallel(b *testing.B, run func(n int)) {
	procs := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	b.ResetTimer()
	for g := range procs {
		n := b.N / procs
		if g == 0 {
			n += b.N % procs
		}
		wg.Go(func() { run(n) })
	}
	wg.Wait()
}

// HashContext returns a context with a random hash key (for consistent-hashing benchmarks).
func HashContext() *lb.Context {
	return &lb.Context{HashKey: rand.Uint64(), HasHashKey: true}
}

// PlainContext returns an empty context.
func PlainContext() *lb.Context { return &lb.Context{} }

// ReportCPU runs f b.N times (through b.Loop) and reports the process CPU time (user plus
// system) per call as "cpu-ns/op": on a shared, loaded machine it varies far less than the
// wall time. Run with -cpu 1 so that other goroutines of the test binary add little.
func ReportCPU(b *testing.B, f func()) {
	cputime.Report(b, func() {
		for b.Loop() {
			f()
		}
	})
}
