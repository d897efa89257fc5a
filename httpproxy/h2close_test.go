package httpproxy

import (
	"io"
	"runtime"
	"testing"

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

	// More DATA than the socket buffers hold: the writer blocks until the client reads.
	const frames = 512
	payload := make([]byte, 16384)
	var big []byte
	for range frames {
		big = appendFrame(big, http2.FrameData, 0, 1, payload)
	}
	c.w.Buf = big
	done := make(chan struct{})
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
			break
		}
		runtime.Gosched()
	}

	c.mu.Lock()
	c.goingAway = true
	c.w.Buf = appendGoAway(c.w.Buf, 1, http2.ErrCodeNo)
	c.mu.Unlock()
	c.closeIdle()

	fr := http2.NewFramer(nil, client)
	var data int
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
