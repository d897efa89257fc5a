package pool

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"syscall"
	"time"
)

// An HTTP/1.1 connection is reused only when nothing came from the upstream since its last
// response ended: bytes with no request outstanding would be read as the next request's
// response, which belongs to another client. Envoy treats them as a protocol error and
// closes the connection; so does the pool.
//
// How an idle connection is watched, chosen on measurement (BenchmarkIdleWatch, 2 shared
// cores): it is checked when taken from the idle list, with one non-blocking MSG_PEEK recv
// on its socket: 0.8-2.1 µs, no allocation, nothing kept per idle connection. A reader
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

// peekSocket is the syscall.RawConn read callback of checkIdle: it peeks one byte without
// waiting and without consuming it.
func (c *h1conn) peekSocket(fd uintptr) bool {
	c.peekN, _, c.peekErr = syscall.Recvfrom(int(fd), c.peekBuf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return true
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

// checkIdle reports whether c, just taken from the idle list, is still clean; a connection
// that is not is closed and discarded (counting upstream_cx_protocol_error when the upstream
// sent bytes).
func (c *h1conn) checkIdle() bool {
	state := c.idleState()
	if state == idleClean {
		return true
	}
	hp := c.uc.hp
	switch state {
	case idleBytes:
		hp.m.st.UpstreamCxProtocolError.Inc()
	case idleClosed:
		c.peerGone = true
	}
	hp.releaseH1(c, false)
	return false
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
	c.peekN, c.peekErr = 0, nil
	if err := c.raw.Read(c.peek); err != nil {
		return idleClosed
	}
	switch {
	case c.peekErr == syscall.EAGAIN: //nolint:errorlint // a bare Errno from the syscall
		if c.isTLS {
			// Plaintext may wait in the TLS layer, decrypted or in whole records read
			// with the last response.
			return c.readIdle(aLongTimeAgo)
		}
		return idleClean
	case c.peekErr != nil, c.peekN == 0: // reset, or EOF
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
func (c *h1conn) send() error {
	if c.raw == nil || c.isTLS || c.br.Buffered() > 0 {
		return c.bw.Flush()
	}
	c.flushed, c.flushErr = false, nil
	err := c.raw.Read(c.flush)
	if c.flushErr != nil {
		return c.flushErr
	}
	return err
}

// flushThenWait is send's raw read callback: the first call writes the request and asks to
// wait for readability (unless the write failed); the next, run once readable, ends the wait.
func (c *h1conn) flushThenWait(uintptr) bool {
	if c.flushed {
		return true
	}
	c.flushed = true
	c.flushErr = c.bw.Flush()
	return c.flushErr != nil
}
