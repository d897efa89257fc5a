package httpproxy

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// awaitClosed fails t unless ch closes within wait.
func awaitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(wait):
		t.Fatalf("%s did not happen", what)
	}
}

// TestH2ctxWatches checks the HTTP/2 request context's watches: a watch runs when the
// context ends, one stopped before does not, stopping reports false once the context ended,
// and a watch set on an ended context runs at once.
func TestH2ctxWatches(t *testing.T) {
	x := new(h2ctx)
	if x.Err() != nil {
		t.Fatalf("Err = %v before the end; want nil", x.Err())
	}
	ran := make(chan struct{})
	var stoppedRan atomic.Bool
	x.WatchEnd(func() { close(ran) })
	stopped := x.WatchEnd(func() { stoppedRan.Store(true) })
	kept := x.WatchEnd(func() {})
	if !x.UnwatchEnd(stopped) {
		t.Fatal("UnwatchEnd before the end = false; want true")
	}
	done := x.Done()
	x.cancel()
	awaitClosed(t, ran, "the watch's function")
	awaitClosed(t, done, "Done's close")
	if stoppedRan.Load() {
		t.Error("a stopped watch ran")
	}
	if x.UnwatchEnd(kept) {
		t.Error("UnwatchEnd after the end = true; want false (its function runs)")
	}
	if x.Err() != context.Canceled {
		t.Errorf("Err = %v; want context.Canceled", x.Err())
	}
	late := make(chan struct{})
	if id := x.WatchEnd(func() { close(late) }); id != 0 {
		t.Errorf("WatchEnd on an ended context = id %d; want 0", id)
	}
	awaitClosed(t, late, "the late watch's function")
	awaitClosed(t, x.Done(), "Done's close after the end")
	x.cancel() // a second end changes nothing
}

// TestH2ctxRenew checks that a renewed context (its stream reused) starts anew, and that ids
// of the stream before do not stop the watches of the new one.
func TestH2ctxRenew(t *testing.T) {
	x := new(h2ctx)
	old := x.WatchEnd(func() {})
	oldDone := x.Done()
	x.cancel()
	x.renew()
	if x.Err() != nil {
		t.Fatalf("Err after renew = %v; want nil", x.Err())
	}
	if x.Done() == oldDone {
		t.Fatal("Done after renew is the ended stream's channel")
	}
	ran := make(chan struct{})
	id := x.WatchEnd(func() { close(ran) })
	if id == old {
		t.Fatalf("renewed context gave id %d again", id)
	}
	if x.UnwatchEnd(old) {
		t.Error("UnwatchEnd with the stream before's id = true; want false")
	}
	x.cancel()
	awaitClosed(t, ran, "the new stream's watch")
}

// TestH2ctxStandardDerivation checks that context.AfterFunc and context.WithCancel work over
// the HTTP/2 request context (through its AfterFunc method).
func TestH2ctxStandardDerivation(t *testing.T) {
	x := new(h2ctx)
	child, cancelChild := context.WithCancel(x)
	defer cancelChild()
	ran := make(chan struct{})
	context.AfterFunc(x, func() { close(ran) })
	var stoppedRan atomic.Bool
	stop := context.AfterFunc(x, func() { stoppedRan.Store(true) })
	if !stop() {
		t.Fatal("stop before the end = false; want true")
	}
	gone, cancelGone := context.WithCancel(x)
	cancelGone() // a child ended first leaves no watch behind
	x.mu.Lock()
	watches := len(x.watch)
	x.mu.Unlock()
	if watches != 2 {
		t.Errorf("%d watches left; want 2 (the child's and the AfterFunc's)", watches)
	}
	x.cancel()
	awaitClosed(t, ran, "context.AfterFunc's function")
	awaitClosed(t, child.Done(), "the child's end")
	if child.Err() != context.Canceled || gone.Err() != context.Canceled {
		t.Errorf("children's Err = %v, %v; want context.Canceled", child.Err(), gone.Err())
	}
	if stoppedRan.Load() {
		t.Error("a stopped context.AfterFunc ran")
	}
}
