package httpproxy

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/overload"
)

// Envoy's local reply bodies and response code details of the connection manager's timeouts.
const (
	bodyRequestTimeout        = "request timeout"
	bodyRequestHeaderTimeout  = "request header timeout"
	detailsRequestTimeout     = "request_overall_timeout"
	detailsRequestHeaderTimer = "request_header_timeout"
)

// The HTTP/1 connection waits for a request head under up to three deadlines: the idle
// timeout (idleAt), request_headers_timeout once the head's first bytes arrived
// (headDeadline), and max_connection_duration (maxEnd; after it the connection drains for
// drain_timeout, as Envoy's drain sequence does, and then closes). The socket's read deadline
// is the earliest of them; readTimeout sorts out which one fired.

// initLimits arms max_connection_duration for a connection that started at start.
func (sc *serverConn) initLimits(start time.Time) {
	if d := sc.h.cfg.MaxConnectionDuration; d > 0 {
		sc.maxEnd = start.Add(d)
	}
}

// DrainClose reports whether the response being sent should close the connection: the
// listener is draining, or max_connection_duration has passed (Envoy's drain sequence closes
// HTTP/1 connections with "connection: close").
func (sc *serverConn) DrainClose() bool {
	if sc.lc.DrainClose() {
		return true
	}
	return !sc.maxEnd.IsZero() && sc.durationReached(sc.h.sh.deps.Now())
}

// rescaleMax moves the end of max_connection_duration to where reduce_timeouts puts it now,
// until the end is reached (the drain that follows runs from there).
func (sc *serverConn) rescaleMax() {
	if !sc.maxEnd.IsZero() && !sc.maxReached && sc.h.ov.ScalesTimer(overload.ConnectionMax) {
		sc.maxEnd = sc.start.Add(sc.h.ov.ScaleTimer(overload.ConnectionMax, sc.h.cfg.MaxConnectionDuration))
	}
}

// durationReached reports whether max_connection_duration has passed, counting
// downstream_cx_max_duration_reached the first time it is seen.
func (sc *serverConn) durationReached(now time.Time) bool {
	sc.rescaleMax()
	if sc.maxEnd.IsZero() || now.Before(sc.maxEnd) {
		return false
	}
	if !sc.maxReached {
		sc.maxReached = true
		sc.h.stats.DownstreamCxMaxDurationReached.Inc()
	}
	return true
}

// armHeadTimeout starts request_headers_timeout when the first bytes of a request head are
// buffered.
func (sc *serverConn) armHeadTimeout() {
	d := sc.h.cfg.RequestHeadersTimeout
	if d <= 0 || !sc.headDeadline.IsZero() {
		return
	}
	sc.headDeadline = sc.h.sh.deps.Now().Add(d)
	sc.setDeadline(sc.nextDeadline())
}

// headDone disarms request_headers_timeout once a head is complete, and takes the head's and
// the duration's deadlines off the socket so that they do not cut the request's body reads.
func (sc *serverConn) headDone() {
	if sc.headDeadline.IsZero() && sc.maxEnd.IsZero() {
		return
	}
	sc.headDeadline = time.Time{}
	if !sc.deadline.IsZero() && !sc.deadline.Equal(sc.idleAt) {
		sc.clearDeadline()
	}
}

// nextDeadline is the earliest deadline of a connection waiting for a head.
func (sc *serverConn) nextDeadline() time.Time {
	sc.rescaleMax()
	d := sc.idleAt
	earlier := func(t time.Time) {
		if !t.IsZero() && (d.IsZero() || t.Before(d)) {
			d = t
		}
	}
	earlier(sc.headDeadline)
	if !sc.maxEnd.IsZero() {
		if sc.maxReached {
			earlier(sc.maxEnd.Add(sc.h.cfg.DrainTimeout))
		} else {
			earlier(sc.maxEnd)
		}
	}
	return d
}

// setDeadline sets the socket's read deadline unless it is set already.
func (sc *serverConn) setDeadline(t time.Time) {
	if !t.Equal(sc.deadline) {
		sc.deadline = t
		sc.nc.SetReadDeadline(t)
	}
}

