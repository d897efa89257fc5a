package pool

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/legateproxy/legate/breaker"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/internal/http1"
)

const h1BufferSize = 4 << 10

// h1conn is one HTTP/1.1 upstream connection. It is owned either by one of the pool's idle
// lists (under that idleShard's lock) or by the one exchange using it; only the owner touches
// its buffers.
type h1conn struct {
	uc        *upConn
	br        *bufio.Reader
	bw        *bufio.Writer
	body      body
	scratch   []byte      // chunked request bodies; allocated on first use
	validHost []byte      // the last host a request head was written with (hostValid)
	timer     *time.Timer // idle timeout; armed once, re-armed by itself (see idleExpired)
	lifetime  *time.Timer // max_connection_duration; nil when unset
	idleSince int64       // clock.Mono when the connection last went idle; guarded by shard's lock
	// shard is the idle list c is in, nil while an exchange owns it; set under that list's
	// lock, read without it by the timers (lockIdle).
	shard     atomic.Pointer[idleShard]
	keepAlive bool // the last response allows reuse
	last      bool // max_requests_per_connection reached
	peerGone  bool // the upstream closed or reset the connection
	// retired: not to be reused (host health failure, max_connection_duration). Set before
	// the idle lists are swept, read after c is made idle (releaseH1), so one of them closes c.
	retired  atomic.Bool
	deadline bool // a read/write deadline is set
	// deadlineAt is the read and write deadline set while deadline is, zero when they may
	// differ (the head reader's expired write deadline, the TLS idle check's read deadline):
	// the idle check leaves one well in the future, the next exchange one close after its own.
	deadlineAt time.Time
	// deadlineStamp is deadlineAt's stamp (Manager.stamps) when setDeadline set it: the next
	// exchange compares its deadline with it as integers (a time.Time.Sub was about 30
	// instructions).
	deadlineStamp int64

	// The idle check (see checkIdle): unchecked marks a connection taken from an idle list
	// and not checked yet; raw is the TCP socket under the connection (nil when the
	// transport has none), peek the callback run on it, built once so that a check
	// allocates nothing; found is what it found.
	unchecked bool
	raw       syscall.RawConn
	isTLS     bool
	peek      func(fd uintptr) bool
	found     idleState

	// Sending a request without a body (send): flush is the raw read callback that writes
	// the request and then waits for the answer; flushed and flushErr are its state. The
	// buffered writer bw writes to sw, the buffered reader br reads from sr.
	flush    func(fd uintptr) bool
	flushed  bool
	flushErr error
	sw       sockWriter
	sr       sockReader

	// Sending a request body (exchangeBody): reqBody reads it; sending is the request
	// writeRequestBody writes, with reqBody as its body; the head reader's goroutine reads the
	// response head into headResp and reports on head; answered tells the body to stop (and
	// interrupt, the request's InterruptBody, ends a read of it waiting for the client);
	// bodySent tells the head reader the body is out; early marks a response that came before
	// the body was whole.
	reqBody     requestBody
	sending     Request
	head        chan error
	headResp    *Response
	headOfHEAD  bool
	headFraming http1.Framing
	interrupt   func() // the request's InterruptBody
	answered    atomic.Bool
	bodySent    atomic.Bool
	early       bool

	// The watch on the exchange's Request.Downstream: unwatch stops it, or watcher's
	// UnwatchEnd(watchID) for an EndWatcher; abandoned is set (by the watch's goroutine)
	// when the downstream request ended and the socket was closed. abandonFn is c.abandon,
	// made once for the connection.
	unwatch   func() bool
	watcher   EndWatcher
	watchID   uint64
	abandonFn func()
	abandoned atomic.Bool
}

// watch closes the connection if downstream ends before the exchange does.
func (c *h1conn) watch(downstream context.Context) {
	if downstream == nil {
		return
	}
	if c.abandonFn == nil {
		c.abandonFn = c.abandon
	}
	if w, ok := downstream.(EndWatcher); ok {
		c.watcher, c.watchID = w, w.WatchEnd(c.abandonFn)
		return
	}
	c.unwatch = context.AfterFunc(downstream, c.abandonFn)
}

