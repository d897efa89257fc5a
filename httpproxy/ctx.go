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
// Every method is safe for concurrent use: context.WithTimeout over a context it does not
// know starts a goroutine that may call Done after the attempt has ended, while the stream
// already resets the context for its next request, so all fields are read under mu.
type deadlineCtx struct {
	mu       sync.Mutex // guards every field below
	now      func() time.Time
	deadline time.Time // zero: none
	done     chan struct{}
	timer    *time.Timer
}

// setNow sets the clock (the handler's) for the next attempts.
func (c *deadlineCtx) setNow(now func() time.Time) {
	c.mu.Lock()
	c.now = now
	c.mu.Unlock()
}

var _ context.Context = (*deadlineCtx)(nil)

// reset starts a new attempt with deadline d (zero: none).
func (c *deadlineCtx) reset(d time.Time) {
	c.stop()
	c.mu.Lock()
	c.deadline = d
	c.mu.Unlock()
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
func (c *deadlineCtx) Deadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deadline, !c.deadline.IsZero()
}

// Done implements context.Context; nil (never done) when the attempt has no deadline.
func (c *deadlineCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deadline.IsZero() {
		return nil
	}
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
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.deadline.IsZero() && !c.now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// Value implements context.Context; the context carries no values.
func (c *deadlineCtx) Value(any) any { return nil }
