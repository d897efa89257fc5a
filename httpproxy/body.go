package httpproxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/stats"
)

var errBadChunk = errors.New("malformed chunked request body")

// maxChunkLine bounds a chunk-size line with its extensions and each trailer line.
const maxChunkLine = 4096

// bodyReader reads an HTTP/1 request body (Content-Length or chunked) from the connection's
// reader. It belongs to the stream's goroutine.
type bodyReader struct {
	rd      *reader
	left    int64 // bytes left in the body (Content-Length) or in the current chunk
	chunked bool
	done    bool
	err     error
	read    int64 // body bytes read, for %BYTES_RECEIVED%
	// trailer, when set, receives each line of the chunked trailer section (without its CRLF;
	// valid only during the call): the stream forwards them to HTTP/2 upstreams and filters.
	trailer func(line []byte)
}

func (b *bodyReader) reset(rd *reader, head *requestHead) {
	*b = bodyReader{rd: rd, chunked: head.chunked}
	switch {
	case head.chunked:
	case head.contentLength > 0:
		b.left = head.contentLength
	default:
		b.done = true
	}
}

// Read implements io.Reader.
func (b *bodyReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.done {
		return 0, io.EOF
	}
	if b.chunked && b.left == 0 {
		if err := b.nextChunk(); err != nil {
			b.err = err
			return 0, err
		}
		if b.done {
			return 0, io.EOF
		}
	}
	rd := b.rd
	if rd.buffered() == 0 {
		if int64(len(p)) >= b.left || len(p) >= len(rd.buf) {
			// Large reads bypass the buffer.
			n, err := rd.conn.Read(p[:min(int64(len(p)), b.left)])
			rd.rx.Add(uint64(n))
			return b.consumed(n, err)
		}
		if err := rd.fill(); err != nil {
			return b.consumed(0, err)
		}
	}
	n := copy(p[:min(int64(len(p)), b.left)], rd.buf[rd.r:rd.w])
	rd.r += n
	return b.consumed(n, nil)
}

func (b *bodyReader) consumed(n int, err error) (int, error) {
	b.left -= int64(n)
	b.read += int64(n)
	if b.left == 0 && !b.chunked {
		b.done = true
	}
	if b.chunked && b.left == 0 && n > 0 {
		if e := b.expectCRLF(); e != nil {
			b.err = e
			return n, nil
		}
	}
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		b.err = err
	}
	return n, b.err
}

// line returns the next CRLF-terminated line (without the CRLF); it stays valid until the
// next fill.
func (b *bodyReader) line() ([]byte, error) {
	rd := b.rd
	scanned := 0
	for {
		buf := rd.buf[rd.r:rd.w]
		if i := bytes.Index(buf[max(scanned-1, 0):], []byte("\r\n")); i >= 0 {
			end := max(scanned-1, 0) + i
			rd.r += end + 2
			return buf[:end], nil
		}
		scanned = len(buf)
		if scanned > maxChunkLine {
			return nil, errBadChunk
		}
		if err := rd.fill(); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

func (b *bodyReader) expectCRLF() error {
	l, err := b.line()
	if err != nil {
		return err
	}
	if len(l) != 0 {
		return errBadChunk
	}
	return nil
}

// nextChunk reads a chunk-size line; on the last chunk it reads the trailers (handing them to
// b.trailer when set) and marks the body done.
func (b *bodyReader) nextChunk() error {
	l, err := b.line()
	if err != nil {
		return err
	}
	if i := bytes.IndexByte(l, ';'); i >= 0 {
		l = l[:i]
	}
	l = bytes.TrimRight(l, " \t")
	if len(l) == 0 || len(l) > 16 {
		return errBadChunk
	}
	size, err := strconv.ParseUint(string(l), 16, 63)
	if err != nil {
		return errBadChunk
	}
	if size > 0 {
		b.left = int64(size)
		return nil
	}
	for {
		t, err := b.line()
		if err != nil {
			return err
		}
		if len(t) == 0 {
			b.done = true
			return nil
		}
		if b.trailer != nil {
			b.trailer(t)
		}
	}
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
	conn    net.Conn
	buf     []byte
	chunked bool // the body is sent chunked
	noBody  bool // HEAD, 1xx, 204, 304: the body is not sent
	tx      *stats.Counter
	err     error
	sent    int64  // body bytes accepted, for %BYTES_SENT%
	trailer []byte // the chunked trailer section's field lines, each ending in CRLF
}

// flushAt is how much a writer buffers before writing to the socket.
const flushAt = 16 << 10

func (w *h1writer) flush() error {
	if w.err != nil || len(w.buf) == 0 {
		return w.err
	}
	n, err := w.conn.Write(w.buf)
	w.tx.Add(uint64(n))
	w.buf = w.buf[:0]
	w.err = err
	return err
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
		w.buf = strconv.AppendUint(w.buf, uint64(len(p)), 16)
		w.buf = append(w.buf, '\r', '\n')
	}
	w.buf = append(w.buf, p...)
	if w.chunked {
		w.buf = append(w.buf, '\r', '\n')
	}
	if len(w.buf) >= flushAt {
		if err := w.flush(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// bodySource tells whether the next read of a body returns without waiting for its peer
// (pool.Response.BodyReady).
type bodySource interface{ BodyReady() bool }

// copyFrom moves a body from r into the response: straight into the buffer's spare room
// when the body is not chunked, so a small response goes out in one write with its head.
// What is buffered is written whenever src says the next read may wait for the upstream, so
// that a streamed response (server-sent events, long polling, a trickled download) reaches
// the client as it arrives, as Envoy forwards each read; a body that is already buffered
// still goes out whole. Writes block while the client is slow, and so does the next read:
// the upstream is held back by TCP, and the buffer stays under flushAt plus one read.
func (w *h1writer) copyFrom(r io.Reader, src bodySource) (int64, error) {
	if !src.BodyReady() {
		if err := w.flush(); err != nil { // the head, before the wait for the first bytes
			return 0, err
		}
	}
	if w.chunked || w.noBody {
		return w.copyChunks(r, src)
	}
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
		if done, err := w.afterRead(n, err, src); done {
			return total, err
		}
	}
}

// copyChunks is copyFrom for a chunked body, or one that is not sent (HEAD, 204, 304).
func (w *h1writer) copyChunks(r io.Reader, src bodySource) (int64, error) {
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
func (w *h1writer) afterRead(n int, err error, src bodySource) (done bool, _ error) {
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
		w.buf = append(w.buf, "0\r\n"...)
		w.buf = append(w.buf, w.trailer...)
		w.buf = append(w.buf, '\r', '\n')
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
		t := time.NewTimer(bound)
		defer t.Stop()
		timeout = t.C
	}
	var cut <-chan struct{}
	var read chan error
	switch {
	case s.h2req != nil:
		cut = s.h2req.Context().Done()
	case s.sc != nil:
		read = make(chan error, 1)
		go s.sc.readPaused(int(s.bufferLimit()), read)
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
		s.sc.nc.SetReadDeadline(time.Unix(1, 0))
		<-read
		s.sc.nc.SetReadDeadline(s.sc.deadline)
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
func (sc *serverConn) readPaused(limit int, out chan<- error) {
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
		n, err := rd.conn.Read(rd.buf[rd.w:])
		rd.w += n
		rd.rx.Add(uint64(n))
		if err != nil {
			out <- err
			return
		}
	}
	out <- nil
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
