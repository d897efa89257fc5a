package httpproxy

import (
	"io"
	"runtime"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestGoAwayWaitsForFlushInProgress closes an idle HTTP/2 connection (a drain's GOAWAY)
// while another goroutine is in the middle of a write the client has not read yet: the
// GOAWAY must follow that write out before the write side is shut. A shut made at once cut
// the write off and lost the GOAWAY (the client read EOF: a CI flake of
// TestDrainReachesConnectionsWithOwnServer).
func TestGoAwayWaitsForFlushInProgress(t *testing.T) {
	srv, client := tcpPair(t)
	c := &h2conn{nc: srv, shutWrite: shutWriter(srv, srv)}
	done := blockedFlush(c, blockedFrames)

	c.mu.Lock()
	c.goingAway = true
	c.w.Buf = appendGoAway(c.w.Buf, 1, http2.ErrCodeNo)
	c.mu.Unlock()
	c.closeIdle()

	fr := http2.NewFramer(nil, client)
	var data int
	const frames = blockedFrames
	for {
		f, err := fr.ReadFrame()
		if err == io.EOF {
			t.Fatalf("EOF after %d of %d DATA frames and no GOAWAY", data, frames)
		}
		if err != nil {
			t.Fatalf("ReadFrame after %d DATA frames: %v", data, err)
		}
		if _, ok := f.(*http2.DataFrame); ok {
			data++
			continue
		}
		g, ok := f.(*http2.GoAwayFrame)
		if !ok {
			t.Fatalf("frame %v; want DATA or GOAWAY", f.Header())
		}
		if data != frames || g.ErrCode != http2.ErrCodeNo {
			t.Fatalf("GOAWAY %v after %d DATA frames; want NO_ERROR after %d", g.ErrCode, data, frames)
		}
		break
	}
	if _, err := fr.ReadFrame(); err != io.EOF {
		t.Fatalf("after the GOAWAY: %v; want EOF (the write side shut)", err)
	}
	<-done
}

// TestCalmShutsUnderBlockedFlush trips the premature reset guard's close (calm) while a flush
// is blocked on a client that does not read: the write side is shut at once, which ends the
// blocked write, instead of waiting for the client to read (an attacker that stops reading
// would keep the connection open: e2e TestHostileClientsKeepServing saw it open after 2 s).
func TestCalmShutsUnderBlockedFlush(t *testing.T) {
	srv, _ := tcpPair(t) // the client end is never read
	c := &h2conn{nc: srv, shutWrite: shutWriter(srv, srv)}
	done := blockedFlush(c, blockedFrames)
	c.calm(http2.ErrCodeEnhanceYourCalm)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked flush still writes 10 s after calm; want its write ended by the shut write side")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.w.Err == nil {
		t.Error("no write error after calm; want later frames dropped")
	}
}

// blockedFrames is more DATA than a loopback socket's buffers hold.
const blockedFrames = 512

// blockedFlush queues n DATA frames of 16 KiB on c and flushes them on another goroutine,
// returning once that flush is in its write (it blocks until the client reads); done closes
// when the flush returns.
func blockedFlush(c *h2conn, n int) (done chan struct{}) {
	payload := make([]byte, 16384)
	for range n {
		c.w.Buf = appendFrame(c.w.Buf, http2.FrameData, 0, 1, payload)
	}
	done = make(chan struct{})
	go func() {
		defer close(done)
		c.mu.Lock()
		c.flushLocked()
		c.mu.Unlock()
	}()
	for { // the writer is in its write once it flags the flush and lets the lock go
		c.mu.Lock()
		busy := c.w.Flushing()
		c.mu.Unlock()
		if busy {
			return done
		}
		runtime.Gosched()
	}
}

// TestGoAwayShutsAfterLingerUnderBlockedFlush: a graceful close (a drain's GOAWAY on an idle
// connection) waits for the flush in progress, but not for ever: a client that never reads
// has the write side shut after h2GoAwayLinger, which ends the blocked write.
func TestGoAwayShutsAfterLingerUnderBlockedFlush(t *testing.T) {
	srv, _ := tcpPair(t) // the client end is never read
	c := &h2conn{nc: srv, shutWrite: shutWriter(srv, srv)}
	done := blockedFlush(c, blockedFrames)
	c.mu.Lock()
	c.goingAway = true
	c.w.Buf = appendGoAway(c.w.Buf, 1, http2.ErrCodeNo)
	c.mu.Unlock()
	start := time.Now()
	c.closeIdle()
	select {
	case <-done:
	case <-time.After(h2GoAwayLinger + 10*time.Second):
		t.Fatalf("the blocked flush still writes %v after the GOAWAY; want its write ended after %v", time.Since(start), h2GoAwayLinger)
	}
	if d := time.Since(start); d < h2GoAwayLinger {
		t.Errorf("the write side was shut %v after the GOAWAY; want the flush given %v first", d, h2GoAwayLinger)
	}
}