// readTimeout handles a read deadline that fired while waiting for a request head: drain
// wake-ups, request_headers_timeout (408 "request header timeout", as Envoy answers), the
// end of max_connection_duration's drain, and the idle timeout. It reports whether to keep
// waiting.
func (sc *serverConn) readTimeout() (resume bool) {
	st := sc.h.stats
	buffered := sc.rd.buffered() > 0
	sc.rescaleIdle() // the wake-up may be reduce_timeouts' scale changing
	if !buffered && sc.drainNow() {
		return false
	}
	now := sc.h.sh.deps.Now()
	if buffered && !sc.headDeadline.IsZero() && !now.Before(sc.headDeadline) {
		st.DownstreamRqHeaderTimeout.Inc()
		sc.writeReply(http.StatusRequestTimeout, bodyRequestHeaderTimeout)
		return false
	}
	if sc.durationReached(now) && !buffered && !now.Before(sc.maxEnd.Add(sc.h.cfg.DrainTimeout)) {
		return false // drained after max_connection_duration
	}
	if !sc.idleAt.IsZero() && !now.Before(sc.idleAt) {
		if buffered {
			st.DownstreamRqHeaderTimeout.Inc()
		} else {
			st.DownstreamCxIdleTimeout.Inc()
		}
		return false
	}
	// Woken early (a drain started, another deadline passed, or the deadline was moved).
	sc.deadline = time.Time{}
	sc.setDeadline(sc.nextDeadline())
	return true
}

// requestBody watches a request body for request_timeout: Envoy's timer runs from the
// request's start until its last byte is received (or the response starts), and answers 408
// "request timeout" when it fires. The body's reads are bounded by the socket's (HTTP/1) or
// the stream's (HTTP/2) read deadline; a read that fails after the deadline marks the stream,
// and the local reply the failed upstream exchange leads to becomes the 408.
type requestBody struct {
	r        io.Reader
	s        *stream
	deadline time.Time
	fired    bool
}

func (b *requestBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF && !b.s.headSent && !b.s.h.sh.deps.Now().Before(b.deadline) {
		b.fired = true
	}
	return n, err
}

// armRequestTimeout applies request_timeout to the stream's body (set before the call); it
// returns the read deadline for the body, zero when request_timeout is not set.
func (s *stream) armRequestTimeout() time.Time {
	s.rqBody = requestBody{}
	d := s.h.cfg.RequestTimeout
	if d <= 0 || s.body == nil {
		return time.Time{}
	}
	s.rqBody = requestBody{r: s.body, s: s, deadline: s.start.Add(d)}
	s.body = &s.rqBody
	return s.rqBody.deadline
}

// armH2RequestTimeout bounds an HTTP/2 request body's reads by request_timeout.
func (s *stream) armH2RequestTimeout(w *h2stream) {
	if d := s.armRequestTimeout(); !d.IsZero() {
		w.SetReadDeadline(d)
	}
}

// requestTimedOut turns the local reply of a stream whose request_timeout fired into Envoy's
// 408 "request timeout"; it reports whether it did.
func (s *stream) requestTimedOut() (status int, body []byte, ok bool) {
	if !s.rqBody.fired {
		return 0, nil, false
	}
	s.rqBody.fired = false
	s.h.stats.DownstreamRqTimeout.Inc()
	s.details = detailsRequestTimeout
	s.flags = 0
	s.closeConn = true // the rest of the request body will not be read
	return http.StatusRequestTimeout, []byte(bodyRequestTimeout), true
}

