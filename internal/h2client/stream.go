package h2client

import (
	"context"
	"io"
	"sync"
	"sync/atomic"

	"golang.org/x/net/http2"
)

// Request is one request's head and body. The connection reads its strings only while
// Open runs (the head) and, for Body and Trailer, on the stream's body goroutine until the
// body has ended or Stream.Close returns.
type Request struct {
	Method, Scheme, Authority, Path string
	// Header holds the other fields; framing, host and connection-specific ones are left
	// out, te is sent only as "trailers".
	Header []Field
	// Body is the request body; nil means none. ContentLength is its length, -1 unknown.
	Body          io.Reader
	ContentLength int64
	// Trailer, when not nil, is read once Body has returned io.EOF: its fields that may be
	// trailers are sent in a trailing HEADERS frame. Its keys are announced in the head's
	// "trailer" field.
	Trailer map[string][]string
}

// Stream is one request's stream. Its response is read by one goroutine: AwaitHead, then
// Read until io.EOF, then RawTrailer; Close ends it.
//
// Streams are pooled: one goes back to the pool when its reader has closed it and its body
// sender has ended (refs), and its connection's read loop no longer uses it (Conn.cur).
type Stream struct {
	c    *Conn
	id   uint32
	ctx  context.Context
	head bool // a HEAD request: the response has no body, whatever its content-length
	wake chan struct{}
	// refs counts the reader (until Close) and the body sender; gen counts the stream's
	// uses, so that a CancelFunc of an earlier use does nothing. Both change under mu.
	refs     atomic.Int32
	gen      uint64
	deferred bool // released while the read loop used it; guarded by c.mu

	// The request body's sender (its own goroutine), when there is a body.
	body    io.Reader
	trailer map[string][]string
	bodyMu  sync.Mutex // held while the sender reads trailer; guards stopped
	stopped bool       // Close ran: the sender reads nothing more of the request

	// Guarded by c.mu: the send window, whether the request is sent whole.
	sendWin  int64
	sent     bool
	closedBy bool // left the stream table

	mu       sync.Mutex // guards the response state below
	headDone bool
	ended    bool // END_STREAM received
	err      error
	status   int
	cl       int64 // content-length, -1 when absent
	got      int64 // DATA bytes received
	hdr      []byte
	lens     [][2]int32
	traw     []byte
	tlens    [][2]int32
	data     []byte
	off      int
	recvWin  int64 // stream window left to the peer
	unacked  int64 // bytes read and not yet returned to the peer (reader only)
}

// Open starts a stream: it writes the request head (with END_STREAM when there is no body)
// and starts the body's sender. It uses a slot Reserve took. ctx ends the stream when done.
func (c *Conn) Open(ctx context.Context, r *Request) (*Stream, error) {
	s := newStream(c, ctx, r.Method == "HEAD")
	hasBody := r.Body != nil && r.ContentLength != 0
	c.startWrite()
	c.mu.Lock()
	c.reserved--
	if c.closed || c.goAway || c.nextID > maxStreamID {
		err := c.err
		if err == nil || c.goAway {
			err = ErrUnprocessed
		}
		c.closeIfDoneLocked()
		c.mu.Unlock()
		c.endWrite()
		s.release()
		return nil, err
	}
	s.id = c.nextID
	c.nextID += 2
	if c.nextID > maxStreamID {
		c.noteStateLocked()
	}
	s.sendWin = int64(c.peerWin)
	s.sent = !hasBody
	c.streams[s.id] = s
	c.mu.Unlock()
	c.hbuf = appendRequestHead(c.hbuf[:0], r)
	c.writeBlock(s.id, c.hbuf, !hasBody)
	if err := c.endWrite(); err != nil {
		// The connection failed under this write: the stream's own reason says what happened
		// to the request, which the write's "use of closed network connection" hides. A
		// GOAWAY that left it unprocessed (it may go again), or the read loop's verdict on
		// what the peer sent after reading it (a protocol error: ErrClosed), when the write
		// that failed was of frames queued behind the request's.
		s.mu.Lock()
		if s.err != nil {
			err = s.err
		}
		s.mu.Unlock()
		s.Close()
		return nil, err
	}
	if hasBody {
		s.body, s.trailer = r.Body, r.Trailer
		s.refs.Add(1)
		go s.sendBody()
	}
	return s, nil
}

// sendBuffers holds the body senders' read buffers, one DATA frame each.
var sendBuffers = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// streamPool holds released streams with their buffers.
var streamPool = sync.Pool{New: func() any { return &Stream{wake: make(chan struct{}, 1)} }}

// maxKeptBody is the largest body buffer a pooled stream keeps.
const maxKeptBody = 64 << 10

