package httpproxy

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legateproxy/legate/pool"
)

// h2ctx is an HTTP/2 stream's request context, which ends when the stream does (the client
// reset it, the connection ended, or the handler finished). It is made with the h2stream and
// reused with it (renew): context.WithCancel cost two allocations a stream, and the HTTP/1.1
// pool's watch of that context (context.AfterFunc on a cancelCtx) six more. The pool watches
// this one through pool.EndWatcher, which allocates nothing; a Done channel is made only for
// a caller that asks for one, and context.AfterFunc and WithCancel over it use its AfterFunc.
//
// Nothing may keep it past its stream: every watch is stopped by the time the handler
// returns (the pool's exchanges end within it, the stream's deadlineCtx stops its watch
// before the stream goes back to its pool). Ids never repeat within one h2ctx, so a stale
// UnwatchEnd does nothing to the watches of the stream that reuses it.
type h2ctx struct {
	mu    sync.Mutex  // guards done, watch and next
	ended atomic.Bool // set once, under mu
	done  chan struct{}
	watch []h2watch // functions to run at the end
	next  uint64    // the last id given
}

// h2watch is a function an h2ctx runs when it ends.
type h2watch struct {
	id uint64
	f  func()
}

var _ pool.EndWatcher = (*h2ctx)(nil)

// renew readies x, whose stream is done, for the stream that reuses it. Its ids go on from
// where they were.
func (x *h2ctx) renew() {
	x.mu.Lock()
	x.ended.Store(false)
	x.done = nil
	clear(x.watch)
	x.watch = x.watch[:0]
	x.mu.Unlock()
}

// cancel ends the context: Done closes, Err reports context.Canceled, and each watch's
// function starts on a goroutine of its own (one may block, as closing a TLS connection can,
// and cancel runs on the connection's reader or under h2conn.mu).
func (x *h2ctx) cancel() {
	x.mu.Lock()
	if x.ended.Load() {
		x.mu.Unlock()
		return
	}
	x.ended.Store(true)
	if x.done != nil {
		close(x.done)
	}
	x.mu.Unlock()
	// Once ended, watch no longer changes (WatchEnd and UnwatchEnd only read ended) until
	// the stream is reused, which waits for its end.
	for _, w := range x.watch {
		go w.f()
	}
}

// WatchEnd implements pool.EndWatcher.
func (x *h2ctx) WatchEnd(f func()) uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ended.Load() {
		go f()
		return 0
	}
	x.next++
	x.watch = append(x.watch, h2watch{id: x.next, f: f})
	return x.next
}

// UnwatchEnd implements pool.EndWatcher.
func (x *h2ctx) UnwatchEnd(id uint64) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ended.Load() {
		return false
	}
	for i, w := range x.watch {
		if w.id == id {
			n := len(x.watch) - 1
			x.watch[i] = x.watch[n]
			x.watch[n] = h2watch{}
			x.watch = x.watch[:n]
			return true
		}
	}
	return false
}

// AfterFunc is what context.AfterFunc and context.WithCancel use to watch x (instead of a
// goroutine that waits on Done per watch).
func (x *h2ctx) AfterFunc(f func()) (stop func() bool) {
	id := x.WatchEnd(f)
	return func() bool { return id != 0 && x.UnwatchEnd(id) }
}

// Deadline implements context.Context: none.
func (x *h2ctx) Deadline() (time.Time, bool) { return time.Time{}, false }

// Done implements context.Context.
func (x *h2ctx) Done() <-chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.done == nil {
		x.done = make(chan struct{})
		if x.ended.Load() {
			close(x.done)
		}
	}
	return x.done
}

// Err implements context.Context.
func (x *h2ctx) Err() error {
	if x.ended.Load() {
		return context.Canceled
	}
	return nil
}

// Value implements context.Context; the context carries no values.
func (x *h2ctx) Value(any) any { return nil }
