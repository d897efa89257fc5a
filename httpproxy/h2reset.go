package httpproxy

import (
	"crypto/tls"
	"net"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"github.com/legateproxy/legate/accesslog"
)

// Runtime keys of the premature reset guard, with Envoy's defaults.
const (
	rtPrematureResetTotal    = "overload.premature_reset_total_stream_count"
	rtPrematureResetLifetime = "overload.premature_reset_min_stream_lifetime_seconds"
	defPrematureResetTotal   = 500
	defPrematureResetSeconds = 1
)

// resetGuard closes an HTTP/2 connection whose client resets most of its streams before
// they are answered (CVE-2023-44487, "rapid reset": a HEADERS and RST_STREAM pair costs the
// client two frames and the proxy a stream, its filters and perhaps an upstream request). As
// Envoy's connection manager does, every stream the handler finishes is counted, and a stream
// is premature when the client reset it before a response status was sent and its lifetime in
// whole seconds was not above the minimum. Once the connection has closed total streams, it
// is closed when at least half of them were premature; before that, as soon as the premature
// ones reach half of total, since the ratio can no longer fall below a half by then. The
// connection gets a GOAWAY (ENHANCE_YOUR_CALM) and is closed (Envoy aborts it without one).
//
// Two things make a reset stream cost next to nothing before the guard trips: a stream
// whose HEADERS and RST_STREAM frames are read together is refused before a handler starts
// for it (h2conn.launch), and a handler whose stream was reset before it ran, or before its
// upstream request started, does no more (resetUnserved, resetBeforeUpstream).
//
// Envoy's http.max_requests_per_io_cycle has no counterpart here, and its runtime key is
// not read: it defers the new streams of a connection beyond N per event loop iteration so
// that other connections on the same worker get their turn. Legate reads each connection on
// a goroutine of its own and runs every stream's handler on a goroutine of its own, so
// connections are not served in turns that one of them could monopolise: the Go scheduler
// shares the CPU between all of them, and what one connection can start is bounded by the
// streams it is granted (h2limits.go) and by this guard.
//
// The runtime keys are read when the connection starts; the counters are shared by the
// connection's handler goroutines and its reader.
type resetGuard struct {
	total     uint64
	lifetime  time.Duration // premature below it: (min seconds + 1) s, Envoy compares whole seconds
	closed    atomic.Uint64
	premature atomic.Uint64
	tripped   atomic.Bool
}

func (h *Handler) newResetGuard() resetGuard {
	total, secs := uint64(defPrematureResetTotal), uint64(defPrematureResetSeconds)
	if rt := h.sh.deps.Runtime; rt != nil {
		total, secs = rt(rtPrematureResetTotal, total), rt(rtPrematureResetLifetime, secs)
	}
	return resetGuard{total: max(total, 1), lifetime: time.Duration(min(secs, 1<<20)+1) * time.Second}
}

// streamClosed counts a finished stream and reports whether the connection must now close.
func (g *resetGuard) streamClosed(premature bool) bool {
	closed := g.closed.Add(1)
	bad := g.premature.Load()
	if premature {
		bad = g.premature.Add(1)
	}
	if closed < g.total {
		if bad*2 < g.total {
			return false
		}
	} else if bad*2 < closed {
		return false
	}
	return g.tripped.CompareAndSwap(false, true)
}

// streamEnded applies the guard to a stream the handler finished: reset tells whether its
// request context ended, responded whether a status was sent, start when it began.
func (c *h2conn) streamEnded(reset, responded bool, start time.Time) {
	premature := false
	if reset && !responded && !c.peerGone.Load() {
		premature = c.h.sh.deps.Now().Sub(start) < c.resets.lifetime
	}
	c.streamClosed(premature)
}

// streamClosed counts a closed stream and closes the connection when the guard says so.
func (c *h2conn) streamClosed(premature bool) {
	if c.resets.streamClosed(premature) {
		c.h.stats.DownstreamRqTooManyPrematureResets.Inc()
		c.calm(http2.ErrCodeEnhanceYourCalm)
	}
}

// resetUnserved accounts for a stream reset (or cut by the connection's end) before its
// handler started. It is counted as a request (downstream_rq_total, downstream_rq_rx_reset)
// and a premature reset, and nothing else is done for it: no filters, no route, no access
// log entry, so that each costs the proxy little more than it costs the client.
func (c *h2conn) resetUnserved() {
	st := c.h.stats
	st.DownstreamRqTotal.Inc()
	st.DownstreamRqHTTP2Total.Inc()
	c.streamCut()
	c.streamClosed(!c.peerGone.Load())
}

// resetOnArrival accounts for a stream whose HEADERS and RST_STREAM frames were read before
// its handler started (h2conn.launch): it is reset by the client before anything could be
// done for it, a premature reset, counted as a request (downstream_rq_total,
// downstream_rq_rx_reset) like Envoy's. It runs on the connection's reader.
func (c *h2conn) resetOnArrival() {
	st := c.h.stats
	st.DownstreamRqTotal.Inc()
	st.DownstreamRqHTTP2Total.Inc()
	st.DownstreamRqRxReset.Inc()
	c.streamClosed(true)
}

// calmLinger is how long a connection closed by the guard stays open after its GOAWAY and
// FIN, unread: closing a socket with unread bytes resets it and drops what it has not yet
// sent, the GOAWAY among them. Not reading makes the client's writes stall instead of
// costing the proxy more.
const calmLinger = 250 * time.Millisecond

// calm sends a GOAWAY with code (ENHANCE_YOUR_CALM for the premature reset guard, STREAM_CLOSED
// for a protocol error) naming the last stream the client opened, shuts the connection's
// write side and has its reader stop; later frames of handlers are dropped.
func (c *h2conn) calm(code http2.ErrCode) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.w.Buf = appendGoAway(c.w.Buf, c.maxStream.Load(), code)
	c.closing = true
	// Unlike a graceful end (h2conn.endWritesLocked), the write side is shut now, even under
	// a flush in progress, which may then lose the GOAWAY: a client resetting streams may
	// also not read, and a flush it holds blocked must not keep the connection open.
	c.flushLocked()
	if c.w.Err == nil {
		c.w.Err = errTooManyResets // frames queued from now on are dropped
	}
	c.mu.Unlock()
	c.shutWrite()
	// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
	c.calmAt = time.Now()
	c.draining.Store(true) // after calmAt, which linger reads
}

// linger waits until calmLinger has passed since the GOAWAY; it runs on the reader, which
// then closes the connection.
func (c *h2conn) linger() {
	// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
	time.Sleep(time.Until(c.calmAt.Add(calmLinger)))
}

// shutWriter returns what shuts the write side of nc (over the socket raw): a TLS
// close_notify first, then a FIN.
func shutWriter(nc, raw net.Conn) func() {
	return func() {
		if tc, ok := nc.(*tls.Conn); ok {
			tc.CloseWrite() // close_notify
		}
		if cw, ok := raw.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
	}
}

// resetBeforeUpstream reports an HTTP/2 stream its client reset before its upstream request
// started, and marks it unanswered: no host is picked and nothing is sent upstream for it, so
// that a client resetting streams as fast as it opens them cannot have the proxy start an
// upstream request (and, for HTTP/1 upstreams, a connection) per stream. The access log shows
// DR, as Envoy's for a stream the client reset.
func (s *stream) resetBeforeUpstream() bool {
	if s.h2req == nil || s.h2req.Context().Err() == nil {
		return false
	}
	s.gone = true
	s.flags |= accesslog.DownstreamRemoteReset
	s.details = "http2.remote_reset"
	return true
}