// newStream takes a stream from the pool and sets it up for a new use. Only a CancelFunc of
// an earlier use may touch it meanwhile, under mu, and finds gen changed.
func newStream(c *Conn, ctx context.Context, head bool) *Stream {
	s := streamPool.Get().(*Stream)
	select {
	case <-s.wake: // a stale signal from the last use
	default:
	}
	s.c, s.id, s.ctx, s.head, s.deferred = c, 0, ctx, head, false
	s.body, s.trailer, s.stopped = nil, nil, false
	s.sendWin, s.sent, s.closedBy = 0, false, false
	s.mu.Lock()
	s.headDone, s.ended, s.err, s.status, s.cl, s.got = false, false, nil, 0, -1, 0
	s.hdr, s.lens, s.traw, s.tlens = s.hdr[:0], s.lens[:0], s.traw[:0], s.tlens[:0]
	if cap(s.data) > maxKeptBody {
		s.data = nil
	}
	s.data, s.off = s.data[:0], 0
	s.recvWin, s.unacked = int64(c.cfg.StreamWindow), 0
	s.refs.Store(1)
	s.mu.Unlock()
	return s
}

// release drops one reference; the last returns the stream to the pool, or leaves that to
// the read loop while it uses the stream.
func (s *Stream) release() {
	s.mu.Lock()
	last := s.refs.Add(-1) == 0
	if last {
		s.gen++
	}
	s.mu.Unlock()
	if !last {
		return
	}
	c := s.c
	c.mu.Lock()
	if c.cur == s {
		s.deferred = true
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	streamPool.Put(s)
}

// CancelFunc returns a function that cancels this use of the stream (Cancel), from any
// goroutine; after Close it does nothing.
func (s *Stream) CancelFunc() func() {
	gen := s.gen
	return func() {
		s.mu.Lock()
		ok := s.gen == gen && s.refs.Load() > 0
		if ok {
			s.refs.Add(1)
		}
		s.mu.Unlock()
		if ok {
			s.Cancel()
			s.release()
		}
	}
}

// ID returns the stream's id.
func (s *Stream) ID() uint32 { return s.id }

// signal wakes the stream's reader.
func (s *Stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// wait waits for a signal or the end of ctx; it returns ctx's error after cancelling the
// stream.
func (s *Stream) wait() error {
	select {
	case <-s.wake:
		return nil
	case <-s.ctx.Done():
		err := s.ctx.Err()
		s.reset(http2.ErrCodeCancel, err)
		return err
	}
}

// AwaitHead waits for the final response head.
func (s *Stream) AwaitHead() error {
	for {
		s.mu.Lock()
		done, err := s.headDone, s.err
		s.mu.Unlock()
		switch {
		case done:
			return nil
		case err != nil:
			return err
		}
		if err := s.wait(); err != nil {
			return err
		}
	}
}

// Status returns the response status; valid after AwaitHead.
func (s *Stream) Status() int { return s.status }

// ContentLength returns the response's content-length, -1 when it has none.
func (s *Stream) ContentLength() int64 { return s.cl }

// RawHead returns the response head's fields (":status" left out): each field's name (lower
// case) and value laid out one after the other in raw, their lengths in lens. Valid after
// AwaitHead, until Close.
func (s *Stream) RawHead() (raw []byte, lens [][2]int32) { return s.hdr, s.lens }

// RawTrailer returns the trailer fields, laid out as RawHead's; valid once Read has returned
// io.EOF, until Close.
func (s *Stream) RawTrailer() (raw []byte, lens [][2]int32) { return s.traw, s.tlens }

// Read reads the response body.
func (s *Stream) Read(p []byte) (int, error) {
	for {
		s.mu.Lock()
		if s.off < len(s.data) {
			n := copy(p, s.data[s.off:])
			s.off += n
			if s.off == len(s.data) {
				s.data, s.off = s.data[:0], 0
			}
			ended := s.ended
			s.mu.Unlock()
			s.consumed(n, ended)
			return n, nil
		}
		err, ended := s.err, s.ended
		s.mu.Unlock()
		switch {
		case err != nil:
			return 0, err
		case ended:
			return 0, io.EOF
		case len(p) == 0:
			return 0, nil
		}
		if err := s.wait(); err != nil {
			return 0, err
		}
	}
}

// consumed returns n bytes read to the stream's and connection's windows. A stream whose
// response has ended needs no more window.
func (s *Stream) consumed(n int, ended bool) {
	s.c.consumed(n)
	if ended {
		return
	}
	s.unacked += int64(n)
	u := s.unacked
	s.mu.Lock()
	// Like x/net's client: window returns in steps of a quarter window, or sooner (at least
	// 4 KiB) once the peer has less left than is waiting to be returned, so that a fast
	// reader keeps the stream busy.
	if u < int64(s.c.cfg.StreamWindow/4) && (u < 4<<10 || u < s.recvWin) {
		s.mu.Unlock()
		return
	}
	s.recvWin += u
	s.mu.Unlock()
	s.unacked = 0
	s.c.writeWindowUpdate(s.id, uint32(u))
}

// Cancel resets the stream (CANCEL); its reader gets ErrCanceled. Safe from any goroutine.
func (s *Stream) Cancel() { s.reset(http2.ErrCodeCancel, ErrCanceled) }

// Close ends the stream: one whose response or request is not complete is reset. The
// request body is not read after Close returns.
func (s *Stream) Close() {
	defer s.release()
	s.bodyMu.Lock()
	s.stopped = true
	s.bodyMu.Unlock()
	s.mu.Lock()
	complete := s.ended && s.err == nil
	s.mu.Unlock()
	c := s.c
	c.mu.Lock()
	sent := s.sent
	c.mu.Unlock()
	if complete && sent {
		s.leave()
		return
	}
	s.reset(http2.ErrCodeCancel, ErrCanceled)
}

// reset sends RST_STREAM once, unless the stream already left the table, and fails the
// stream with err.
func (s *Stream) reset(code http2.ErrCode, err error) {
	if s.leave() {
		s.c.writeReset(s.id, code)
	}
	s.fail(err)
}

// leave takes the stream out of its connection's table; false when it was out already.
func (s *Stream) leave() bool {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.closedBy {
		return false
	}
	s.closedBy = true
	if c.streams[s.id] == s {
		delete(c.streams, s.id)
	}
	c.sendCond.Broadcast() // a sender waiting for window stops
	c.closeIfDoneLocked()
	return !c.closed
}

// fail ends the stream's response with err, unless it ended already, and takes it out of
// the stream table.
func (s *Stream) fail(err error) {
	c := s.c
	c.mu.Lock()
	s.failLocked(err)
	if c.streams[s.id] == s {
		delete(c.streams, s.id)
		c.closeIfDoneLocked()
	}
	c.sendCond.Broadcast()
	c.mu.Unlock()
	s.signal()
}

// failLocked sets the stream's error; c.mu is held. The caller wakes the reader.
func (s *Stream) failLocked(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.closedBy = true
}

// sendBody sends the request body, then its trailers or END_STREAM. A body that fails to
// read resets the stream, and the reader gets the body's error.
func (s *Stream) sendBody() {
	defer s.release()
	bp := sendBuffers.Get().(*[]byte)
	defer sendBuffers.Put(bp)
	buf := *bp
	for {
		if s.isStopped() {
			return
		}
		n, err := s.body.Read(buf)
		if n > 0 && !s.sendData(buf[:n], false) {
			return
		}
		switch {
		case err == io.EOF:
			s.sendEnd()
			return
		case err != nil:
			s.reset(http2.ErrCodeCancel, err)
			return
		}
	}
}

func (s *Stream) isStopped() bool {
	s.bodyMu.Lock()
	defer s.bodyMu.Unlock()
	return s.stopped
}

// sendData sends p as DATA frames as the send windows allow; false when the stream or
// connection ended first.
func (s *Stream) sendData(p []byte, end bool) bool {
	c := s.c
	for len(p) > 0 || end {
		c.mu.Lock()
		for !c.closed && !s.closedBy && len(p) > 0 && (s.sendWin <= 0 || c.sendWin <= 0) {
			c.sendCond.Wait()
		}
		if c.closed || s.closedBy {
			c.mu.Unlock()
			return false
		}
		// An empty p (the body's end) sends a zero-length frame, which flow control does not
		// hold back even when a SETTINGS frame left a window negative (RFC 9113 §6.9.2); with
		// bytes to send, the wait above leaves both windows positive.
		n := int64(0)
		if len(p) > 0 {
			n = min(int64(len(p)), s.sendWin, c.sendWin, int64(c.maxFrame.Load()))
		}
		s.sendWin -= n
		c.sendWin -= n
		last := end && n == int64(len(p))
		if last {
			s.sent = true
		}
		c.mu.Unlock()
		c.startWrite()
		c.noteWriteErr(c.fr.WriteData(s.id, last, p[:n]))
		if c.endWrite() != nil {
			return false
		}
		p = p[n:]
		if last {
			return true
		}
	}
	return true
}

// sendEnd ends the request: its trailers when it has some, else an empty END_STREAM DATA.
func (s *Stream) sendEnd() {
	s.bodyMu.Lock()
	if s.stopped {
		s.bodyMu.Unlock()
		return
	}
	var block []byte
	if s.trailer != nil {
		block = appendTrailers(nil, s.trailer)
	}
	s.bodyMu.Unlock()
	if len(block) == 0 {
		s.sendData(nil, true)
		return
	}
	c := s.c
	c.mu.Lock()
	if c.closed || s.closedBy {
		c.mu.Unlock()
		return
	}
	s.sent = true
	c.mu.Unlock()
	c.startWrite()
	c.writeBlock(s.id, block, true)
	c.endWrite()
}