// abandon runs when the downstream request of the exchange ends first: closing the socket
// wakes the exchange's blocked read or write, which then fails with context.Canceled.
func (c *h1conn) abandon() {
	c.abandoned.Store(true)
	c.uc.Conn.Close()
}

// abortStream is the max_stream_duration clock's abort: closing the socket ends whatever the
// exchange is doing with it.
func (c *h1conn) abortStream() { c.uc.Conn.Close() }

// stopWatch ends the watch of the exchange that ends. A watch that already fired (or is
// firing) leaves the connection abandoned: its socket is closed or about to be.
func (c *h1conn) stopWatch() {
	stopped := true
	switch {
	case c.watcher != nil:
		stopped = c.watcher.UnwatchEnd(c.watchID)
		c.watcher = nil
	case c.unwatch != nil:
		stopped = c.unwatch()
		c.unwatch = nil
	}
	if !stopped {
		c.abandoned.Store(true)
	}
}

var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, h1BufferSize) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, h1BufferSize) }}
)

// newH1 wraps a fresh connection.
func newH1(uc *upConn) *h1conn {
	c := &h1conn{uc: uc}
	c.br = readers.Get().(*bufio.Reader)
	c.sr = sockReader{uc: uc, fd: -1}
	c.br.Reset(&c.sr)
	c.bw = writers.Get().(*bufio.Writer)
	c.sw = sockWriter{uc: uc, fd: -1}
	c.bw.Reset(&c.sw)
	c.raw, c.isTLS = rawSocket(uc.Conn)
	c.peek = c.peekSocket
	c.flush = c.flushThenWait
	if d := uc.hp.m.idleTimeout; d > 0 {
		// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
		c.timer = time.AfterFunc(d, c.idleExpired)
	}
	if d := uc.hp.m.maxDuration; d > 0 {
		// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
		c.lifetime = time.AfterFunc(d, c.durationReached)
	}
	return c
}

// destroy closes the connection and recycles its buffers. Only the owner calls it.
func (c *h1conn) destroy(local bool) {
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.lifetime != nil {
		c.lifetime.Stop()
	}
	c.uc.shut(local)
	if c.br != nil {
		c.br.Reset(nil)
		readers.Put(c.br)
		c.bw.Reset(nil)
		writers.Put(c.bw)
		c.br, c.bw = nil, nil
	}
}

// idleExpired runs when the idle timer fires. The timer is not touched per request: a busy
// connection, or one idle for less than idle_timeout, re-arms it for the time left; one idle
// for the whole timeout is closed (upstream_cx_idle_timeout).
func (c *h1conn) idleExpired() {
	hp := c.uc.hp
	if c.uc.closed.Load() {
		return
	}
	s := c.lockIdle()
	if s == nil {
		idleDue(c.timer, true, 0, hp.m.idleTimeout)
		return
	}
	if !idleDue(c.timer, false, c.idleSince, hp.m.idleTimeout) {
		s.mu.Unlock()
		return
	}
	s.removeLocked(c)
	s.mu.Unlock()
	hp.forget(c)
	hp.m.st.UpstreamCxIdleTimeout.Inc()
	c.destroy(true)
}

// idleDue decides what an idle timer that fired does: it re-arms t and returns false for a
// busy connection (for the whole timeout) or one idle since less than d ago (for the rest);
// true means the connection was idle for d and is to be closed. The caller holds the lock of
// the idle list c is in, if any.
func idleDue(t *time.Timer, busy bool, idleSince int64, d time.Duration) bool {
	if busy {
		t.Reset(d)
		return false
	}
	if left := time.Duration(idleSince + int64(d) - clock.Mono()); left > 0 {
		t.Reset(left)
		return false
	}
	return true
}

// durationReached runs at max_connection_duration (upstream_cx_max_duration_reached): an
// idle connection is closed now, a busy one is not reused and closes when its request ends.
func (c *h1conn) durationReached() {
	hp := c.uc.hp
	if c.uc.closed.Load() {
		return
	}
	c.retired.Store(true)
	s := c.lockIdle()
	if s != nil {
		s.removeLocked(c)
		s.mu.Unlock()
		hp.forget(c)
	}
	hp.m.st.UpstreamCxMaxDurationReached.Inc()
	if s != nil {
		c.destroy(true)
	}
}