// h2Lifetime runs the timers of one HTTP/2 connection: max_connection_duration, whose end
// gives the connection a graceful GOAWAY (in-flight streams finish, new ones are refused) and
// closes it drain_timeout later if it is still open (Envoy: "the drain sequence will kick-in,
// and the connection will be force-closed after the drain period"), and the idle timeout,
// scaled by reduce_timeouts when configured, which ends a connection without streams with the
// same GOAWAY. Every HTTP/2 connection has one, registered with its Handler, which drains
// them through it. Envoy first sends a GOAWAY announcing the shutdown and the final one
// drain_timeout later; Legate sends the final one at once, which clients answer by retrying
// unprocessed streams on a new connection.
//
// Its timers run their callbacks on their own goroutines; stop, called when the connection's
// serving ends, stops them, and mu orders them against it.
type h2Lifetime struct {
	h     *Handler
	c     *h2conn
	start time.Time // when the connection was accepted

	// idleTimeout is the connection manager's idle_timeout (zero: none).
	idleTimeout time.Duration

	mu       sync.Mutex  // guards the fields below
	timer    *time.Timer // max_connection_duration; nil without it
	force    *time.Timer
	goneAway bool
	expired  bool // max_connection_duration ended
	stopped  bool
	// The idle timeout: the streams being served, since when none is (a stamp,
	// shared.stamps), and its timer (nil without idleTimeout), pending while idleArmed, due
	// at idleDue (a stamp).
	active    int
	idleSince int64
	idle      *time.Timer
	idleArmed bool
	idleDue   int64
}

// newH2Lifetime registers the connection c accepted at start and arms its timers.
func (h *Handler) newH2Lifetime(c *h2conn, start time.Time) *h2Lifetime {
	l := &h2Lifetime{h: h, c: c, start: start}
	h.mu.Lock()
	if h.h2lives == nil {
		h.h2lives = map[*h2Lifetime]struct{}{}
	}
	h.h2lives[l] = struct{}{}
	h.mu.Unlock()
	l.mu.Lock()
	if h.cfg.MaxConnectionDuration > 0 {
		// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
		l.timer = time.AfterFunc(l.left(), l.expire)
	}
	if h.cfg.IdleTimeout > 0 {
		l.idleTimeout, l.idleSince = h.cfg.IdleTimeout, h.sh.stamps.At(start)
		now := h.sh.stamps.Now()
		left := l.idleLeft(now)
		// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
		l.idle = time.AfterFunc(left, l.idleExpired)
		l.idleArmed, l.idleDue = true, now+int64(left)
	}
	l.mu.Unlock()
	return l
}

// idleLeft is the time from now (a stamp) until the connection, idle since idleSince, reaches
// its idle timeout as reduce_timeouts scales it now.
func (l *h2Lifetime) idleLeft(now int64) time.Duration {
	d := l.h.ov.ScaleTimer(overload.ConnectionIdle, l.idleTimeout)
	return time.Duration(l.idleSince + int64(d) - now)
}

// armIdleLocked (mu held) resets the idle timer to fire left after now (a stamp).
func (l *h2Lifetime) armIdleLocked(now int64, left time.Duration) {
	l.idle.Reset(left)
	l.idleArmed, l.idleDue = true, now+int64(left)
}

// streamStarted and streamEnded bracket each stream the connection serves, for the idle
// timeout.
func (l *h2Lifetime) streamStarted() {
	l.mu.Lock()
	l.active++
	l.mu.Unlock()
}

func (l *h2Lifetime) streamEnded() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.active--; l.active == 0 && !l.stopped {
		now := l.h.sh.stamps.Now()
		l.idleSince = now
		// A pending timer due no later than the new idle period's end is left be, and
		// idleExpired sleeps on for what is left: a Reset each time a busy connection went
		// idle cost a runtime timer update. One due later (reduce_timeouts shortened the
		// timeout while the connection was busy) is moved.
		if left := l.idleLeft(now); !l.idleArmed || l.idleDue > now+int64(left) {
			l.armIdleLocked(now, left)
		}
	}
}

// idleExpired runs when the idle timeout may have passed: a connection still idle gets a
// graceful GOAWAY and closes.
func (l *h2Lifetime) idleExpired() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.idleArmed = false
	if l.stopped || l.goneAway || l.active > 0 {
		return
	}
	now := l.h.sh.stamps.Now()
	if left := l.idleLeft(now); left > 0 {
		l.armIdleLocked(now, left)
		return
	}
	l.h.stats.DownstreamCxIdleTimeout.Inc()
	l.goAwayLocked()
}

