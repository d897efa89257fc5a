package h2wire

import (
	"io"
	"sync"
)

// Writer is the write side both HTTP/2 ends share: frames are appended to Buf under the
// owner's lock, which is never held across a system call. Whoever finds no write in progress
// writes Buf out with the lock released (Flush) and goes on while others appended more; the
// others return at once, so frames appended together, by several streams, share one write.
type Writer struct {
	Buf []byte // frames not yet written; appended to under the owner's lock
	// Err is the first write error, or one the owner set to stop writing: Flush then writes
	// nothing more.
	Err error
	// Wake, when set, is broadcast after each write and when a flush ends (writers that wait
	// for the pending bytes to drain).
	Wake *sync.Cond

	spare    []byte // the buffer being written, or the next Buf
	flushing bool
}

// Flushing reports whether a flush is writing; the lock is held.
func (w *Writer) Flushing() bool { return w.flushing }

// Flush writes Buf, and what is appended while it writes, to dst until nothing is left or a
// write fails. mu is the owner's lock, held on entry and on return and released during each
// write. It reports false, at once, when another flush is writing: that one takes the frames;
// err is the error of a write it made.
func (w *Writer) Flush(mu *sync.Mutex, dst io.Writer) (flushed bool, err error) {
	if w.flushing {
		return false, nil
	}
	w.flushing = true
	for len(w.Buf) > 0 && w.Err == nil {
		buf := w.Buf
		w.Buf = w.spare[:0]
		mu.Unlock()
		_, err = dst.Write(buf)
		mu.Lock()
		w.spare = buf[:0]
		if err != nil && w.Err == nil {
			w.Err = err
		}
		w.wake()
	}
	w.flushing = false
	w.wake()
	return true, err
}

func (w *Writer) wake() {
	if w.Wake != nil {
		w.Wake.Broadcast()
	}
}