// forget drops c, which the caller owns and closes, from the pool's connections.
func (hp *hostPool) forget(c *h1conn) {
	hp.mu.Lock()
	delete(hp.h1, c)
	hp.mu.Unlock()
}

// waiter is a request waiting for a connection when max_connections is reached. It receives
// a connection, or nil when it should try to connect again (capacity freed or pool draining).
type waiter struct{ ch chan *h1conn }

var waiters = sync.Pool{New: func() any { return &waiter{ch: make(chan *h1conn, 1)} }}

// getH1 returns an idle connection, or connects, or waits for a connection to be released.
func (hp *hostPool) getH1(ctx context.Context, prio *breaker.Priority) (*h1conn, error) {
	if c := hp.takeIdle(); c != nil {
		return c, nil
	}
	st := hp.m.st
	if err := hp.m.pendingStart(prio); err != nil {
		return nil, err
	}
	defer hp.m.pendingEnd(prio)
	for {
		if prio.Connections.TryAcquire() == nil {
			uc, err := hp.connect(ctx, hp.alpnFor(HTTP1), &prio.Connections, hp.origin())
			if err != nil {
				return nil, err
			}
			st.UpstreamCxHTTP1Total.Inc()
			c := newH1(uc)
			hp.mu.Lock()
			hp.h1[c] = struct{}{}
			hp.mu.Unlock()
			return c, nil
		}
		st.UpstreamCxOverflow.Inc()
		c, err := hp.wait(ctx)
		if c != nil || err != nil {
			return c, err
		}
	}
}

// pendingStart counts a request that waits for a connection (max_pending_requests).
func (m *Manager) pendingStart(prio *breaker.Priority) error {
	if prio.PendingRequests.TryAcquire() != nil {
		m.st.UpstreamRqPendingOverflow.Inc()
		return m.errPendingOverflow
	}
	m.st.UpstreamRqPendingTotal.Inc()
	m.st.UpstreamRqPendingActive.Inc()
	return nil
}

// pendingEnd ends what pendingStart began.
func (m *Manager) pendingEnd(prio *breaker.Priority) {
	prio.PendingRequests.Release()
	m.st.UpstreamRqPendingActive.Dec()
}

// takeIdle pops the most recently used idle connection (of the caller's P first, see
// popIdle) that is not retired. The caller checks it (it is unchecked) before use.
func (hp *hostPool) takeIdle() *h1conn {
	for {
		c := hp.popIdle()
		if c == nil || !c.retired.Load() {
			return c
		}
		hp.releaseH1(c, false) // retired as it went idle (see releaseH1)
	}
}

// wait queues the request until a connection is released (returned) or capacity frees
// (nil, nil).
func (hp *hostPool) wait(ctx context.Context) (*h1conn, error) {
	hp.mu.Lock()
	if hp.draining.Load() {
		hp.mu.Unlock()
		return nil, ErrClosed
	}
	w := waiters.Get().(*waiter)
	hp.waiters = append(hp.waiters, w)
	hp.nWaiting.Store(int32(len(hp.waiters)))
	// Listed first, then the idle lists are read: a release that made a connection idle
	// before either sees it here or sees the waiter (releaseH1), never neither.
	if hp.idleCount() > 0 {
		hp.waiters = hp.waiters[:len(hp.waiters)-1]
		hp.nWaiting.Store(int32(len(hp.waiters)))
		hp.mu.Unlock()
		waiters.Put(w)
		return hp.takeIdle(), nil
	}
	hp.mu.Unlock()
	select {
	case c := <-w.ch:
		waiters.Put(w)
		if c == nil && hp.isDraining() {
			return nil, ErrClosed
		}
		return c, nil
	case <-ctx.Done():
		hp.mu.Lock()
		queued := false
		for i, x := range hp.waiters {
			if x == w {
				hp.waiters = append(hp.waiters[:i], hp.waiters[i+1:]...)
				hp.nWaiting.Store(int32(len(hp.waiters)))
				queued = true
				break
			}
		}
		hp.mu.Unlock()
		if !queued { // a connection (or a wake-up) was handed over concurrently
			if c := <-w.ch; c != nil {
				hp.releaseH1(c, true)
			}
		}
		waiters.Put(w)
		hp.m.st.UpstreamRqCancelled.Inc()
		return nil, ctx.Err()
	}
}