// left is the time until max_connection_duration ends, as reduce_timeouts scales it now.
func (l *h2Lifetime) left() time.Duration {
	d := l.h.ov.ScaleTimer(overload.ConnectionMax, l.h.cfg.MaxConnectionDuration)
	return l.start.Add(d).Sub(l.h.sh.deps.Now())
}

// rescale moves the duration's end, and an idle connection's idle timeout, when
// reduce_timeouts' scale changed.
func (l *h2Lifetime) rescale() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	if l.timer != nil && !l.expired {
		l.timer.Reset(l.left())
	}
	if l.idle != nil && l.active == 0 && !l.goneAway {
		now := l.h.sh.stamps.Now()
		l.armIdleLocked(now, max(l.idleLeft(now), 0))
	}
}

// expire runs when max_connection_duration ends.
func (l *h2Lifetime) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped || l.expired {
		return
	}
	l.expired = true
	l.h.stats.DownstreamCxMaxDurationReached.Inc()
	l.goAwayLocked()
	// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
	l.force = time.AfterFunc(l.h.cfg.DrainTimeout, l.closeConn)
}

// goAway starts the graceful shutdown of the connection (a listener drain).
func (l *h2Lifetime) goAway() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.goAwayLocked()
	}
}

func (l *h2Lifetime) goAwayLocked() {
	if l.goneAway {
		return
	}
	l.goneAway = true
	go l.c.shutdown() // it may write to the socket; not under the Handler's lock
}

// closeConn closes a connection still open drain_timeout after its GOAWAY.
func (l *h2Lifetime) closeConn() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.c.nc.Close()
	}
}

// stop disarms the timers once the connection is no longer served.
func (l *h2Lifetime) stop() {
	l.mu.Lock()
	l.stopped = true
	if l.timer != nil {
		l.timer.Stop()
	}
	if l.idle != nil {
		l.idle.Stop()
	}
	if l.force != nil {
		l.force.Stop()
	}
	l.mu.Unlock()
	l.h.mu.Lock()
	delete(l.h.h2lives, l)
	l.h.mu.Unlock()
}

// mono reads the monotonic clock the stream idle timer compares with (clock.Mono).
func mono() int64 { return clock.Mono() }

// monoOf is mono at at, a stamp of deps.Now the stream took anyway (shared.stamps): the same
// value when deps.Now is the system clock, whose stamps are mono's; else (a test's clock), or
// when at is zero, mono is read instead.
func (s *stream) monoOf(at int64) int64 {
	if !s.h.sh.stamps.System() || at == 0 {
		return mono()
	}
	return at
}

// streamIdle is stream_idle_timeout, or the route's idle_timeout. Envoy's timer runs for the
// whole stream and restarts on every byte received or sent, so it bounds the gaps of an
// upload, the wait for a response and the gaps of a streamed response, not their length:
// each body read and each response read records the time (an atomic store, no timer call),
// and the timer, when it fires, looks at the last activity and sleeps on until a whole
// timeout has passed without any. Then it ends the upstream attempt and the body's pending
// read (an expired read deadline on the socket or the HTTP/2 stream), and the stream answers
// as Envoy's connection manager does (requestBodyFailed): 408 "stream timeout" while the
// request is incomplete, 504 once it is complete, a reset once the response has started.
// It is armed when a request body is to be read (watchBody), else when the request is
// forwarded (forward); an attempt it may end before the route's timeout does has a context
// the abort ends (idleMayCut). reduce_timeouts scales it (HTTP_DOWNSTREAM_STREAM_IDLE).
// The timer is made once per pooled stream; mu orders its callback against disarm, after
// which it touches nothing. It is left pending when a stream ends: a stream armed while it is
// still due no later than the new timeout leaves it be (when it fires, expire sleeps on for
// what is left), so that a stream of a busy connection neither stops nor resets it (a Reset
// and a Stop in the runtime's timer heap cost about 560 instructions per request).
type streamIdle struct {
	s    *stream
	d    time.Duration // the timeout; zero: not armed for this stream
	last atomic.Int64  // mono of the last byte received or sent
	// fired: the timeout passed; the stream's answer is the timeout's whatever the upstream
	// attempt made of it (bodyFault).
	fired atomic.Bool
	// reqDone: the downstream request is complete (it has no body, or its end was read).
	reqDone atomic.Bool
	// writing: the stream's goroutine is writing the response to an HTTP/1 client
	// (h1writer.flush), which waits while the client does not read.
	writing atomic.Bool
	// stands: the stamp in last stands for the response body read under way, whose bytes came
	// with the head (h1writer.copyFrom sets it for that read; touchRead clears it). Only the
	// stream's goroutine uses it.
	stands bool

	mu    sync.Mutex // guards the fields below
	t     *time.Timer
	armed bool
	// writeCut: expire ended a write the client did not take with a past write deadline on
	// the connection, which therefore closes after the stream (cutWrite).
	writeCut bool
	// due is the mono time the pending timer fires at; zero when it is not pending.
	due int64
}

