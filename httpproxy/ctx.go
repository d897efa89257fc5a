package httpproxy

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/pool"
)

// deadlineCtx is the context of one upstream attempt, reused by the stream from attempt to
// attempt so that a request with a timeout allocates nothing in the common case. Deadline
// and Err are plain reads (the pool sets socket deadlines from Deadline); the Done channel
// and its timer are made only when someone waits on Done (the pool waiting for a connection,
// or the HTTP/2 transport).
//
// An HTTP/2 stream's attempts also end when the downstream request does (the client reset the
// stream or the connection closed): parent is the request's context, and Err then reports
// context.Canceled, so the pool resets the upstream stream or closes its connection.
//
// Every method is safe for concurrent use: context.WithTimeout over a context it does not
// know starts a goroutine that may call Done after the attempt has ended, while the stream
// already resets the context for its next request, so all fields are read under mu.
type deadlineCtx struct {
	mu       sync.Mutex   // guards every field below
	stamps   clock.Stamps // the connection manager's clock (shared.stamps)
	clock    *shared      // whose stamps they are (setup); written only by the stream's goroutine
	deadline int64        // a stamp (stamps); zero: none. Deadline makes its time.Time when asked
	// atEnd: the attempt's timeout, pending (zero: none), starts when the request's body
	// ends (start); until then the attempt has no deadline, and Done is a channel of its
	// own, which start arms and abort closes.
	atEnd   bool
	pending time.Duration
	parent  context.Context // the downstream request's context; nil: none
	done    chan struct{}
	// timer closes done at the deadline. It is kept from attempt to attempt, stopped and
	// reset, so that an attempt that waits on Done with a deadline (every HTTP/2 upstream
	// request) makes no timer: only one that fired is replaced (see stopLocked).
	timer      *attemptTimer
	timerArmed bool
	// parentEnd is fireParent, made once: the watch of parent, with no closure an attempt.
	parentEnd func()
	unwatch   func() bool // stops the watch of parent that closes done
	// watcher is parent when it is a pool.EndWatcher (an HTTP/2 stream's h2ctx), watched
	// without context.AfterFunc's allocations; watchID stops that watch.
	watcher pool.EndWatcher
	watchID uint64
	fired   bool // done was closed
	aborted bool // abort ended the attempt
	// abortable: abort may end the attempt (watch was called), so Done is a channel of
	// its own even without a deadline (the HTTP/2 pool waits on it).
	abortable bool
	// onAbort cancels the standard context handed to the pool as the downstream request's
	// (watch): the pool watches that one with context.AfterFunc, which over this reused
	// context would start a goroutine that reads Err after the stream moved on (a panic in
	// the context package: "missing cancel error").
	onAbort context.CancelFunc
	// endTimer cancels that context when a timeout started by start passes.
	endTimer *time.Timer
	// held: the attempt holds something stopLocked releases (a Done channel and what closes
	// it, a watched context, the abort), set under mu by Done, watch and abort and cleared by
	// stopLocked; read without mu by stop, so that an attempt that held nothing, as an
	// HTTP/1 request's to an HTTP/1 upstream, ends without taking the lock (about 80
	// instructions a request).
	held atomic.Bool
}

// watch returns a standard context that ends when the downstream request does (parent) or
// when abort ends the attempt; stop releases it. It is what the pool watches for an attempt
// whose body is still arriving.
func (c *deadlineCtx) watch(parent context.Context) context.Context {
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithCancel(parent)
	c.mu.Lock()
	if c.onAbort != nil {
		c.onAbort()
	}
	c.onAbort = cancel
	c.abortable = true
	c.held.Store(true)
	aborted := c.aborted
	c.mu.Unlock()
	if aborted {
		cancel()
	}
	return ctx
}

// setup sets the clock (sh's stamps) and the downstream request's context (nil: none) for
// the next attempts. A pooled stream's next HTTP/1 request (no parent) mostly sets what is
// set already: the stream's goroutine, the only writer, compares without the lock and takes it
// only to write (about 25 instructions and two atomic operations a request). Parents are not
// compared: a context's dynamic type need not be comparable.
func (c *deadlineCtx) setup(sh *shared, parent context.Context) {
	if parent == nil && c.parent == nil && c.clock == sh {
		return
	}
	c.mu.Lock()
	c.stamps, c.clock, c.parent = sh.stamps, sh, parent
	c.mu.Unlock()
}

var _ context.Context = (*deadlineCtx)(nil)

// reset starts a new attempt with deadline d (a stamp; zero: none), under one hold of the lock
// (a second cost about 20 instructions per request).
func (c *deadlineCtx) reset(d int64) {
	c.mu.Lock()
	if c.held.Load() {
		c.stopLocked()
	}
	c.deadline, c.atEnd, c.pending, c.abortable = d, false, 0, false
	c.mu.Unlock()
}

// resetAtEnd starts a new attempt whose timeout d (zero: none) runs from a later call of
// start: Envoy starts the route's timer when the downstream request is complete, so an
// upload that takes longer than the timeout is not cut by it.
func (c *deadlineCtx) resetAtEnd(d time.Duration) {
	c.stop()
	c.mu.Lock()
	c.deadline, c.atEnd, c.pending, c.abortable = 0, true, d, false
	c.mu.Unlock()
}