func (hp *hostPool) isDraining() bool { return hp.draining.Load() }

// popWaiterLocked removes the oldest waiter.
func (hp *hostPool) popWaiterLocked() *waiter {
	if len(hp.waiters) == 0 {
		return nil
	}
	w := hp.waiters[0]
	copy(hp.waiters, hp.waiters[1:])
	hp.waiters[len(hp.waiters)-1] = nil
	hp.waiters = hp.waiters[:len(hp.waiters)-1]
	hp.nWaiting.Store(int32(len(hp.waiters)))
	return w
}

// releaseH1 returns c to the pool after an exchange: to a waiting request, to the idle list
// of the caller's P, or closed when it cannot be reused. Without waiters it takes no lock
// but that idle list's.
func (hp *hostPool) releaseH1(c *h1conn, reusable bool) { hp.releaseH1At(c, reusable, 0) }

// releaseH1At is releaseH1 at now, a clock.Mono stamp the caller took anyway (zero: none).
func (hp *hostPool) releaseH1At(c *h1conn, reusable bool, now int64) {
	if !reusable || !hp.reusable(c) {
		hp.closeH1(c)
		return
	}
	if hp.nWaiting.Load() > 0 {
		hp.mu.Lock()
		w := hp.popWaiterLocked()
		hp.mu.Unlock()
		if w != nil {
			w.ch <- c
			return
		}
	}
	var idleSince int64
	switch {
	case c.timer == nil:
	case now != 0:
		idleSince = now
	default:
		idleSince = clock.Mono()
	}
	hp.putIdle(c, idleSince)
	// Made idle first, then the flags are read, while wait, retire and drain write theirs
	// first and then read the idle lists: one side always sees the other.
	if hp.nWaiting.Load() > 0 {
		hp.serveWaiters()
	}
	if !hp.reusable(c) {
		if s := c.lockIdle(); s != nil {
			s.removeLocked(c)
			s.mu.Unlock()
			hp.closeH1(c)
		}
	}
}

// reusable reports whether c may go idle: its pool is not draining and c is neither retired
// nor closed.
func (hp *hostPool) reusable(c *h1conn) bool {
	return !hp.draining.Load() && !c.retired.Load() && !c.uc.closed.Load()
}

// closeH1 closes c, which the caller owns, and wakes a waiter to connect in its place.
func (hp *hostPool) closeH1(c *h1conn) {
	hp.mu.Lock()
	delete(hp.h1, c)
	w := hp.popWaiterLocked()
	hp.mu.Unlock()
	c.destroy(!c.peerGone)
	if w != nil {
		w.ch <- nil
	}
}

// serveWaiters hands idle connections to the requests waiting for one, oldest first: those
// that queued while a release made a connection idle.
func (hp *hostPool) serveWaiters() {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	for len(hp.waiters) > 0 {
		c := hp.popIdle()
		if c == nil {
			return
		}
		hp.popWaiterLocked().ch <- c // buffered: never blocks
	}
}

