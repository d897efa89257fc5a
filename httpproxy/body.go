package httpproxy

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/http1"
	"github.com/legateproxy/legate/internal/sockio"
	"github.com/legateproxy/legate/pool"
	"github.com/legateproxy/legate/stats"
)

// bodyReader reads an HTTP/1 request body (Content-Length or chunked) from the connection's
// reader, with the framing of http1.Body. It belongs to the stream's goroutine.
type bodyReader struct {
	rd   *reader
	body http1.Body
	done bool
	err  error
	read int64 // body bytes read, for %BYTES_RECEIVED%
	// trailer, when set, receives each line of the chunked trailer section (without its CRLF;
	// valid only during the call): the stream forwards them to HTTP/2 upstreams and filters.
	trailer func(line []byte)
}

func (b *bodyReader) reset(rd *reader, f http1.Framing) {
	*b = bodyReader{rd: rd}
	b.body.Reset(f)
	b.done = b.body.Done()
}

// Read implements io.Reader.
func (b *bodyReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	rd := b.rd
	left, err := b.body.Ready(rd, b.trailer)
	if err != nil {
		if err == io.EOF {
			b.done = true
		} else {
			b.err = err
		}
		return 0, err
	}
	want := min(int64(len(p)), left)
	var n int
	if rd.buffered() == 0 && (int64(len(p)) >= left || len(p) >= len(rd.buf)) {
		// Large reads bypass the buffer.
		n, err = rd.conn.Read(p[:want])
		rd.st.DownstreamCxRxBytesTotal.Add(uint64(n)) // maybe off the connection's goroutine: not on rd.line
	} else {
		if rd.buffered() == 0 {
			err = rd.fill()
		}
		n = copy(p[:want], rd.buf[rd.r:rd.w])
		rd.r += n
	}
	b.body.Consumed(n)
	b.done = b.body.Done()
	b.read += int64(n)
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		b.err = err
	}
	return n, b.err
}

// drain reads and discards what is left of the body, up to limit bytes; it reports whether
// the body was read to its end (so the connection can carry another request).
func (b *bodyReader) drain(limit int64) bool {
	var scratch [512]byte
	for !b.done && b.err == nil && b.read <= limit {
		if _, err := b.Read(scratch[:]); err != nil && err != io.EOF {
			return false
		}
	}
	return b.done && b.err == nil
}

// h1writer writes one HTTP/1 response into a buffer and the connection. It belongs to the
// stream's goroutine.
type h1writer struct {
	conn net.Conn
	// raw is conn's socket when it is plain TCP: it is written with send(2) (sockio) inside
	// a raw write, whose callback is send, the stream's sendSocket bound once.
	raw syscall.RawConn
	// fd points at the connection's descriptor while its raw read runs on this goroutine
	// (serverConn.fd, -1 otherwise): writeSocket sends there first, without the raw write.
	fd      *int
	send    func(fd uintptr) bool
	pending []byte // what sendSocket has still to write
	sendN   int    // what it wrote
	sendErr error
	// waited: a write went where it may wait for the client (a raw write, conn.Write), not
	// only to a send the socket took at once (respond's end reading).
	waited bool
	// stamped: the stream idle timer's last stamp is the reading the response head's arrival
	// took, and nothing could have waited since but the writer (forward; copyFrom clears it).
	stamped bool
	// idle is the stream's idle timer (nil for a reply without a stream): a write marks it
	// (writing) so that the timer can end one the client does not take, and a write that
	// progresses slowly counts as activity.
	idle    *streamIdle
	buf     []byte
	chunked bool                     // the body is sent chunked
	noBody  bool                     // HEAD, 1xx, 204, 304: the body is not sent
	tx      *stats.HotBlock[hcmLine] // downstream_cx_tx_bytes_total's lines (hcmStats.rq)
	line    stats.Line               // tx is added on it: the stream's (NoLine, P 0's, for a reply without one)
	err     error
	sent    int64  // body bytes accepted, for %BYTES_SENT%
	trailer []byte // the chunked trailer section's field lines, each ending in CRLF
}

