package procpin

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

type obj struct {
	id    int
	taken atomic.Bool
}

func TestCacheKeepsPerPInOrder(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	made := 0
	c := &Cache[obj]{New: func() *obj { made++; return &obj{id: -made} }, Bound: 3}
	a, b, d := &obj{id: 1}, &obj{id: 2}, &obj{id: 3}
	c.Put(a)
	c.Put(b)
	c.Put(d)
	for _, want := range []*obj{d, b, a} {
		if got := c.Get(); got != want {
			t.Fatalf("Get = %d, want %d (last kept first)", got.id, want.id)
		}
	}
	if got := c.Get(); got.id != -1 || made != 1 {
		t.Fatalf("Get on an empty cache = %d with %d made; want a new one", got.id, made)
	}
}

func TestCacheBoundSpills(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	c := &Cache[obj]{New: func() *obj { return &obj{id: -1} }, Bound: 2}
	for i := range 5 {
		c.Put(&obj{id: i})
	}
	st := c.stacks.Load()
	if n := len((*st)[0].items); n != 2 {
		t.Fatalf("the P keeps %d objects, want its bound 2", n)
	}
	// The last two kept come back first; the spilled three went to the pool.
	if a, b := c.Get(), c.Get(); a.id != 1 || b.id != 0 {
		t.Fatalf("Get, Get = %d, %d; want 1, 0", a.id, b.id)
	}
}

// TestCacheNeverSharesAnObject has goroutines on more Ps than the table was made for take
// and give back objects: none may be handed out while another holds it.
func TestCacheNeverSharesAnObject(t *testing.T) {
	prev := runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(prev)
	var made atomic.Int64
	c := &Cache[obj]{New: func() *obj { made.Add(1); return &obj{} }, Bound: 4}
	c.Put(&obj{}) // sizes the table for 2 Ps
	runtime.GOMAXPROCS(8)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			var held []*obj
			for i := range 5000 {
				x := c.Get()
				if !x.taken.CompareAndSwap(false, true) {
					t.Error("an object was handed out twice")
					return
				}
				held = append(held, x)
				if i%3 == 0 || len(held) > 5 {
					for _, h := range held {
						h.taken.Store(false)
						c.Put(h)
					}
					held = held[:0]
				}
				if i%64 == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	wg.Wait()
	if made.Load() == 0 {
		t.Fatal("no object was made: the test did not run")
	}
}

func TestCacheDoesNotAllocate(t *testing.T) {
	c := &Cache[obj]{New: func() *obj { return &obj{} }}
	c.Put(c.Get())
	if n := testing.AllocsPerRun(1000, func() { c.Put(c.Get()) }); n != 0 {
		t.Fatalf("Get and Put allocate %v times", n)
	}
}

func BenchmarkCache(b *testing.B) {
	c := &Cache[obj]{New: func() *obj { return &obj{} }}
	var p sync.Pool
	p.New = func() any { return &obj{} }
	b.Run("cache", func(b *testing.B) {
		for b.Loop() {
			c.Put(c.Get())
		}
	})
	b.Run("sync.Pool", func(b *testing.B) {
		for b.Loop() {
			p.Put(p.Get())
		}
	})
}