// arm starts the timer for a stream (d: its idle timeout) at now (mono); done: the request is
// complete.
func (i *streamIdle) arm(s *stream, d time.Duration, done bool, now int64) {
	i.fired.Store(false)
	i.reqDone.Store(done)
	i.mu.Lock()
	i.s, i.d, i.writeCut, i.stands = s, d, false, false
	i.last.Store(now)
	i.armed = true
	sleep := i.sleep(d)
	switch {
	case i.t == nil:
		// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
		i.t = time.AfterFunc(sleep, i.expire)
		i.due = now + int64(sleep)
	case i.due == 0 || i.due > now+int64(sleep):
		i.t.Reset(sleep)
		i.due = now + int64(sleep)
	}
	i.mu.Unlock()
}

// retime replaces the timeout of an armed timer (the route's idle_timeout overrides the
// connection manager's); zero disarms it.
func (i *streamIdle) retime(d time.Duration) {
	if i.d <= 0 || d == i.d {
		return
	}
	if d <= 0 {
		i.disarm()
		i.d = 0
		return
	}
	i.mu.Lock()
	i.d = d
	if i.armed {
		i.t.Reset(0) // expire recomputes from the last activity
		i.due = i.last.Load()
	}
	i.mu.Unlock()
}

// timeout is the timeout as reduce_timeouts scales it now.
func (i *streamIdle) timeout() time.Duration {
	return i.s.h.ov.ScaleTimer(overload.StreamIdle, i.d)
}

// sleep bounds one sleep of the timer: while reduce_timeouts may shorten the timeout, the
// timer looks again every eighth of it, so that a timeout shortened while the stream waits
// ends it at most that much late.
func (i *streamIdle) sleep(left time.Duration) time.Duration {
	if i.s.h.ov.ScalesTimer(overload.StreamIdle) {
		return min(left, max(i.d/8, time.Millisecond))
	}
	return left
}

// touchRead records the activity of a response body read: none when the last stamp stands
// for it (stands).
func (i *streamIdle) touchRead() {
	if i.stands {
		i.stands = false
		return
	}
	i.touch()
}

// touch records activity on the stream.
func (i *streamIdle) touch() {
	if i.d > 0 {
		i.last.Store(mono())
	}
}

// touchAt records activity on the stream at at, a stamp of deps.Now.
func (i *streamIdle) touchAt(at int64) {
	if i.d > 0 {
		i.last.Store(i.s.monoOf(at))
	}
}

// remaining is how long the stream may stay idle from now.
func (i *streamIdle) remaining() time.Duration { return i.remainingAt(mono()) }

// remainingAt is how long the stream may stay idle from now (mono).
func (i *streamIdle) remainingAt(now int64) time.Duration {
	return time.Duration(i.last.Load() + int64(i.timeout()) - now)
}

// cutWrite reports whether the timer ended a response write with the connection's write
// deadline: the connection cannot carry another response. The stream's goroutine calls it
// once the stream ended (disarm), which orders it after any expire, and only when fired is
// set (writeCut never is otherwise).
func (i *streamIdle) cutWrite() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.writeCut
}

