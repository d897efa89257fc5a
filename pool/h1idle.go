package pool

import (
	"sync"
	"sync/atomic"

	"github.com/legateproxy/legate/internal/procpin"
)

// A host's idle HTTP/1.1 connections are kept in one list per P (at most maxIdleShards, as
// procpin.Lines bounds its lines), each under its own lock on a cache line of its own: a
// request takes a connection from the list of the P it runs on and the P that finishes it
// puts it back on its own, so on many cores no lock or list is written by every request to
// the host, as Envoy keeps a pool per worker thread. A request whose list is empty takes one
// from another P's before dialling, so a load served by one connection today still is. The
// table of lists is made for GOMAXPROCS at the pool's first use and made again, larger, when
// a P beyond it comes (GOMAXPROCS raised by the program, or by the runtime following a
// container's CPU limit), holding the same lists: a connection idle on one stays where every
// P's walk finds it, and no P beyond the table puts and takes on another P's list for good.
//
// Lock order: hostPool.mu before an idleShard's mu; a shard's lock is never held while
// taking hostPool.mu.
const maxIdleShards = 16

// idleShard is the idle list of one P (or of the Ps that share it), allocated on its own.
type idleShard struct {
	mu    sync.Mutex
	n     atomic.Int32 // len(conns), read without mu to skip empty lists
	conns []*h1conn    // most recently used last; guarded by mu
	_     [24]byte     // pads the shard to a 64-byte cache line
}

// idleLists is a pool's table of idle lists, made at its first use.
type idleLists struct{ t atomic.Pointer[idleTable] }

// idleTable holds n lists, list[id] P id's (n: GOMAXPROCS, at most maxIdleShards, when it was
// made). A table is never changed once published; a larger one replaces it.
type idleTable struct {
	n    int
	list [maxIdleShards]*idleShard
	_    [56]byte // 192 bytes, whole lines: read by every request, it shares none with an object written
}

// lists returns the idle lists (none before the pool's first use).
func (l *idleLists) lists() []*idleShard {
	if t := l.t.Load(); t != nil {
		return t.list[:t.n]
	}
	return nil
}

// grow returns a table with a list for P id, unless the table is at maxIdleShards (then id
// shares one): the current one, or one made for GOMAXPROCS now holding the current lists.
func (l *idleLists) grow(id int) (*idleTable, int) {
	for {
		old := l.t.Load()
		if old != nil && (id < old.n || old.n == maxIdleShards) {
			return old, id % old.n
		}
		t := &idleTable{n: min(max(procpin.Slots(), id+1), maxIdleShards)}
		if old != nil {
			t.n = max(t.n, old.n)
			copy(t.list[:], old.list[:old.n])
		}
		for i := range t.n {
			if t.list[i] == nil {
				t.list[i] = new(idleShard)
			}
		}
		if l.t.CompareAndSwap(old, t) {
			return t, id % t.n
		}
	}
}

// localShard returns the idle lists and the index of the list of the P running the caller.
// The caller may move to another P at once: the index only chooses where to look first.
func (hp *hostPool) localShard() (*idleTable, int) {
	id := procpin.Pin()
	procpin.Unpin()
	if t := hp.idle.t.Load(); t != nil && uint(id) < uint(t.n) {
		return t, id
	}
	return hp.idle.grow(id)
}

// putIdle makes c, which the caller owns, idle on the list of the caller's P.
func (hp *hostPool) putIdle(c *h1conn, now int64) {
	t, i := hp.localShard()
	s := t.list[i]
	c.unchecked = true // whoever takes it checks it before use
	s.mu.Lock()
	c.idleSince = now
	s.conns = append(s.conns, c)
	s.n.Store(int32(len(s.conns)))
	c.shard.Store(s)
	s.mu.Unlock()
}

// popIdle takes the most recently used idle connection of the caller's P's list, else of the
// next non-empty one; nil when every list is empty. The caller owns what it gets.
func (hp *hostPool) popIdle() *h1conn {
	t, i := hp.localShard()
	for range t.n {
		s := t.list[i]
		if i++; i == t.n {
			i = 0
		}
		if s.n.Load() == 0 {
			continue
		}
		s.mu.Lock()
		if n := len(s.conns); n > 0 {
			c := s.conns[n-1]
			s.conns[n-1] = nil
			s.conns = s.conns[:n-1]
			s.n.Store(int32(n - 1))
			c.shard.Store(nil)
			s.mu.Unlock()
			return c
		}
		s.mu.Unlock()
	}
	return nil
}

// lockIdle returns the list c is idle in, locked, or nil when c is not idle (then its owner
// is an exchange).
func (c *h1conn) lockIdle() *idleShard {
	for {
		s := c.shard.Load()
		if s == nil {
			return nil
		}
		s.mu.Lock()
		if c.shard.Load() == s {
			return s
		}
		s.mu.Unlock() // taken, and perhaps made idle on another list, meanwhile
	}
}

// removeLocked takes c, idle in s, out of it; the caller becomes its owner. s.mu is held.
func (s *idleShard) removeLocked(c *h1conn) {
	for i, x := range s.conns {
		if x == c {
			last := len(s.conns) - 1
			copy(s.conns[i:], s.conns[i+1:])
			s.conns[last] = nil
			s.conns = s.conns[:last]
			s.n.Store(int32(last))
			break
		}
	}
	c.shard.Store(nil)
}

// takeAllIdleLocked empties every idle list and forgets their connections, which the caller
// owns and closes (drain, retire, health failure). hp.mu is held.
func (hp *hostPool) takeAllIdleLocked() []*h1conn {
	var all []*h1conn
	for _, s := range hp.idle.lists() {
		s.mu.Lock()
		for j, c := range s.conns {
			c.shard.Store(nil)
			delete(hp.h1, c)
			all = append(all, c)
			s.conns[j] = nil
		}
		s.conns = s.conns[:0]
		s.n.Store(0)
		s.mu.Unlock()
	}
	return all
}

// idleCount returns the number of idle HTTP/1.1 connections: exact when no request takes or
// returns one meanwhile (hp.mu held keeps waiters and dials from changing it).
func (hp *hostPool) idleCount() int {
	n := 0
	for _, s := range hp.idle.lists() {
		n += int(s.n.Load())
	}
	return n
}
