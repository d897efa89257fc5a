package httpproxy

import (
	"context"
	"testing"
	"time"

	"github.com/legateproxy/legate/internal/clock"
)

// TestDeadlineCtxDoneAllocs: an attempt with a deadline and an HTTP/2 downstream request
// (every request to an HTTP/2 upstream) makes only its Done channel once the stream's context
// has had an attempt: the timer and the parent's watch are kept (they were a timer and a
// closure each attempt).
func TestDeadlineCtxDoneAllocs(t *testing.T) {
	c := &deadlineCtx{stamps: clock.NewStamps(time.Now), parent: new(h2ctx)}
	attempt := func() {
		c.reset(clock.Mono() + int64(time.Minute))
		if c.Done() == nil {
			t.Fatal("Done = nil with a deadline")
		}
		c.stop()
	}
	attempt()
	if n := testing.AllocsPerRun(100, attempt); n != 1 {
		t.Errorf("an attempt waited on allocates %v times; want 1 (its channel)", n)
	}
}

// TestDeadlineCtxKeptTimer: the timer kept from attempt to attempt closes each attempt's Done
// at that attempt's deadline only: one stopped before its deadline does not close the next
// attempt's, one that fired is replaced, and the parent's end closes Done only while the
// parent it watches is the current one and ended.
func TestDeadlineCtxKeptTimer(t *testing.T) {
	x := new(h2ctx)
	c := &deadlineCtx{stamps: clock.NewStamps(time.Now), parent: x}
	open := func(what string) {
		t.Helper()
		select {
		case <-c.Done():
			t.Fatalf("%s: Done closed; want open", what)
		default:
		}
		if err := c.Err(); err != nil {
			t.Fatalf("%s: Err = %v; want nil", what, err)
		}
	}

	c.reset(clock.Mono() + int64(time.Minute))
	c.Done()
	c.stop() // stopped long before its deadline: kept
	kept := c.timer
	c.reset(clock.Mono() + int64(time.Millisecond))
	awaitClosed(t, c.Done(), "the second attempt's deadline (kept timer)")
	if c.timer != kept {
		t.Error("the second attempt made a timer; want the one kept")
	}
	if c.Err() != context.DeadlineExceeded {
		t.Errorf("Err = %v after the deadline; want context.DeadlineExceeded", c.Err())
	}
	c.stop() // fired: replaced at the next deadline
	c.reset(clock.Mono() + int64(time.Minute))
	open("the attempt after a fired timer")
	if c.timer == kept {
		t.Error("the attempt after a fired timer kept it; want a new one")
	}
	c.stop()

	// The parent's end closes the attempt's Done; after the stream's context is reused
	// (renewed), a late run of that watch closes nothing.
	c.reset(0)
	c.abortable = true // as watch does: Done is a channel of its own without a deadline
	done := c.Done()
	x.cancel()
	awaitClosed(t, done, "Done at the parent's end")
	c.stop()
	x.renew()
	c.reset(clock.Mono() + int64(time.Minute))
	c.Done()
	c.fireParent() // the end's watch, running late
	open("the attempt after the parent was renewed")
	c.stop()
}

// TestDeadlineCtxStopReleasesHeld: stop skips the lock only for an attempt that held nothing
// (held); what watch, abort and Done leave is still released there, so the next attempt starts
// clean: not aborted, its Done not closed, no watch of the last one's context left to cancel.
func TestDeadlineCtxStopReleasesHeld(t *testing.T) {
	for _, tc := range []struct {
		name string
		hold func(c *deadlineCtx)
	}{
		{"nothing", func(*deadlineCtx) {}},
		{"abort", func(c *deadlineCtx) { c.abort() }},
		{"watch", func(c *deadlineCtx) { c.watch(nil) }},
		{"Done", func(c *deadlineCtx) { c.Done() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &deadlineCtx{stamps: clock.NewStamps(time.Now)}
			c.reset(clock.Mono() + int64(time.Minute))
			tc.hold(c)
			c.stop()
			if c.held.Load() || c.aborted || c.done != nil || c.onAbort != nil || c.timerArmed {
				t.Errorf("after stop: held %v, aborted %v, done %v, onAbort set %v, timer armed %v; want all released", c.held.Load(), c.aborted, c.done != nil, c.onAbort != nil, c.timerArmed)
			}
			c.reset(clock.Mono() + int64(time.Minute))
			if err := c.Err(); err != nil {
				t.Errorf("next attempt's Err = %v; want nil", err)
			}
		})
	}
}
