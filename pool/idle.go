package pool

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"
	"unsafe"

	"github.com/legateproxy/legate/internal/sockio"
)

// An HTTP/1.1 connection is reused only when nothing came from the upstream since its last
// response ended: bytes with no request outstanding would be read as the next request's
// response, which belongs to another client. Envoy treats them as a protocol error and
// closes the connection; so does the pool.
//
// How an idle connection is watched, chosen on measurement (BenchmarkIdleWatch, 2 shared
// cores): it is checked once taken from the idle list, before its next request is written,
// with one non-blocking MSG_PEEK recv on its socket: 0.8-2.1 µs, no allocation, nothing
// kept per idle connection. A request without a body on a plain socket makes the check in
// the raw read that writes it (send), others before writing (checkIdle). A reader
// goroutine parked on every idle connection (net/http's readLoop) notices at once but costs
// as much per request (1.0-2.3 µs: stop it with a read deadline, hand over, clear the
// deadline), allocates the deadline error every time, and keeps a goroutine stack per idle
// connection. Nothing stale reaches a client either way; what the check leaves for later (an
// upstream closing a connection the pool does not need yet) is found when the connection is
// next taken, or closed by the idle timer.

// idleState is what checkIdle found on a connection.
type idleState uint8

const (
	idleClean   idleState = iota
	idleBytes             // the upstream sent bytes with no request outstanding
	idleClosed            // the upstream closed or reset the connection
	idleUnknown           // the connection cannot be vouched for (TLS records of unknown content)
)

// tlsPeekWait bounds the read that tells what a TLS upstream sent on an idle connection:
// the bytes are already there, so the read only waits when a record is incomplete.
const tlsPeekWait = 5 * time.Millisecond

// aLongTimeAgo is a read deadline that makes a read return at once with what is buffered.
var aLongTimeAgo = time.Unix(1, 0)

// rawSocket returns the socket under nc (under its TLS layer too), or nil when nc has none.
func rawSocket(nc net.Conn) (raw syscall.RawConn, isTLS bool) {
	if tc, ok := nc.(*tls.Conn); ok {
		nc, isTLS = tc.NetConn(), true
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil, isTLS
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, isTLS
	}
	return raw, isTLS
}

// peekSocket is the syscall.RawConn read callback of checkIdle.
func (c *h1conn) peekSocket(fd uintptr) bool {
	c.found = peekFD(fd)
	return true
}

// peekFD tells, without waiting and without consuming a byte, what the socket fd holds:
// nothing (idleClean), bytes, or its end (idleClosed: end of stream or reset). A recv with
// MSG_DONTWAIT never blocks, so it is made as a raw system call, which does not tell the
// scheduler (entersyscall and exitsyscall were about 200 instructions of each check).
func peekFD(fd uintptr) idleState {
	var b [1]byte
	for {
		n, _, errno := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		switch {
		case errno == syscall.EINTR:
			continue
		case errno == syscall.EAGAIN:
			return idleClean
		case errno != 0, n == 0:
			return idleClosed
		}
		return idleBytes
	}
}

// cleanEnd reports whether c may be reused after a response that ended: nothing may follow
// the message in the read buffer. Bytes there are counted as a protocol error.
func (c *h1conn) cleanEnd() bool {
	if c.br.Buffered() == 0 {
		return true
	}
	c.uc.hp.m.st.UpstreamCxProtocolError.Inc()
	return false
}

// checkIdle reports whether c, taken from the idle list for a request that send does not
// check (checkAtSend), is still clean; a connection that is not is refused (refuseIdle).
func (c *h1conn) checkIdle() bool {
	state := c.idleState()
	if state == idleClean {
		return true
	}
	c.refuseIdle(state)
	return false
}

// refuseIdle closes and discards c, found unclean (state) before a request was written on
// it, counting upstream_cx_protocol_error when the upstream sent bytes.
func (c *h1conn) refuseIdle(state idleState) {
	switch state {
	case idleBytes:
		c.uc.hp.m.st.UpstreamCxProtocolError.Inc()
	case idleClosed:
		c.peerGone = true
	}
	c.uc.hp.releaseH1(c, false)
}

