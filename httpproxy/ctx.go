package httpproxy

import (
	"context"
	"sync"
	"time"
)

// deadlineCtx is the context of one upstream attempt, reused by the stream from attempt to
// attempt so that a request with a timeout allocates nothing in the common case. Deadline
// and Err are plain reads (the pool sets socket deadlines from Deadline); the Done channel
// and its timer are made only when someone waits on Done (the pool waiting for a connection,
// or the HTTP/2 transport).
//
// Deadline, Err and Value are safe for concurrent use; reset and stop belong to the stream's
// goroutine and must not race with a waiter (the stream calls them between attempts).
type deadlineCtx struct {
	now      func() time.Time
	deadline time.Time // zero: none

	mu    sync.Mutex // guards done and timer
	done  chan struct{}
	timer *time.Timer
}

var _ context.Context = (*deadlineCtx)(nil)

// reset starts a new attempt with deadline d (zero: none).
func (c *deadlineCtx) reset(d time.Time) {
	c.stop()
	c.deadline = d
}

// stop releases the Done timer of the last attempt.
func (c *deadlineCtx) stop() {
	c.mu.Lock()
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	c.done = nil
	c.mu.Unlock()
}

// Deadline implements context.Context.
func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, !c.deadline.IsZero() }

// Done implements context.Context; nil (never done) when the attempt has no deadline.
func (c *deadlineCtx) Done() <-chan struct{} {
	if c.deadline.IsZero() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		ch := make(chan struct{})
		c.done = ch
		d := c.deadline.Sub(c.now())
		if d <= 0 {
			close(ch)
		} else {
			c.timer = time.AfterFunc(d, func() { close(ch) })
		}
	}
	return c.done
}

// Err implements context.Context.
func (c *deadlineCtx) Err() error {
	if !c.deadline.IsZero() && !c.now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// Value implements context.Context; the context carries no values.
func (c *deadlineCtx) Value(any) any { return nil }