// disarm ends the timer's watch: the stream ended. The timer stays pending for the next
// stream (see streamIdle); when it fires first, expire finds nothing armed.
func (i *streamIdle) disarm() {
	if i.d <= 0 {
		return
	}
	i.mu.Lock()
	i.armed = false
	i.mu.Unlock()
}

// expire runs on the timer's goroutine.
func (i *streamIdle) expire() {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.due = 0
	if !i.armed {
		return
	}
	if left := i.remaining(); left > 0 {
		sleep := i.sleep(left)
		i.t.Reset(sleep)
		i.due = mono() + int64(sleep)
		return
	}
	i.armed = false
	i.fired.Store(true)
	// The attempt ends too: its writer may be blocked on an upstream that does not read,
	// with no read of the client's body to wake, or it waits for a response that does not
	// come.
	i.s.ctx.abort()
	if s := i.s; i.writing.Load() {
		// The response waits on a client that does not read (Envoy's timer counts bytes
		// sent as activity, so a client that reads nothing for the timeout is the same
		// stall): end the write, which resets the stream. An HTTP/2 stream's deadline is
		// its own; an HTTP/1 connection's outlives the stream, so it closes after it.
		switch {
		case s.sc != nil:
			s.sc.nc.SetWriteDeadline(time.Unix(1, 0))
			i.writeCut = true
		case s.h2w != nil:
			s.h2w.SetWriteDeadline(time.Unix(1, 0))
		}
	}
	if i.reqDone.Load() {
		return // no body read to wake; the connection stays usable after a 504
	}
	switch s := i.s; {
	case s.sc != nil:
		s.sc.nc.SetReadDeadline(time.Unix(1, 0))
	case s.h2w != nil:
		s.h2w.SetReadDeadline(time.Unix(1, 0))
	}
}

// idleMayCut reports whether stream_idle_timeout may end an attempt starting at nowAt whose
// deadline is deadlineAt (stamps; zero: none) before the deadline does: the attempt then needs
// a context the timer's abort ends (the HTTP/1 pool abandons its socket), which costs an
// allocation, so attempts the route's timeout ends first do without. nowMono is mono at nowAt
// when the caller has it (armStreamIdle's), else 0.
func (s *stream) idleMayCut(deadlineAt, nowAt, nowMono int64) bool {
	if s.idle.d <= 0 {
		return false
	}
	if deadlineAt == 0 || s.h.ov.ScalesTimer(overload.StreamIdle) {
		return true
	}
	if nowMono == 0 {
		nowMono = s.monoOf(nowAt)
	}
	return s.idle.remainingAt(nowMono) < time.Duration(deadlineAt-nowAt)
}

// bodyClock is the request body as the stream reads it (for filters, the retry buffer or
// the upstream): its bytes restart stream_idle_timeout, and its end starts the route's
// timeout (deadlineCtx.resetAtEnd), as Envoy's timers do. A body with a content length ends
// with its last byte: the HTTP/1 upstream writer reads no further.
type bodyClock struct {
	r     io.Reader
	s     *stream
	read  int64
	ended bool
}

// watchBody wraps the stream's body (set before the call) in its clock and arms
// stream_idle_timeout for it.
func (s *stream) watchBody() {
	s.clock = bodyClock{r: s.body, s: s}
	s.body = &s.clock
	if d := s.h.cfg.StreamIdleTimeout; d > 0 {
		s.idle.arm(s, d, false, mono())
	}
}

func (b *bodyClock) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 {
		b.s.idle.touch()
		b.read += int64(n)
	}
	if !b.ended && (err == io.EOF || (b.s.contentLength >= 0 && b.read >= b.s.contentLength)) {
		b.ended = true
		b.s.reqEnd.Store(b.s.h.sh.stamps.Now()) // %REQUEST_DURATION%
		b.s.idle.reqDone.Store(true)            // the idle timer runs on, now for the response
		b.s.ctx.start()
	}
	return n, err
}
