package procpin

import (
	"sync"
	"sync/atomic"
)

// Cache keeps freed objects of one kind per P, up to a bound each, for a request path that
// takes one and gives it back on every request. Its Get and Put pin the caller to its P and
// push or pop a short stack: about 25 instructions, where sync.Pool's, whose private slot
// goes to whichever of many interleaved connections gave back last, took 110 to 125 (its
// shared ring) on the HTTP/1.1 rig. What a P's stack cannot hold goes through a sync.Pool,
// which the GC may empty; the stacks are not emptied, so a Cache holds at most Bound objects
// per P for good. The table of stacks is made for GOMAXPROCS at first use and made again,
// larger, when a P beyond it comes (GOMAXPROCS raised by the program, or by the runtime after
// a container's CPU limit changed); the objects of the old one are left to the GC. Size
// Bound to how many a P gives back before it takes them again: what spills costs sync.Pool's
// price on top of the Cache's.
//
// Safe for concurrent use: only the goroutine pinned to a P touches that P's stack.
type Cache[T any] struct {
	// New makes an object when the P's stack and the pool are both empty.
	New func() *T
	// Bound is how many objects a P keeps at most (16 when zero).
	Bound int

	stacks atomic.Pointer[[]stack[T]]
	spill  sync.Pool
}

type stack[T any] struct {
	items []*T
	_     [40]byte // a cache line each: Ps do not share the line they write
}

// Get returns a kept object, or a new one.
//
// Get and Put find the P's stack and push or pop in one pinned section, in line: the table is
// loaded after Pin (a load may be pinned; only grow, which allocates, may not), and only a
// table not made yet or too small, an empty stack or a full one goes to the slow path, which
// pins again. A popped slot is not cleared: it holds an object the cache handed out until a
// Put overwrites it, which keeps at most Bound objects a P alive, as a full stack does, and
// saves a pointer store (with its write-barrier test) on every Get.
func (c *Cache[T]) Get() *T {
	id := Pin()
	if st := c.stacks.Load(); st != nil && uint(id) < uint(len(*st)) {
		s := &(*st)[id]
		raceAcquire(s)
		if n := len(s.items) - 1; n >= 0 {
			x := s.items[n]
			s.items = s.items[:n]
			c.unpin(s)
			return x
		}
		c.unpin(s)
		return c.getSpill()
	}
	Unpin()
	return c.getSlow()
}

// getSlow is Get where the table lacks the caller's P (or is not made yet): pin grows it.
func (c *Cache[T]) getSlow() *T {
	s := c.pin()
	if n := len(s.items) - 1; n >= 0 {
		x := s.items[n]
		s.items = s.items[:n]
		c.unpin(s)
		return x
	}
	c.unpin(s)
	return c.getSpill()
}

// getSpill takes an object from the spill pool, or makes one.
func (c *Cache[T]) getSpill() *T {
	if x, ok := c.spill.Get().(*T); ok {
		return x
	}
	return c.New()
}

// Put keeps x for a later Get; x must not be used after.
func (c *Cache[T]) Put(x *T) {
	id := Pin()
	if st := c.stacks.Load(); st != nil && uint(id) < uint(len(*st)) {
		s := &(*st)[id]
		raceAcquire(s)
		if n := len(s.items); n < cap(s.items) {
			s.items = s.items[:n+1]
			s.items[n] = x
			c.unpin(s)
			return
		}
		c.unpin(s)
		c.spill.Put(x)
		return
	}
	Unpin()
	c.putSlow(x)
}

// putSlow is Put where the table lacks the caller's P (or is not made yet): pin grows it.
func (c *Cache[T]) putSlow(x *T) {
	s := c.pin()
	if n := len(s.items); n < cap(s.items) {
		s.items = s.items[:n+1]
		s.items[n] = x
		c.unpin(s)
		return
	}
	c.unpin(s)
	c.spill.Put(x)
}

// pin keeps the caller on its P and returns that P's stack; unpin ends the section. A P beyond
// the table (GOMAXPROCS was raised since it was made) makes a larger one first.
func (c *Cache[T]) pin() *stack[T] {
	st := c.stacks.Load()
	if st == nil {
		st = c.grow(nil, 0) // before Pin: it allocates
	}
	for {
		id := Pin()
		if id < len(*st) {
			s := &(*st)[id]
			raceAcquire(s)
			return s
		}
		Unpin()
		st = c.grow(st, id)
	}
}

func (c *Cache[T]) unpin(s *stack[T]) {
	raceRelease(s)
	Unpin()
}

// grow replaces the table old (nil: none yet) with one of a stack for P id and for every P of
// GOMAXPROCS now, each with room for Bound, and returns the table installed (this one or a
// concurrent caller's). The new table's stacks start empty: a P's stack may be in use by the
// goroutine pinned to it, so its objects cannot be moved; they are left to the GC with the old
// table, as a goroutine that loaded the old table before the swap may still give one back to
// it (it is still the only one on its P: every stack of either table has one writer at a time).
func (c *Cache[T]) grow(old *[]stack[T], id int) *[]stack[T] {
	bound := c.Bound
	if bound <= 0 {
		bound = 16
	}
	for {
		have := 0
		if old != nil {
			have = len(*old)
		}
		st := make([]stack[T], max(Slots(), id+1, have))
		for i := range st {
			// Room for whole lines of pointers, of which Bound are used: a P writes its
			// array on every Get and Put, which then shares no line with another's.
			st[i].items = make([]*T, 0, (bound+7)&^7)[:0:bound]
		}
		if c.stacks.CompareAndSwap(old, &st) {
			return &st
		}
		if old = c.stacks.Load(); id < len(*old) {
			return old
		}
	}
}