// start starts the pending timeout, if any (the request's body has ended).
func (c *deadlineCtx) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.atEnd {
		return
	}
	c.atEnd = false
	if c.pending <= 0 {
		return
	}
	d := c.pending
	c.deadline, c.pending = c.stamps.Now()+int64(d), 0
	if c.done != nil && !c.fired {
		c.armTimer(d)
	}
	if c.onAbort != nil {
		// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
		c.endTimer = time.AfterFunc(d, c.onAbort)
	}
}

// stop releases the Done timer of the last attempt. An attempt that held nothing (held) has
// nothing to release: a Done that comes after the check (context.WithTimeout's goroutine over
// this context may call it late) is released by the next attempt's reset, as one that comes
// after stop's lock is.
func (c *deadlineCtx) stop() {
	if !c.held.Load() {
		return
	}
	c.mu.Lock()
	c.stopLocked()
	c.mu.Unlock()
}

// stopLocked is stop with mu held.
func (c *deadlineCtx) stopLocked() {
	if c.timerArmed {
		c.timerArmed = false
		if !c.timer.t.Stop() {
			// Its function ran or is about to, maybe waiting for mu now: a later attempt's
			// deadline takes a new timer, which that late run cannot mistake for its own.
			c.timer = nil
		}
	}
	if c.unwatch != nil {
		c.unwatch()
		c.unwatch = nil
	}
	if c.watcher != nil {
		c.watcher.UnwatchEnd(c.watchID)
		c.watcher = nil
	}
	if c.endTimer != nil {
		c.endTimer.Stop()
		c.endTimer = nil
	}
	if c.onAbort != nil {
		c.onAbort()
		c.onAbort = nil
	}
	c.done, c.fired, c.aborted = nil, false, false
	c.held.Store(false)
}

// abort ends the attempt now (stream_idle_timeout passed): Done closes and Err reports
// context.Canceled.
func (c *deadlineCtx) abort() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.aborted = true
	c.held.Store(true)
	if c.done != nil && !c.fired {
		c.fired = true
		close(c.done)
	}
	if c.onAbort != nil {
		c.onAbort()
	}
}

// Deadline implements context.Context, its time.Time made from the stamp when asked: the
// HTTP/1.1 pool takes the stamp from pool.Request.Deadline instead; the HTTP/2 one, and a wait
// for a connection, ask. No defer (it cost about 15 instructions).
func (c *deadlineCtx) Deadline() (time.Time, bool) {
	c.mu.Lock()
	d, st := c.deadline, c.stamps
	c.mu.Unlock()
	if d == 0 {
		return time.Time{}, false
	}
	return st.Time(d), true
}

// Done implements context.Context: the parent's channel when the attempt has no deadline
// (nil, never done, without a parent either), else a channel closed at the deadline (a
// pending one once it starts) or when the parent ends.
func (c *deadlineCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deadline == 0 && !c.atEnd && !c.aborted && !c.abortable {
		if c.parent != nil {
			return c.parent.Done()
		}
		return nil
	}
	if c.done == nil {
		ch := make(chan struct{})
		c.done = ch
		c.held.Store(true)
		if c.aborted {
			c.fired = true
			close(ch)
			return ch
		}
		if c.deadline != 0 {
			d := time.Duration(c.deadline - c.stamps.Now())
			if d <= 0 {
				c.fired = true
				close(ch)
				return ch
			}
			c.armTimer(d)
		}
		if c.parent != nil && c.parentEnd == nil {
			c.parentEnd = c.fireParent
		}
		if w, ok := c.parent.(pool.EndWatcher); ok {
			c.watcher, c.watchID = w, w.WatchEnd(c.parentEnd)
		} else if c.parent != nil {
			c.unwatch = context.AfterFunc(c.parent, c.parentEnd)
		}
	}
	return c.done
}

// attemptTimer is a deadlineCtx's timer with the function it runs, which knows it by its
// pointer: a run for a timer that stopLocked dropped closes nothing.
type attemptTimer struct {
	c *deadlineCtx
	t *time.Timer
}

// armTimer (mu held) starts the timer that closes done in d, the kept one if there is one.
func (c *deadlineCtx) armTimer(d time.Duration) {
	if c.timer == nil {
		a := &attemptTimer{c: c}
		// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
		a.t = time.AfterFunc(d, a.fire)
		c.timer = a
	} else {
		c.timer.t.Reset(d)
	}
	c.timerArmed = true
}

// fire closes the attempt's channel at its deadline, if a is still the armed timer.
func (a *attemptTimer) fire() {
	c := a.c
	c.mu.Lock()
	if c.timer == a && c.timerArmed {
		c.closeDone()
	}
	c.mu.Unlock()
}

// fireParent closes the attempt's channel when its downstream request has ended; a late run
// for an earlier attempt, whose request had another parent or the same one since reused,
// finds the current parent not ended and closes nothing.
func (c *deadlineCtx) fireParent() {
	c.mu.Lock()
	if c.parent != nil && c.parent.Err() != nil {
		c.closeDone()
	}
	c.mu.Unlock()
}

// closeDone (mu held) closes done once.
func (c *deadlineCtx) closeDone() {
	if c.done != nil && !c.fired {
		c.fired = true
		close(c.done)
	}
}

// Err implements context.Context.
func (c *deadlineCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deadline != 0 && c.stamps.Now() >= c.deadline {
		return context.DeadlineExceeded
	}
	if c.aborted || (c.parent != nil && c.parent.Err() != nil) {
		return context.Canceled
	}
	return nil
}

// Value implements context.Context; the context carries no values.
func (c *deadlineCtx) Value(any) any { return nil }