// checkAtSend reports whether send checks c, taken from an idle list, as it writes req
// (see send): a request without a body on a plain socket, whose head the empty writer
// holds whole (writeRequestHead writes nothing before send then). Other requests check it
// first (checkIdle). size is the head's headSize.
func (c *h1conn) checkAtSend(req *Request, size int) bool {
	return c.raw != nil && !c.isTLS && c.br.Buffered() == 0 && !hasBody(req) && size <= c.bw.Available()
}

// idleState looks at what arrived on c while it was idle, without waiting.
func (c *h1conn) idleState() idleState {
	if c.br.Buffered() > 0 {
		return idleBytes
	}
	if c.raw == nil {
		return idleClean
	}
	if c.deadline && !c.deadlineAhead() {
		// An expired deadline would fail the raw read before the callback runs.
		c.uc.SetDeadline(time.Time{})
		c.deadline = false
	}
	if err := c.raw.Read(c.peek); err != nil {
		return idleClosed
	}
	switch {
	case c.found == idleClean:
		if c.isTLS {
			// Plaintext may wait in the TLS layer, decrypted or in whole records read
			// with the last response.
			return c.readIdle(aLongTimeAgo)
		}
		return idleClean
	case c.found == idleClosed:
		return idleClosed
	case c.isTLS:
		// Records arrived: application data, a close_notify alert, or a post-handshake
		// message. Read them to tell; a connection that sent something else is not reused.
		// Real clock: a socket deadline, which the runtime poller compares with the system clock.
		if s := c.readIdle(time.Now().Add(tlsPeekWait)); s != idleClean {
			return s
		}
		return idleUnknown
	default:
		return idleBytes
	}
}

// deadlineSlack is how far ahead the previous exchange's deadline must be for the idle
// check to leave it: the check's read runs at once, and the next exchange sets its own.
const deadlineSlack = time.Second

// deadlineAhead reports whether every deadline set on c is more than deadlineSlack away.
// Clearing the previous request's deadline cost two timer updates per request (a
// SetDeadline), about 540 instructions, only for the next exchange to set its own.
func (c *h1conn) deadlineAhead() bool {
	// Real clock: a socket deadline, which the runtime poller compares with the system clock.
	return !c.deadlineAt.IsZero() && time.Until(c.deadlineAt) > deadlineSlack
}

// readIdle reads through the connection's layers with the given read deadline and reports
// what came. The deadline is left set; the next exchange sets its own.
func (c *h1conn) readIdle(deadline time.Time) idleState {
	c.uc.SetReadDeadline(deadline)
	c.deadline, c.deadlineAt = true, time.Time{} // the write deadline may differ
	_, err := c.br.Peek(1)
	switch {
	case err == nil:
		return idleBytes
	case errors.Is(err, os.ErrDeadlineExceeded):
		return idleClean
	default:
		return idleClosed
	}
}

// errIdle is send's error for a connection it found unclean before writing the request.
var errIdle = errors.New("idle connection found unclean")

// send writes the buffered request and waits until the upstream's answer can be read.
//
// A response cannot arrive before its request is written, so reading straight after the
// write only finds nothing (EAGAIN) and parks; that failed read was one system call in five
// per proxied request. On a plain socket the write is done inside a raw read whose callback
// first reports "not ready": the runtime clears the socket's read readiness before the
// callback runs, the write follows, and any byte (or close) of the upstream after it wakes
// the wait; the response head is then read by one successful read. Bytes that came before
// the write were refused by the idle check, and a close before it is reported by the write
// or by the wait's wake-up, so nothing is lost. TLS keeps the plain flush and read: its
// records are read through its own buffer.
//
// A connection taken from an idle list (unchecked) is checked in the same raw read, just
// before the write: one peek at the socket, as checkIdle's, without a raw read of its own
// (a second lock of the descriptor and reset of its readiness per request). The peek comes
// after the raw read reset the descriptor's readiness, so bytes or a close it does not see
// raise an edge that ends the wait; bytes or a close it sees arrived before the request
// was written, and the request is not written: send returns errIdle, and the exchange
// refuses the connection (refuseIdle) and takes another. checkAtSend makes sure nothing of
// the request was written before (its head is whole in the writer's buffer).
func (c *h1conn) send() error {
	if c.raw == nil || c.isTLS || c.br.Buffered() > 0 {
		return c.bw.Flush()
	}
	c.flushed, c.flushErr, c.found = false, nil, idleClean
	err := c.raw.Read(c.flush)
	switch {
	case c.flushErr != nil:
		return c.flushErr
	case err == nil && c.found != idleClean:
		return errIdle
	}
	return err
}