// roundTripH1 runs one HTTP/1.1 exchange. A request that fails on a reused connection
// before any response byte arrived is retried once on another connection: the upstream
// closed the idle connection as we sent (the keep-alive race). Its body goes again: what the
// first attempt read of it is kept (up to the cluster's per_connection_buffer_limit_bytes,
// as Envoy buffers for a retry) and replayed before the rest.
func (ex *exchange) roundTripH1(ctx context.Context, req *Request, resp *Response) error {
	hp := ex.hp
	var kept *[]byte // what the first attempt read of the body
	// The head's size bound, for checkAtSend and writeRequestHead: computed once, it was
	// about 55 instructions each.
	size := headSize(req, hp.host.Address())
	for attempt := 0; ; attempt++ {
		c, err := hp.getH1(ctx, ex.prio)
		if err != nil {
			putKept(kept)
			return err
		}
		if c.unchecked && !c.checkAtSend(req, size) {
			c.unchecked = false
			if !c.checkIdle() {
				attempt-- // refused unused: not an attempt
				continue
			}
		}
		reused := c.uc.requests.Add(1) > 1
		if mr := hp.m.maxRequests; mr > 0 && c.uc.requests.Load() >= mr {
			c.last = true
		}
		if hasBody(req) {
			c.reqBody = requestBody{r: req.Body, length: req.ContentLength, stop: &c.answered}
			switch {
			case kept != nil:
				c.reqBody.replay = *kept
			case reused:
				kept = keptBuffers.Get().(*[]byte)
				c.reqBody.keep, c.reqBody.limit = kept, hp.m.bufferLimit
			}
		}
		c.uc.rqActive.Add(1)
		c.uc.line = ex.line
		c.watch(req.Downstream)
		if hp.m.streamDuration > 0 { // the method value would allocate on every request
			ex.clock = hp.m.startClock(c.abortStream)
		}
		stale, err := c.exchange(ctx, req, resp, ex.start, size)
		replayable := !c.reqBody.overflow
		c.reqBody = requestBody{}
		if err == nil {
			putKept(kept)
			ex.h1 = c
			return nil
		}
		c.stopWatch()
		if errors.Is(err, errIdle) {
			// Found unclean before the request was written: refused as checkIdle refuses it,
			// with nothing of the exchange counted on it, and the request takes another.
			fired := ex.clock.stop()
			c.uc.requests.Add(^uint32(0))
			c.uc.rqActive.Add(-1)
			c.refuseIdle(c.found)
			if fired {
				return expired(hp.host.Address())
			}
			attempt--
			continue
		}
		if ex.clock.stop() {
			hp.m.st.UpstreamRqTxReset.Inc()
			hp.releaseH1(c, false) // closed by the clock with its request active
			c.uc.rqActive.Add(-1)
			putKept(kept)
			return expired(hp.host.Address())
		}
		if c.abandoned.Load() {
			// Closed under an active request: upstream_cx_destroy_local_with_active_rq.
			hp.m.st.UpstreamRqTxReset.Inc()
			hp.releaseH1(c, false)
			c.uc.rqActive.Add(-1)
			putKept(kept)
			return err
		}
		c.uc.rqActive.Add(-1)
		hp.releaseH1(c, false)
		if !(stale && reused && attempt == 0 && replayable) || errors.Is(err, ErrRequestBody) {
			if errors.Is(err, ErrProtocol) {
				hp.m.st.UpstreamCxProtocolError.Inc()
			}
			putKept(kept)
			return err
		}
	}
}

// hasBody reports whether req has body bytes to send.
func hasBody(req *Request) bool { return req.Body != nil && req.ContentLength != 0 }

// exchange writes req, started at start, and reads the response head; size is its head's
// headSize. stale reports a failure before any response byte arrived.
func (c *h1conn) exchange(ctx context.Context, req *Request, resp *Response, start int64, size int) (stale bool, err error) {
	c.setDeadline(ctx, req.Deadline, start)
	c.early = false
	rx := c.uc.rx
	if err := writeRequestHead(c.bw, req, c.uc.hp.host.Address(), size, c.opts(), &c.validHost); err != nil {
		return false, err
	}
	if hasBody(req) {
		return c.exchangeBody(ctx, req, resp, rx)
	}
	if err := c.send(); err != nil {
		if errors.Is(err, errIdle) {
			return false, err
		}
		return c.uc.rx == rx, c.ioError(ctx, err)
	}
	f, err := readResponseHead(c.br, resp, req.Method == "HEAD", c.uc.hp.m.head)
	if err != nil {
		return c.uc.rx == rx, c.ioError(ctx, err)
	}
	c.startBody(f, resp)
	return false, nil
}

