package pool

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legateproxy/legate/breaker"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/internal/h2client"
)

// h2conn is one HTTP/2 upstream connection (prior knowledge, or TLS with ALPN "h2"). Its
// streams are multiplexed by internal/h2client; the pool bounds them with the
// max_requests circuit breaker. uc.rqActive counts its streams: taken under hp.mu when a
// stream is reserved (getH2), so that a timer deciding under hp.mu that the connection is
// idle cannot race a request about to use it.
type h2conn struct {
	uc *upConn
	cc *h2client.Conn
	// retired: no new streams (drain, health failure, max_requests_per_connection,
	// max_connection_duration); the connection closes when its last stream ends.
	retired atomic.Bool
	// idleSince is when the last stream ended (clock.Mono); guarded by hp.mu.
	idleSince int64
	// idle fires after idle_timeout, lifetime after max_connection_duration; nil when unset.
	idle, lifetime *time.Timer
}

// newH2Config returns the HTTP/2 client settings of one cluster's connections, from its
// http2_protocol_options. Each stream's receive window is at most the cluster's
// per_connection_buffer_limit_bytes: window returns as the body is read, so a response the
// downstream does not read stops its upstream once that much waits here (Envoy's
// initial_stream_window_size defaults to 256 MiB).
func newH2Config(bufferLimit int, head headLimits, o config.UpstreamHTTP2Options) h2client.Config {
	window := bufferLimit
	if w := int(o.InitialStreamWindowSize); w > 0 && w < window {
		window = w
	}
	cfg := h2client.Config{
		StreamWindow:    int32(min(window, math.MaxInt32)),
		ConnWindow:      int32(min(o.InitialConnectionWindowSize, math.MaxInt32)),
		HeaderTableSize: o.HpackTableSize,
		// checkH2Head applies max_response_headers_kb with its own message; the connection's
		// bound only keeps a hostile head from growing without end.
		MaxHeaderBytes: 2*head.bytes + 4<<10,
		PingInterval:   o.KeepaliveInterval,
		PingTimeout:    o.KeepaliveTimeout,
	}
	if cfg.PingInterval > 0 && cfg.PingTimeout <= 0 {
		cfg.PingTimeout = 15 * time.Second // x/net's default, which Legate's earlier client had
	}
	return cfg
}

// startTimers arms the idle and lifetime timers of a new connection.
func (c *h2conn) startTimers() {
	m := c.uc.hp.m
	c.idleSince = clock.Mono()
	if m.idleTimeout > 0 {
		// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
		c.idle = time.AfterFunc(m.idleTimeout, c.idleExpired)
	}
	if m.maxDuration > 0 {
		// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
		c.lifetime = time.AfterFunc(m.maxDuration, c.durationReached)
	}
}

// retire stops new streams and closes the connection now when it has none.
func (c *h2conn) retire() {
	c.retired.Store(true)
	if c.uc.rqActive.Load() == 0 {
		c.close(true)
	}
}

// close closes the connection and records its end.
func (c *h2conn) close(local bool) {
	if c.idle != nil {
		c.idle.Stop()
	}
	if c.lifetime != nil {
		c.lifetime.Stop()
	}
	c.cc.Close()
	c.uc.shut(local)
}

// endStream ends one stream of the connection: the last one starts its idle time and closes
// it when it is retired or its pool drains.
func (c *h2conn) endStream() {
	hp := c.uc.hp
	hp.mu.Lock()
	last := c.uc.rqActive.Add(-1) == 0
	hp.h2wait.signal()
	if last {
		c.idleSince = clock.Mono()
	}
	closing := last && (c.retired.Load() || hp.draining.Load())
	hp.mu.Unlock()
	if closing {
		c.close(true)
	}
}

// idleExpired runs when the idle timer fires: a connection without streams for the whole
// idle_timeout is closed (upstream_cx_idle_timeout); otherwise the timer is re-armed for the
// time left.
func (c *h2conn) idleExpired() {
	hp := c.uc.hp
	hp.mu.Lock()
	if c.uc.closed.Load() || c.retired.Load() || !idleDue(c.idle, c.uc.rqActive.Load() > 0, c.idleSince, hp.m.idleTimeout) {
		hp.mu.Unlock()
		return
	}
	c.retired.Store(true)
	hp.dropH2Locked(c)
	hp.mu.Unlock()
	hp.m.st.UpstreamCxIdleTimeout.Inc()
	c.close(true)
}