// begin starts w for a response on conn, as h1writer{conn: conn, raw: raw, ...} would with
// every other field zero, by the fields: the literal zeroed a copy of the whole struct and
// copied it in (about 95 instructions a request, 40 this way). TestH1WriterBegin holds it to
// the literal.
func (w *h1writer) begin(conn net.Conn, raw syscall.RawConn, fd *int, send func(fd uintptr) bool, idle *streamIdle, buf []byte, tx *stats.HotBlock[hcmLine], line stats.Line) {
	w.conn, w.raw, w.fd, w.send, w.idle, w.buf, w.tx, w.line = conn, raw, fd, send, idle, buf, tx, line
	w.pending, w.sendN, w.sendErr, w.waited, w.stamped = nil, 0, nil, false, false
	w.chunked, w.noBody, w.err, w.sent, w.trailer = false, false, nil, 0, nil
}

// flushAt is how much a writer buffers before writing to the socket.
const flushAt = 16 << 10

func (w *h1writer) flush() error {
	if w.err != nil || len(w.buf) == 0 {
		return w.err
	}
	var n int
	var err error
	if w.idle != nil {
		w.idle.writing.Store(true)
	}
	if w.raw != nil {
		n, err = w.writeSocket(w.buf)
	} else {
		w.waited = true
		n, err = w.conn.Write(w.buf)
	}
	if w.idle != nil {
		w.idle.writing.Store(false)
	}
	w.tx.On(w.line).tx.Add(uint64(n))
	w.buf = w.buf[:0]
	w.err = err
	return err
}

// writeSocket writes p to the socket as conn.Write would: waiting while the socket is full,
// within conn's write deadline, and reporting a failed call as a *net.OpError.
//
// Inside the connection's raw read (w.fd is set) it first sends on the descriptor that read
// holds open, and enters a raw write (its lock, the readiness reset: about 200 instructions)
// only for what the socket did not take, which waits there, within the write deadline. A send
// the socket takes at once needs no deadline; a client that stops reading fills the socket and
// so meets the deadline in the raw write (streamIdle's cut).
func (w *h1writer) writeSocket(p []byte) (int, error) {
	w.pending, w.sendN, w.sendErr = p, 0, nil
	var err error
	if w.fd == nil || *w.fd < 0 || !w.send(uintptr(*w.fd)) {
		w.waited = true
		err = w.raw.Write(w.send)
	}
	w.pending = nil
	if w.sendErr != nil {
		err = w.sendErr
	}
	if errno, ok := err.(syscall.Errno); ok {
		err = &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", errno)}
	}
	return w.sendN, err
}

// sendSocket is writeSocket's raw write callback: it sends what is pending until the socket
// is full (false: wait until it is writable) or all is written or a send failed (true).
func (w *h1writer) sendSocket(fd uintptr) bool {
	for w.sendN < len(w.pending) {
		n, err := sockio.Send(int(fd), w.pending[w.sendN:])
		switch {
		case err == syscall.EAGAIN:
			return false
		case err != nil:
			w.sendErr = err
			return true
		}
		w.sendN += n
		if w.sendN < len(w.pending) && w.idle != nil {
			w.idle.touch() // the client takes the response, slowly
		}
	}
	return true
}