// deadlineLateness bounds how late the socket deadline of an exchange may fire, as a share
// of its timeout: 1/64 (234 ms of the default 15 s route timeout, 1.6 ms of a 100 ms one), and
// at most maxDeadlineLateness.
const (
	deadlineLateness    = 64
	maxDeadlineLateness = time.Second
)

// setDeadline gives the socket the deadline of ctx, the context of an exchange started at
// start (a stamp), or none; dlAt, when not zero, is that deadline's stamp (Request.Deadline),
// and ctx is then not asked. A deadline is set a little later than asked (deadlineLateness), so that
// the next exchanges, whose deadlines fall inside that margin, keep it: each SetDeadline is
// two runtime timer updates (about 600 instructions), and on a busy connection the route's
// deadline moves on by only the time between two requests. A deadline that would come
// earlier than asked, or later than the margin allows, is set anew.
func (c *h1conn) setDeadline(ctx context.Context, dlAt, start int64) {
	var dl time.Time // ctx's deadline, when asked
	if dlAt == 0 {
		var ok bool
		if dl, ok = ctx.Deadline(); !ok {
			if c.deadline {
				c.uc.SetDeadline(time.Time{})
				c.deadline = false
			}
			return
		}
		dlAt = c.uc.hp.m.stamps.At(dl)
	}
	late := min(max(time.Duration(dlAt-start)/deadlineLateness, 0), maxDeadlineLateness)
	if ahead := time.Duration(c.deadlineStamp - dlAt); c.deadline && !c.deadlineAt.IsZero() && ahead >= 0 && ahead <= late {
		return
	}
	var at time.Time
	if dl.IsZero() {
		at = c.uc.hp.m.stamps.Time(dlAt + int64(late))
	} else {
		at = dl.Add(late)
	}
	c.uc.SetDeadline(at)
	c.deadline, c.deadlineAt, c.deadlineStamp = true, at, dlAt+int64(late)
}

// exchangeBody sends the request body while another goroutine reads the response head: an
// upstream may answer before the body is whole (a 401 or 413 to a large upload) and stop
// reading it. Such an answer stops the upload: the body is not read on (a read already
// waiting for the client ends first) and a write blocked on the upstream is woken by an
// expired write deadline. The response is returned, and the connection, with its request
// unfinished, is not reused. Envoy sends on until the response ends; stopping at its head
// keeps the body with the goroutine that owns the downstream connection, at the cost of
// HTTP/1.1 upstreams that answer while still reading (rare: net/http's server cannot). rx is
// the byte count of the connection when the request started.
func (c *h1conn) exchangeBody(ctx context.Context, req *Request, resp *Response, rx int64) (stale bool, err error) {
	if c.head == nil {
		c.head = make(chan error, 1)
	}
	c.answered.Store(false)
	c.bodySent.Store(false)
	c.headResp, c.headOfHEAD, c.interrupt = resp, req.Method == "HEAD", req.InterruptBody
	go c.readHeadWhileSending()
	if c.scratch == nil && req.ContentLength < 0 {
		c.scratch = make([]byte, h1BufferSize-16)
	}
	c.sending = *req
	c.sending.Body = &c.reqBody
	werr := writeRequestBody(c.bw, &c.sending, c.scratch, c.opts())
	if werr == nil {
		werr = c.bw.Flush()
	}
	c.bodySent.Store(true)
	c.sending = Request{}
	if errors.Is(werr, ErrRequestBody) && !c.answered.Load() {
		// The client's body failed: the request cannot end. Closing the socket ends the head
		// read; the connection is discarded without blaming the upstream.
		c.uc.Conn.Close()
	}
	herr := <-c.head
	c.headResp, c.interrupt = nil, nil
	c.deadline, c.deadlineAt = true, time.Time{} // the head reader may have set a write deadline
	switch {
	case herr == nil: // answered: how the body ended (cut short, interrupted) is moot
		c.early = werr != nil
		c.startBody(c.headFraming, resp)
		return false, nil
	case errors.Is(werr, ErrRequestBody):
		return false, werr
	}
	return c.uc.rx == rx, c.ioError(ctx, herr)
}