// durationReached runs at max_connection_duration: the connection takes no new stream
// (upstream_cx_max_duration_reached) and closes now if it has none, else when its last ends.
func (c *h2conn) durationReached() {
	hp := c.uc.hp
	hp.mu.Lock()
	if c.uc.closed.Load() {
		hp.mu.Unlock()
		return
	}
	c.retired.Store(true)
	idle := c.uc.rqActive.Load() == 0
	if idle {
		hp.dropH2Locked(c)
	}
	hp.mu.Unlock()
	hp.m.st.UpstreamCxMaxDurationReached.Inc()
	if idle {
		c.close(true)
	}
}

// dropH2Locked removes c from the pool's HTTP/2 connections. hp.mu is held.
func (hp *hostPool) dropH2Locked(c *h2conn) {
	for i, x := range hp.h2 {
		if x == c {
			hp.h2 = slices.Delete(hp.h2, i, i+1)
			return
		}
	}
}

// getH2 returns a connection with a reserved stream slot, connecting when none has room.
func (hp *hostPool) getH2(ctx context.Context, prio *breaker.Priority) (*h2conn, error) {
	for {
		if hp.alpn.Load() == alpnHTTP1 {
			return nil, errSpeaksHTTP1 // a dial this request waited for negotiated HTTP/1.1
		}
		hp.mu.Lock()
		if hp.draining.Load() {
			hp.mu.Unlock()
			return nil, ErrClosed
		}
		var dead []*h2conn
		var open *h2conn
		keep := hp.h2[:0]
		for _, c := range hp.h2 {
			if c.cc.Closed() {
				dead = append(dead, c)
				continue
			}
			keep = append(keep, c)
			if !c.cc.Closing() && !c.retired.Load() && open == nil {
				open = c
			}
		}
		clear(hp.h2[len(keep):])
		hp.h2 = keep
		seen := hp.h2wait.generation()
		var got *h2conn
		for _, c := range hp.h2 {
			// max_concurrent_streams caps the streams Legate opens on a connection, whatever the
			// upstream allows; rqActive only grows under hp.mu, so the check holds.
			if !c.retired.Load() && c.uc.rqActive.Load() < hp.m.h2Streams && c.cc.Reserve() {
				got = c
				got.uc.rqActive.Add(1)
				break
			}
		}
		wait := hp.h2dial
		var claim chan struct{}
		if got == nil && wait == nil { // this request establishes the next connection
			claim = make(chan struct{})
			hp.h2dial = claim
		}
		hp.mu.Unlock()
		for _, c := range dead {
			c.uc.shut(false)
		}
		if got != nil {
			return got, nil
		}
		if wait != nil {
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		c, err := hp.dialH2(ctx, prio, open, seen)
		hp.mu.Lock()
		hp.h2dial = nil
		hp.mu.Unlock()
		close(claim)
		if err == errSlotFreed {
			continue
		}
		return c, err
	}
}

// dialH2 establishes a new HTTP/2 connection while the caller holds the hp.h2dial claim.
// Without a max_connections unit, when the pool has a connection whose streams are all taken
// (open), the request waits as a pending request (max_pending_requests bounds it) until a
// stream ends or a connection goes, as Envoy queues it, and returns errSlotFreed for the
// caller to look again; seen is the wake-up generation the caller's look saw.
func (hp *hostPool) dialH2(ctx context.Context, prio *breaker.Priority, open *h2conn, seen uint64) (*h2conn, error) {
	st := hp.m.st
	if prio.Connections.TryAcquire() != nil {
		st.UpstreamCxOverflow.Inc()
		if open == nil {
			return nil, hp.m.errCxOverflow
		}
		if err := hp.m.pendingStart(prio); err != nil {
			return nil, err
		}
		defer hp.m.pendingEnd(prio)
		return nil, hp.h2wait.await(ctx, seen)
	}
	if err := hp.m.pendingStart(prio); err != nil {
		prio.Connections.Release()
		return nil, err
	}
	defer hp.m.pendingEnd(prio)
	uc, err := hp.connect(ctx, hp.alpnFor(HTTP2), &prio.Connections, hp.origin())
	if err != nil {
		return nil, err
	}
	if hp.m.cfg.AutoHTTP {
		if negotiated(uc.Conn) != "h2" {
			hp.alpn.Store(alpnHTTP1)
			hp.adoptH1(uc)
			return nil, errSpeaksHTTP1
		}
		hp.alpn.Store(alpnHTTP2)
	}
	if p := negotiated(uc.Conn); p != "" && p != "h2" {
		uc.shut(true)
		st.UpstreamCxProtocolError.Inc()
		return nil, protocolError("%s: ALPN negotiated %q; want h2", hp.host.Address(), p)
	}
	cc, err := h2client.New(uc, hp.m.h2)
	if err != nil {
		uc.shut(true)
		return nil, fmt.Errorf("%w: %s: %w", ErrConnectFailure, hp.host.Address(), err)
	}
	st.UpstreamCxHTTP2Total.Inc()
	c := &h2conn{uc: uc, cc: cc}
	reserved := cc.Reserve()
	hp.mu.Lock()
	c.startTimers()
	hp.h2 = append(hp.h2, c)
	if reserved {
		c.uc.rqActive.Add(1)
	}
	hp.mu.Unlock()
	if !reserved {
		return nil, fmt.Errorf("%w: %s: new HTTP/2 connection has no stream", ErrReset, hp.host.Address())
	}
	return c, nil
}

// adoptH1 makes a connection dialled for HTTP/2 that negotiated HTTP/1.1 (auto_config) an
// idle HTTP/1.1 connection, for the exchange that dialled it or one waiting.
func (hp *hostPool) adoptH1(uc *upConn) {
	hp.m.st.UpstreamCxHTTP1Total.Inc()
	c := newH1(uc)
	hp.mu.Lock()
	hp.h1[c] = struct{}{}
	hp.mu.Unlock()
	hp.releaseH1(c, true)
}

// h2body is the body of an HTTP/2 response; it notes whether it was read to its end and
// hands the trailers to the Response at the end. It lives in the Response (h2b), which the
// caller reuses, so that an exchange allocates none.
type h2body struct {
	s       *h2client.Stream
	c       *h2conn
	resp    *Response
	reqBody *h2RequestBody // nil without a request body
	done    bool
	err     error
}

func (b *h2body) Read(p []byte) (int, error) {
	n, err := b.s.Read(p)
	if err == io.EOF {
		if !b.done {
			if raw, lens := b.s.RawTrailer(); len(lens) > 0 {
				b.resp.traw = append(b.resp.traw, raw...)
				b.resp.lens = append(b.resp.lens, lens...)
				b.resp.finishTrailer()
			}
		}
		b.done = true
	} else if err != nil {
		b.err = err
	}
	return n, err
}

// h2RequestBody is what the connection's body sender reads a request body through. The
// sender is a goroutine of its own, which may still wait in a read (a client that paused its
// upload) when the exchange is over: the upstream answered early, or the stream was reset.
// end interrupts such a read (Request.InterruptBody), waits for it, and refuses later reads,
// so that once the exchange ends the caller alone reads the body again.
type h2RequestBody struct {
	mu          sync.Mutex // held through each read; guards ended
	body        requestBody
	ended       bool
	eof         atomic.Bool // the body was read to its end: nothing to interrupt
	interrupt   func()      // Request.InterruptBody; may be nil
	interrupted atomic.Bool
}

// errBodyEnded is what the sender reads from a request body once its exchange is over.
var errBodyEnded = errors.New("request body read after its exchange ended")

func (b *h2RequestBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended {
		return 0, errBodyEnded
	}
	n, err := b.body.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

// end ends the body's use by the sender: a read waiting for the client is interrupted and
// waited for. b may be nil (no request body).
func (b *h2RequestBody) end() {
	if b == nil {
		return
	}
	if !b.eof.Load() && b.interrupt != nil && b.interrupted.CompareAndSwap(false, true) {
		b.interrupt()
	}
	b.mu.Lock()
	b.ended = true
	b.mu.Unlock()
}

// untouched reports whether nothing of the body was read: an exchange the upstream did not
// process can then be sent again. b may be nil.
func (b *h2RequestBody) untouched() bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.body.read == 0
}

// maxUnprocessedRetries bounds how often an exchange the upstream did not process (GOAWAY,
// REFUSED_STREAM) is sent again on another connection.
const maxUnprocessedRetries = 2

// roundTripH2 runs one exchange on an HTTP/2 connection. One the upstream did not process
// is sent again on another connection when nothing of its body was read.
func (ex *exchange) roundTripH2(ctx context.Context, req *Request, resp *Response) error {
	for attempt := 0; ; attempt++ {
		retry, err := ex.tryH2(ctx, req, resp)
		if !retry || attempt == maxUnprocessedRetries {
			return err
		}
	}
}

// tryH2 is one attempt of roundTripH2; retry reports an exchange the upstream did not
// process and that may be sent again.
func (ex *exchange) tryH2(ctx context.Context, req *Request, resp *Response) (retry bool, err error) {
	hp := ex.hp
	c, err := hp.getH2(ctx, ex.prio)
	if err != nil {
		return false, err
	}
	n := c.uc.requests.Add(1)
	if mr := hp.m.maxRequests; mr > 0 && n >= mr {
		c.retired.Store(true) // closed when its last stream ends
		hp.m.st.UpstreamCxMaxRequests.Inc()
	}
	hr, reqBody, err := ex.h2Request(req, c.uc.Conn, &resp.h2req)
	if err != nil {
		c.cc.Unreserve()
		c.endStream()
		return false, err
	}
	s, err := c.cc.Open(ctx, hr)
	if err == nil {
		if hp.m.streamDuration > 0 {
			ex.clock = hp.m.startClock(s.CancelFunc())
		}
		err = s.AwaitHead()
	}
	if err != nil {
		if s != nil {
			s.Close()
		}
		reqBody.end()
		c.endStream()
		return ex.h2Failed(ctx, err, reqBody)
	}
	raw, lens := s.RawHead()
	if err := checkH2Head(raw, lens, hp.host.Address(), hp.m.head); err != nil {
		s.Close() // resets the stream
		ex.clock.stop()
		reqBody.end()
		hp.m.st.UpstreamRqTxReset.Inc()
		c.endStream()
		return false, err
	}
	resp.reset()
	resp.StatusCode = s.Status()
	resp.HTTP2 = true
	resp.ProtoMinor = 0
	resp.ContentLength = s.ContentLength()
	resp.raw = append(resp.raw, raw...)
	resp.lens = append(resp.lens, lens...)
	resp.finishHeader()
	resp.h2b = h2body{s: s, c: c, resp: resp, reqBody: reqBody}
	resp.Body = &resp.h2b
	ex.h2 = &resp.h2b
	return false, nil
}

// h2Failed maps the error of an exchange that got no response head, and reports whether it
// may be sent again.
func (ex *exchange) h2Failed(ctx context.Context, err error, reqBody *h2RequestBody) (bool, error) {
	hp := ex.hp
	addr := hp.host.Address()
	if ex.clock.stop() {
		hp.m.st.UpstreamRqTxReset.Inc()
		return false, expired(addr)
	}
	if errors.Is(err, ErrRequestBody) {
		return false, err // the stream was reset for the client's body, not the host's doing
	}
	if err := ctx.Err(); err != nil {
		if err == context.Canceled { //nolint:errorlint // the context's own error
			hp.m.st.UpstreamRqTxReset.Inc() // the downstream went away: the stream was reset
		}
		return false, fmt.Errorf("upstream request to %s: %w", addr, err)
	}
	if errors.Is(err, h2client.ErrUnprocessed) && reqBody.untouched() {
		return true, fmt.Errorf("%w: %s: %w", ErrReset, addr, err)
	}
	hp.m.st.UpstreamRqRxReset.Inc()
	return false, fmt.Errorf("%w: %s: %w", ErrReset, addr, err)
}

// h2Request fills hr (the Response's, reused) for req. A body gets an h2RequestBody of its
// own: the sender of an earlier exchange may still hold the last one.
func (ex *exchange) h2Request(req *Request, conn net.Conn, hr *h2client.Request) (*h2client.Request, *h2RequestBody, error) {
	path := req.Path
	if path == "" {
		path = "/"
	}
	if !strings.HasPrefix(path, "/") && path != "*" {
		return nil, nil, fmt.Errorf("request path %q: must start with \"/\"", path)
	}
	*hr = h2client.Request{Method: req.Method, Scheme: "http", Authority: req.Host, Path: path, Header: req.Header}
	if hr.Authority == "" {
		hr.Authority = ex.hp.host.Address()
	}
	if negotiatedTLS(conn) {
		hr.Scheme = "https"
	}
	if req.Body == nil || req.ContentLength == 0 {
		return hr, nil, nil
	}
	body := &h2RequestBody{body: requestBody{r: req.Body, length: req.ContentLength}, interrupt: req.InterruptBody}
	hr.Body, hr.ContentLength, hr.Trailer = body, req.ContentLength, req.Trailer
	return hr, body, nil
}

// checkH2Head applies to an HTTP/2 response head the limits HTTP/1 responses have
// (max_headers_count fields, max_response_headers_kb of names and values).
func checkH2Head(raw []byte, lens [][2]int32, addr string, lim headLimits) error {
	n, size := len(lens), len(":status")+3+len(raw)
	switch {
	case n > lim.fields:
		return protocolError("%s: HTTP/2 response with %d header fields; more than %d (max_headers_count)", addr, n, lim.fields)
	case size > lim.bytes:
		return protocolError("%s: HTTP/2 response header list of %d bytes; more than %d (max_response_headers_kb)", addr, size, lim.bytes)
	}
	return nil
}

func lower(b []byte) {
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 0x20
		}
	}
}