// Write appends body bytes, framing them as a chunk when the body is chunked.
func (w *h1writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	w.sent += int64(len(p))
	if w.noBody || len(p) == 0 {
		return len(p), nil
	}
	if w.chunked {
		w.buf = http1.AppendChunkSize(w.buf, len(p))
	}
	w.buf = append(w.buf, p...)
	if w.chunked {
		w.buf = append(w.buf, http1.CRLF...)
	}
	if len(w.buf) >= flushAt {
		if err := w.flush(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// copyFrom moves a body from r into the response: straight into the buffer's spare room
// when the body is not chunked, so a small response goes out in one write with its head.
// What is buffered is written whenever src says the next read may wait for the upstream, so
// that a streamed response (server-sent events, long polling, a trickled download) reaches
// the client as it arrives, as Envoy forwards each read; a body that is already buffered
// still goes out whole. Writes block while the client is slow, and so does the next read:
// the upstream is held back by TCP, and the buffer stays under flushAt plus one read.
//
// A first read of bytes that came with the head, when the writer has not waited since the head's
// arrival was stamped (stamped), is activity at that stamp: the stream idle timer is not
// stamped again for it (streamIdle.stands: the reading cost about 75 instructions).
//
// src tells whether the next read of the body returns without waiting for the upstream
// (BodyReady). When r reads src's body as it is (direct: no rewriter between them), the copy
// ends with the read that took the body's last byte, as src says (BodyEnded), rather than
// with one more read that finds io.EOF (about 150 instructions a response).
//
// upErr is not nil when r is src's body itself, read without an observedBody (nothing
// watches the body and it is not chunked here): the copy then does what observedBody would,
// touching the stream idle timer for each read that got bytes and keeping the first read
// error other than io.EOF in *upErr (the wrapper's calls were about 60 instructions).
func (w *h1writer) copyFrom(r io.Reader, src *pool.Response, direct bool, upErr *error) (int64, error) {
	ready := src.BodyReady()
	if !ready {
		if err := w.flush(); err != nil { // the head, before the wait for the first bytes
			return 0, err
		}
	}
	if w.chunked || w.noBody {
		w.stamped = false
		return w.copyChunks(r, src)
	}
	if ready && w.stamped && !w.waited {
		w.idle.stands = true // for the first read (touchRead clears it); stamped implies idle
	}
	w.stamped = false
	var total int64
	for {
		if cap(w.buf)-len(w.buf) < 1024 {
			if len(w.buf) >= flushAt || cap(w.buf) >= flushAt {
				if err := w.flush(); err != nil {
					return total, err
				}
			} else {
				w.buf = append(w.buf[:cap(w.buf)], make([]byte, cap(w.buf))...)[:len(w.buf)]
			}
		}
		n, err := r.Read(w.buf[len(w.buf):cap(w.buf)])
		w.buf = w.buf[:len(w.buf)+n]
		total += int64(n)
		w.sent += int64(n)
		if upErr != nil {
			if n > 0 {
				w.idle.touchRead() // the bytes are on their way to the client
			}
			if err != nil && err != io.EOF && *upErr == nil {
				*upErr = err
			}
		}
		if direct && n > 0 && err == nil && src.BodyEnded() {
			return total, nil
		}
		if done, err := w.afterRead(n, err, src); done {
			return total, err
		}
	}
}

// copyChunks is copyFrom for a chunked body, or one that is not sent (HEAD, 204, 304).
func (w *h1writer) copyChunks(r io.Reader, src *pool.Response) (int64, error) {
	var scratch [4096]byte
	var total int64
	for {
		n, err := r.Read(scratch[:])
		if n > 0 {
			if _, werr := w.Write(scratch[:n]); werr != nil {
				return total, werr
			}
			total += int64(n)
		}
		if done, err := w.afterRead(n, err, src); done {
			return total, err
		}
	}
}

// afterRead ends a copy at the body's end (nil) or a read or write error; otherwise it
// writes what is buffered when the read got bytes and the next one may wait for the upstream.
func (w *h1writer) afterRead(n int, err error, src *pool.Response) (done bool, _ error) {
	switch {
	case err == io.EOF:
		return true, nil
	case err != nil:
		return true, err
	case n == 0 || len(w.buf) == 0 || src.BodyReady():
		return false, nil
	}
	return w.flush() != nil, w.err
}

// finish ends the body (the last chunk) and writes everything buffered.
func (w *h1writer) finish() error {
	if w.chunked && !w.noBody && w.err == nil {
		w.buf = http1.AppendLastChunk(w.buf, w.trailer)
	}
	return w.flush()
}

// Pause implements filter.Downstream: it holds the request until ready is closed or bound
// passes, and reports whether the client went away meanwhile (then the stream ends without
// being routed). An HTTP/1 request's body — and whatever the client sends after it — is read
// into the connection's buffer while it waits, up to the buffer limit: that is the body
// Envoy's on_demand filter buffers (StopIterationAndWatermark), and the bodyReader forwards
// it from there once the request goes on. When the buffer is full reading stops, and TCP
// flow control holds the client back as Envoy's read-disable does. The read also sees a
// client that closes or resets its connection. An HTTP/2 request's body waits in http2's
// stream buffer (the stream's flow-control window); its context ends when the client resets
// the stream or the connection goes.
func (s *stream) Pause(ready <-chan struct{}, bound time.Duration) (gone bool) {
	var timeout <-chan time.Time
	if bound > 0 {
		// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
		t := time.NewTimer(bound)
		defer t.Stop()
		timeout = t.C
	}
	var cut <-chan struct{}
	var read chan error
	var rc net.Conn // what the HTTP/1 client is read on
	switch {
	case s.h2req != nil:
		cut = s.h2req.Context().Done()
	case s.sc != nil:
		rc = s.sc.pauseConn()
		if rc != nil {
			read = make(chan error, 1)
			go s.sc.readPaused(rc, int(s.bufferLimit()), read)
		}
	}
	for {
		select {
		case <-ready:
		case <-timeout:
		case <-cut:
			gone = true
		case err := <-read:
			read = nil // the reader has ended
			if !clientGone(err) {
				continue // the buffer is full, or the body's deadline passed: wait on
			}
			gone = true
		}
		break
	}
	if read != nil {
		// Wake the reader and wait for it, so that the connection's reader is this
		// goroutine's again; the socket's deadline is then put back.
		rc.SetReadDeadline(time.Unix(1, 0))
		<-read
		rc.SetReadDeadline(s.sc.deadline)
	}
	if rc != nil && rc != s.sc.nc {
		rc.Close()
	}
	if gone {
		s.downstreamGone()
	}
	return gone
}

// Route implements filter.Downstream: the request's route in the current tables.
func (s *stream) Route() *route.Match { return s.h.route(&s.req) }

// clientGone reports whether a read error means the client closed or reset its connection
// (rather than a deadline, or nil for a full buffer).
func clientGone(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	return !errors.As(err, &ne) || !ne.Timeout()
}

// downstreamGone marks a stream whose client went away before it was routed: it is not
// answered, its connection closes, and the access log shows DC, as Envoy's stream reset.
func (s *stream) downstreamGone() {
	s.gone = true
	s.closeConn = true
	s.flags |= accesslog.DownstreamConnectionTermination
	s.details = "downstream_remote_disconnect"
	if s.sc != nil {
		// Envoy counts an HTTP/1 connection closed under an active request; HTTP/2 streams
		// are counted by their connection (streamCut).
		st := s.h.stats
		st.DownstreamCxDestroyRemoteActiveRq.Inc()
		st.DownstreamCxDestroyActiveRq.Inc()
	}
}

// readPaused fills the connection's read buffer while its request is paused, until the
// buffer holds limit bytes (then it reports nil) or a read fails (it reports the error). It
// runs on its own goroutine, owned by Pause, which waits for its report before touching the
// reader again. The buffer may grow past the head limit, up to limit; shrink returns it to
// its idle size once it has been read.
func (sc *serverConn) readPaused(c net.Conn, limit int, out chan<- error) {
	rd := &sc.rd
	for rd.buffered() < limit {
		if rd.r == rd.w {
			rd.r, rd.w = 0, 0
		}
		if rd.w == len(rd.buf) {
			if rd.r > 0 {
				rd.w = copy(rd.buf, rd.buf[rd.r:rd.w])
				rd.r = 0
			} else {
				nb := make([]byte, min(2*len(rd.buf), max(limit, len(rd.buf))))
				rd.w = copy(nb, rd.buf[rd.r:rd.w])
				rd.buf = nb
			}
		}
		n, err := c.Read(rd.buf[rd.w:])
		rd.w += n
		rd.st.DownstreamCxRxBytesTotal.Add(uint64(n)) // maybe off the connection's goroutine: not on rd.line
		if err != nil {
			out <- err
			return
		}
	}
	out <- nil
}

// pauseConn returns the connection a paused request's client is read on: nc, or, while the
// request is served inside the raw read (serverConn.waitRaw), whose read lock this goroutine
// holds, a duplicate of the socket with its own poller registration, which the caller
// closes. Bytes read there are the raw read's too: it finds them buffered, and their
// arrival raised the readiness it waits for. nil when the socket cannot be duplicated: the
// client is then not read during the pause.
func (sc *serverConn) pauseConn() net.Conn {
	if !sc.inside {
		return sc.nc
	}
	fd, err := -1, error(nil)
	if cerr := sc.rd.raw.Control(func(s uintptr) { fd, err = dupCloexec(int(s)) }); cerr != nil || err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), "")
	defer f.Close() // FileConn made its own duplicate
	c, err := net.FileConn(f)
	if err != nil {
		return nil
	}
	return c
}

// dupCloexec duplicates fd, closed on exec.
func dupCloexec(fd int) (int, error) {
	nfd, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 0)
	if errno != 0 {
		return -1, errno
	}
	return int(nfd), nil
}

// bufferLimit is how much of a request body the stream buffers: the listener's
// per_connection_buffer_limit_bytes, 1 MiB (its default) without one.
func (s *stream) bufferLimit() int64 {
	if s.sc != nil {
		if l := s.sc.lc.BufferLimit(); l > 0 {
			return int64(l)
		}
	}
	return defaultRetryBufLimit
}