// readHeadWhileSending reads the response head of exchangeBody on its own goroutine. Once the
// head is in (or its read failed), the body is not sent on.
func (c *h1conn) readHeadWhileSending() {
	f, err := readResponseHead(c.br, c.headResp, c.headOfHEAD, c.uc.hp.m.head)
	c.headFraming = f
	c.answered.Store(true)
	if !c.bodySent.Load() {
		c.uc.SetWriteDeadline(aLongTimeAgo)
		if c.interrupt != nil {
			c.interrupt()
		}
	}
	c.head <- err
}

// opts are the cluster's HTTP/1 codec options.
func (c *h1conn) opts() *config.HTTP1Options { return &c.uc.hp.m.cfg.HTTP1 }

// startBody makes resp.Body read the response body that f frames.
func (c *h1conn) startBody(f http1.Framing, resp *Response) {
	c.keepAlive = !f.Close && !c.early
	trailers := resp
	if !c.opts().EnableTrailers {
		trailers = nil // Envoy's HTTP/1 codec drops a response's trailers without enable_trailers
	}
	c.body.reset(c.br, f, trailers)
	resp.Body = &c.body
}

// ioError classifies a read or write failure.
func (c *h1conn) ioError(ctx context.Context, err error) error {
	switch {
	case c.abandoned.Load() && ctx.Err() == context.DeadlineExceeded: //nolint:errorlint // the context's own error
		// The exchange's context is its downstream too, and its deadline (one that starts
		// late, with the request's end) passed: a timeout, not a cancellation.
		return fmt.Errorf("upstream request to %s: %w", c.uc.hp.host.Address(), context.DeadlineExceeded)
	case c.abandoned.Load():
		return fmt.Errorf("upstream request to %s: %w", c.uc.hp.host.Address(), context.Canceled)
	case errors.Is(err, ErrProtocol):
		return err
	case errors.Is(err, os.ErrDeadlineExceeded) && c.deadline: // only the request's deadline is set
		return fmt.Errorf("upstream request to %s: %w", c.uc.hp.host.Address(), context.DeadlineExceeded)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE):
		c.peerGone = true
	case errors.Is(err, net.ErrClosed):
	}
	return fmt.Errorf("%w: %s: %w", ErrReset, c.uc.hp.host.Address(), err)
}

// finishH1 ends an HTTP/1.1 exchange at Response.Close, at end (a stamp of the pool's clock;
// zero: now; system: end is a stamp of the system clock, clock.Mono's).
func (ex *exchange) finishH1(end int64, system bool) error {
	c, hp := ex.h1, ex.hp
	idle := end // the connection's idle start, when a stamp of the system clock (releaseH1At)
	switch {
	case end == 0:
		end = hp.m.stamps.Now() // the exchange's end and the connection's idle start: one reading
		if hp.m.stamps.System() {
			idle = end
		}
	case !system:
		idle = 0 // a test clock's: releaseH1At reads the system clock
	}
	c.stopWatch()
	if ex.clock.stop() {
		c.abandoned.Store(true) // closed by the clock: a local reset
	}
	complete := c.body.complete()
	bodyErr := c.body.err
	if c.abandoned.Load() {
		complete, bodyErr = false, nil // counted as a local reset
	}
	if bodyErr != nil {
		c.ioError(context.Background(), bodyErr)
	}
	if c.abandoned.Load() {
		hp.releaseH1(c, false) // closed with its request active
		c.uc.rqActive.Add(-1)
	} else {
		c.uc.rqActive.Add(-1)
		if c.last && complete && c.keepAlive {
			hp.m.st.UpstreamCxMaxRequests.Inc()
		}
		hp.releaseH1At(c, complete && c.keepAlive && !c.last && c.cleanEnd(), idle)
	}
	o := outcomeComplete
	switch {
	case complete:
	case errors.Is(bodyErr, os.ErrDeadlineExceeded):
		o = outcomeTimeout
	case bodyErr != nil:
		o = outcomeError
		hp.m.st.UpstreamRqRxReset.Inc()
	default:
		o = outcomeError
		hp.m.st.UpstreamRqTxReset.Inc()
	}
	ex.endedAt(o, ex.status, end)
	return nil
}