func negotiatedTLS(conn net.Conn) bool {
	_, ok := conn.(*tls.Conn)
	return ok
}

// finishH2 ends an HTTP/2 exchange at Response.Close, at end (a stamp; zero: now).
func (ex *exchange) finishH2(end int64) error {
	b, hp := ex.h2, ex.hp
	cut := ex.clock.stop() // max_stream_duration reset the stream
	complete := b.done
	b.s.Close() // resets the stream when the body was not read to its end
	b.reqBody.end()
	o := outcomeComplete
	switch {
	case complete:
	case errors.Is(b.err, ErrRequestBody):
		o = outcomeDownstream
	default:
		o = outcomeError
		if b.err != nil && !errors.Is(b.err, context.Canceled) && !cut {
			hp.m.st.UpstreamRqRxReset.Inc()
		} else {
			hp.m.st.UpstreamRqTxReset.Inc()
		}
	}
	b.c.endStream()
	ex.endedAt(o, ex.status, end)
	return nil
}

// errSlotFreed tells getH2 that a stream or a connection it waited for has gone: look again.
var errSlotFreed = errors.New("an HTTP/2 stream slot was freed")

// streamWait is a wake-up for requests waiting for an HTTP/2 stream slot: a generation that
// every freed slot or connection advances, and a channel closed when it does.
type streamWait struct {
	mu  sync.Mutex
	gen uint64
	ch  chan struct{} // made by the first waiter of a generation
}

func (w *streamWait) generation() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gen
}

// signal advances the generation and wakes its waiters.
func (w *streamWait) signal() {
	w.mu.Lock()
	w.gen++
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
	w.mu.Unlock()
}

// await returns errSlotFreed once the generation has moved past seen, or ctx's error.
func (w *streamWait) await(ctx context.Context, seen uint64) error {
	w.mu.Lock()
	if w.gen != seen {
		w.mu.Unlock()
		return errSlotFreed
	}
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	ch := w.ch
	w.mu.Unlock()
	select {
	case <-ch:
		return errSlotFreed
	case <-ctx.Done():
		return ctx.Err()
	}
}