// flushThenWait is send's raw read callback: the first call checks an unchecked connection
// and writes the request, and asks to wait for readability (unless the check or the write
// failed); the next, run once readable, reads what came (readAnswer) and ends the wait.
func (c *h1conn) flushThenWait(fd uintptr) bool {
	if c.flushed {
		return c.readAnswer(int(fd))
	}
	c.flushed = true
	if c.unchecked {
		c.unchecked = false
		if c.found = peekFD(fd); c.found != idleClean {
			return true
		}
	}
	c.sw.fd = int(fd)
	c.flushErr = c.bw.Flush()
	c.sw.fd = -1
	return c.flushErr != nil
}

// readAnswer fills the reader's buffer from the socket fd, now readable, with one raw recv
// (sockReader): the response head's read through the connection (its lock, readiness reset,
// entersyscall and exitsyscall) was about 450 instructions. It reports false, to wait on,
// when there was nothing to read after all. An error the recv found is kept for the next
// read through the connection, which the response head's reader makes.
func (c *h1conn) readAnswer(fd int) bool {
	c.sr.fd = fd
	_, err := c.br.Peek(1)
	c.sr.fd = -1
	return err != errNotReady //nolint:errorlint // sockReader's own sentinel, unwrapped
}

// sockReader's errors for a raw recv: nothing to read (errNotReady), or an end of stream or
// error kept for the next read (errKept).
var (
	errNotReady = errors.New("socket not ready")
	errKept     = errors.New("socket error kept for the next read")
)

// sockReader is what an HTTP/1.1 connection's buffered reader reads from: the connection,
// or while send's raw read callback runs (fd is not -1), the socket itself, by one raw recv
// (sockio.Recv; the raw read holds the descriptor open). There, nothing to read is
// errNotReady, and the end of stream or an error is kept in err (errKept) and returned by
// the next read, made through the connection.
type sockReader struct {
	uc  *upConn
	fd  int
	err error
}

func (r *sockReader) Read(p []byte) (int, error) {
	if r.fd == -1 {
		if err := r.err; err != nil {
			r.err = nil
			return 0, err
		}
		return r.uc.Read(p)
	}
	n, err := sockio.Recv(r.fd, p)
	switch {
	case errors.Is(err, syscall.EAGAIN):
		return 0, errNotReady
	case err != nil:
		r.err = &net.OpError{Op: "read", Net: "tcp", Source: r.uc.LocalAddr(), Addr: r.uc.RemoteAddr(), Err: os.NewSyscallError("recvfrom", err)}
		return 0, errKept
	case n == 0:
		r.err = io.EOF
		return 0, errKept
	}
	r.uc.rx += int64(n)
	r.uc.hp.m.st.Lines().On(r.uc.line).CxRxBytes.Add(uint64(n))
	return n, nil
}

// sockWriter is what an HTTP/1.1 connection's buffered writer writes to: the connection, or
// while send's raw read callback runs (fd is not -1), the socket itself. The raw read holds
// the descriptor open. A request is written there by one non-blocking send (sockio.Send, a
// raw system call): the connection's write (its lock, readiness reset, entersyscall and
// exitsyscall) was about 500 instructions of it. What that send does not take (a full
// socket buffer, an error) goes through the connection, which waits, honours the write
// deadline and reports the error as usual.
type sockWriter struct {
	uc *upConn
	fd int
}

func (w *sockWriter) Write(p []byte) (int, error) {
	n := 0
	if w.fd != -1 {
		if n, _ = sockio.Send(w.fd, p); n > 0 { // an error is left for the connection's write
			w.uc.hp.m.st.Lines().On(w.uc.line).CxTxBytes.Add(uint64(n))
		}
		if n == len(p) {
			return n, nil
		}
	}
	m, err := w.uc.Write(p[n:])
	return n + m, err
}
