package procpin

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
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

// TestCacheGrowsWithGOMAXPROCS raises GOMAXPROCS after the table was made for one P: a P
// beyond it must get a stack of its own (the table grows to GOMAXPROCS), not go to the
// sync.Pool on every Get and Put for good, and every stack stays on lines of its own.
func TestCacheGrowsWithGOMAXPROCS(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	c := &Cache[obj]{New: func() *obj { return &obj{} }, Bound: 3}
	c.Put(c.Get()) // makes the table for 1 P
	if n := len(*c.stacks.Load()); n != 1 {
		t.Fatalf("a table made with GOMAXPROCS 1 has %d stacks; want 1", n)
	}
	const procs = 4
	runtime.GOMAXPROCS(procs)
	// Goroutines busy on every P until one of them ran on a P other than 0 (the runtime
	// starts the idle Ps' threads when goroutines are runnable); bounded, not timed.
	var beyond atomic.Bool
	var wg sync.WaitGroup
	for range procs {
		wg.Go(func() {
			for i := 0; i < 1_000_000 && !beyond.Load(); i++ {
				id := Pin()
				Unpin()
				c.Put(c.Get())
				if id > 0 {
					beyond.Store(true)
				}
				if i%64 == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	wg.Wait()
	if !beyond.Load() {
		t.Fatal("no goroutine ran on a P other than 0 in a million Gets and Puts each")
	}
	st := *c.stacks.Load()
	if len(st) < procs {
		t.Fatalf("after Gets and Puts on %d Ps the table has %d stacks; want one per P", procs, len(st))
	}
	lines := map[uintptr]int{}
	for i := range st {
		for _, a := range []uintptr{uintptr(unsafe.Pointer(&st[i])), uintptr(unsafe.Pointer(unsafe.SliceData(st[i].items)))} {
			if other, ok := lines[a/64]; ok && other != i {
				t.Fatalf("the stacks of Ps %d and %d share a cache line", other, i)
			}
			lines[a/64] = i
		}
	}
}
