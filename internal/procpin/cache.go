package procpin

import (
	"sync"
	"sync/atomic"
)

// Cache keeps freed objects of one kind per P, up to a bound each, for a request path that
// takes one and gives it back on every request. Its Get and Put pin the caller to its P and
// push or pop a short stack: about 25 instructions, where sync.Pool's, whose private slot
// goes to whichever of many interleaved connections gave back last, took 110 to 125 (its
// shared ring) on the HTTP/1.1 rig. What a P's stack cannot hold, or a P beyond the table (it
// is sized once, for GOMAXPROCS then), goes through a sync.Pool, which the GC may empty;
// the stacks are not emptied, so a Cache holds at most Bound objects per P for good. Size
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
func (c *Cache[T]) Get() *T {
	s := c.pin()
	if s != nil && len(s.items) > 0 {
		n := len(s.items) - 1
		x := s.items[n]
		s.items[n] = nil
		s.items = s.items[:n]
		c.unpin(s)
		return x
	}
	c.unpin(s)
	if x, ok := c.spill.Get().(*T); ok {
		return x
	}
	return c.New()
}

// Put keeps x for a later Get; x must not be used after.
func (c *Cache[T]) Put(x *T) {
	s := c.pin()
	if s != nil && len(s.items) < cap(s.items) {
		s.items = append(s.items, x)
		c.unpin(s)
		return
	}
	c.unpin(s)
	c.spill.Put(x)
}

// pin keeps the caller on its P and returns that P's stack, nil for a P beyond the table;
// unpin ends the section.
func (c *Cache[T]) pin() *stack[T] {
	st := c.stacks.Load()
	if st == nil {
		st = c.init() // before Pin: it allocates
	}
	id := Pin()
	if id >= len(*st) {
		return nil
	}
	s := &(*st)[id]
	raceAcquire(s)
	return s
}

func (c *Cache[T]) unpin(s *stack[T]) {
	if s != nil {
		raceRelease(s)
	}
	Unpin()
}

// init makes the stacks on first use: one per P of GOMAXPROCS now, each with room for Bound.
func (c *Cache[T]) init() *[]stack[T] {
	bound := c.Bound
	if bound <= 0 {
		bound = 16
	}
	st := make([]stack[T], Slots())
	for i := range st {
		st[i].items = make([]*T, 0, bound)
	}
	c.stacks.CompareAndSwap(nil, &st)
	return c.stacks.Load()
}
