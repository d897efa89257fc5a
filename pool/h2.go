package pool

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"

	"github.com/legateproxy/legate/breaker"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/http1"
)

// h2conn is one HTTP/2 upstream connection (prior knowledge, or TLS with ALPN "h2"). Its
// streams are multiplexed by golang.org/x/net/http2; the pool bounds them with the
// max_requests circuit breaker. uc.rqActive counts its streams: taken under hp.mu when a
// stream is reserved (getH2), so that a timer deciding under hp.mu that the connection is
// idle cannot race a request about to use it.
type h2conn struct {
	uc *upConn
	cc *http2.ClientConn
	// retired: no new streams (drain, health failure, max_requests_per_connection,
	// max_connection_duration); the connection closes when its last stream ends.
	retired atomic.Bool
	// idleSince is when the last stream ended (UnixNano); guarded by hp.mu.
	idleSince int64
	// idle fires after idle_timeout, lifetime after max_connection_duration; nil when unset.
	idle, lifetime *time.Timer
}

// newH2Transport returns the HTTP/2 client the pools of one cluster share, with the
// cluster's http2_protocol_options. Each stream's receive window is at most the cluster's
// per_connection_buffer_limit_bytes: x/net/http2 returns window as the body is read, so a
// response the downstream does not read stops its upstream once that much waits here
// (x/net's own default is 4 MiB a stream, Envoy's initial_stream_window_size 256 MiB).
func newH2Transport(bufferLimit int, o config.UpstreamHTTP2Options) (*http2.Transport, error) {
	window := bufferLimit
	if w := int(o.InitialStreamWindowSize); w > 0 && w < window {
		window = w
	}
	t1 := &http.Transport{HTTP2: &http.HTTP2Config{
		MaxReceiveBufferPerStream:     window,
		MaxReceiveBufferPerConnection: int(o.InitialConnectionWindowSize),
		MaxDecoderHeaderTableSize:     int(o.HpackTableSize),
		SendPingTimeout:               o.KeepaliveInterval,
		PingTimeout:                   o.KeepaliveTimeout,
	}}
	t2, err := http2.ConfigureTransports(t1)
	if err != nil {
		return nil, err
	}
	t2.AllowHTTP = true
	return t2, nil
}

// startTimers arms the idle and lifetime timers of a new connection.
func (c *h2conn) startTimers() {
	m := c.uc.hp.m
	// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
	c.idleSince = time.Now().UnixNano()
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
	if last {
		// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
		c.idleSince = time.Now().UnixNano()
	}
	closing := last && (c.retired.Load() || hp.draining)
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
		if hp.draining {
			hp.mu.Unlock()
			return nil, ErrClosed
		}
		var dead []*h2conn
		var open *h2conn
		keep := hp.h2[:0]
		for _, c := range hp.h2 {
			s := c.cc.State()
			if s.Closed {
				dead = append(dead, c)
				continue
			}
			keep = append(keep, c)
			if !s.Closing && !c.retired.Load() && open == nil {
				open = c
			}
		}
		clear(hp.h2[len(keep):])
		hp.h2 = keep
		var got *h2conn
		for _, c := range hp.h2 {
			// max_concurrent_streams caps the streams Legate opens on a connection, whatever the
			// upstream allows; rqActive only grows under hp.mu, so the check holds.
			if !c.retired.Load() && c.uc.rqActive.Load() < hp.m.h2Streams && c.cc.ReserveNewRequest() {
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
		c, err := hp.dialH2(ctx, prio, open)
		hp.mu.Lock()
		hp.h2dial = nil
		hp.mu.Unlock()
		close(claim)
		return c, err
	}
}

// dialH2 establishes a new HTTP/2 connection while the caller holds the hp.h2dial claim.
// Without a max_connections unit it falls back to open, an existing connection whose
// RoundTrip waits for a free stream.
func (hp *hostPool) dialH2(ctx context.Context, prio *breaker.Priority, open *h2conn) (*h2conn, error) {
	st := hp.m.st
	if prio.Connections.TryAcquire() != nil {
		st.UpstreamCxOverflow.Inc()
		if open != nil {
			hp.mu.Lock()
			open.uc.rqActive.Add(1)
			hp.mu.Unlock()
			return open, nil
		}
		return nil, hp.m.errCxOverflow
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
	cc, err := hp.m.h2.NewClientConn(uc)
	if err != nil {
		uc.shut(true)
		return nil, fmt.Errorf("%w: %s: %w", ErrConnectFailure, hp.host.Address(), err)
	}
	st.UpstreamCxHTTP2Total.Inc()
	c := &h2conn{uc: uc, cc: cc}
	reserved := cc.ReserveNewRequest()
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
// hands the trailers http2 collected to the Response at the end.
type h2body struct {
	rc      io.ReadCloser
	c       *h2conn
	trailer *http.Header // the http.Response's Trailer, filled by http2 before io.EOF
	resp    *Response
	reqBody *h2RequestBody // nil without a request body
	done    atomic.Bool
	err     error
}

func (b *h2body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		if !b.done.Load() && len(*b.trailer) > 0 {
			for k, vs := range *b.trailer {
				for _, v := range vs {
					b.resp.addTrailer([]byte(k), []byte(v))
				}
			}
			b.resp.finishTrailer()
		}
		b.done.Store(true)
	} else if err != nil {
		b.err = err
	}
	return n, err
}

// requestTrailer is the body of an HTTP/2 request with trailers: at the body's end it copies
// the caller's trailer fields into the request http2 sends them from (http2 reads
// http.Request.Trailer after the body has returned io.EOF, on the goroutine reading it).
// Strings are copied for the reason httpRequest gives.
type requestTrailer struct {
	r      *h2RequestBody
	src    http.Header
	dst    http.Header
	copied bool
}

func (t *requestTrailer) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err == io.EOF && !t.copied {
		t.copied = true
		for k, vs := range t.src {
			if len(vs) == 0 || !sendableTrailer(k) {
				continue
			}
			k = http.CanonicalHeaderKey(strings.Clone(k))
			t.dst[k] = t.dst[k][:0]
			for _, v := range vs {
				t.dst[k] = append(t.dst[k], strings.Clone(v))
			}
		}
	}
	return n, err
}

// sendableTrailer reports whether a field may be sent as a trailer (RFC 9110 §6.5.1: not
// framing, routing, authentication or connection fields).
func sendableTrailer(k string) bool {
	return httpguts.ValidTrailerHeader(k) && !isHopByHop(k)
}

// declareTrailers announces in hr.Trailer (keys with no values yet) the trailer fields
// known before the body is sent: the keys of trailer and those a "trailer" header lists.
// http2 sends them in the request's "trailer" header; an HTTP/2 server passes a handler
// only the trailers declared there.
func declareTrailers(hr *http.Request, trailer http.Header, header []Field) {
	for k := range trailer {
		if sendableTrailer(k) {
			hr.Trailer[http.CanonicalHeaderKey(strings.Clone(k))] = nil
		}
	}
	for _, f := range header {
		if !http1.EqualFold(f.Name, "trailer") {
			continue
		}
		for k := range strings.SplitSeq(f.Value, ",") {
			if k = strings.TrimSpace(k); k != "" && sendableTrailer(k) {
				hr.Trailer[http.CanonicalHeaderKey(strings.Clone(k))] = nil
			}
		}
	}
}

func (t *requestTrailer) Close() error { return t.r.Close() }

// h2RequestBody is what http2 reads a request body through. http2 reads it on a goroutine of
// its own, which may still wait in a read (a client that paused its upload) when the
// exchange is over: the upstream answered early, or the stream was reset. Close (http2 is
// done with the body) and end (the exchange is over) interrupt such a read
// (Request.InterruptBody); end also waits for it and refuses later reads, so that once the
// exchange ends the caller alone reads the body again.
type h2RequestBody struct {
	mu          sync.Mutex // held through each read; guards ended
	body        requestBody
	ended       bool
	eof         atomic.Bool // the body was read to its end: nothing to interrupt
	interrupt   func()      // Request.InterruptBody; may be nil
	interrupted atomic.Bool
}

// errBodyEnded is what http2 reads from a request body once its exchange is over.
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

// Close is called by http2 when it no longer needs the body, maybe while a read waits.
func (b *h2RequestBody) Close() error {
	b.stopRead()
	return nil
}

func (b *h2RequestBody) stopRead() {
	if !b.eof.Load() && b.interrupt != nil && b.interrupted.CompareAndSwap(false, true) {
		b.interrupt()
	}
}

// end ends the body's use by http2: a read waiting for the client is interrupted and waited
// for. b may be nil (no request body).
func (b *h2RequestBody) end() {
	if b == nil {
		return
	}
	b.stopRead()
	b.mu.Lock()
	b.ended = true
	b.mu.Unlock()
}

// roundTripH2 runs one exchange on an HTTP/2 connection.
func (ex *exchange) roundTripH2(ctx context.Context, req *Request, resp *Response) error {
	hp := ex.hp
	c, err := hp.getH2(ctx, ex.prio)
	if err != nil {
		return err
	}
	n := c.uc.requests.Add(1)
	if mr := hp.m.maxRequests; mr > 0 && n >= mr {
		c.retired.Store(true) // closed when its last stream ends
		hp.m.st.UpstreamCxMaxRequests.Inc()
	}
	hr, reqBody, err := httpRequest(ctx, req, hp.host.Address(), c.uc.Conn)
	if err != nil {
		c.endStream()
		return err
	}
	if hp.m.streamDuration > 0 {
		cancel := make(chan struct{})
		hr.Cancel = cancel //nolint:staticcheck // x/net/http2 resets the stream when it closes, with no context to derive (see cancelWith)
		ex.clock = hp.m.startClock(func() { close(cancel) })
	}
	res, err := c.cc.RoundTrip(hr)
	if err != nil {
		reqBody.end()
		c.endStream()
		if ex.clock.stop() {
			hp.m.st.UpstreamRqTxReset.Inc()
			return expired(hp.host.Address())
		}
		if errors.Is(err, ErrRequestBody) {
			return err // http2 reset the stream; the client's doing, not the host's
		}
		if err := ctx.Err(); err != nil {
			if err == context.Canceled { //nolint:errorlint // the context's own error
				hp.m.st.UpstreamRqTxReset.Inc() // the downstream went away: http2 reset the stream
			}
			return fmt.Errorf("upstream request to %s: %w", hp.host.Address(), err)
		}
		hp.m.st.UpstreamRqRxReset.Inc()
		return fmt.Errorf("%w: %s: %w", ErrReset, hp.host.Address(), err)
	}
	if err := checkH2Head(res.Header, hp.host.Address(), hp.m.head); err != nil {
		res.Body.Close() // resets the stream
		ex.clock.stop()
		reqBody.end()
		hp.m.st.UpstreamRqTxReset.Inc()
		c.endStream()
		return err
	}
	resp.reset()
	resp.StatusCode = res.StatusCode
	resp.HTTP2 = true
	resp.ProtoMinor = 0
	resp.ContentLength = res.ContentLength
	for k, vs := range res.Header {
		for _, v := range vs {
			resp.raw = append(resp.raw, k...)
			lower(resp.raw[len(resp.raw)-len(k):])
			resp.raw = append(resp.raw, v...)
			resp.lens = append(resp.lens, [2]int32{int32(len(k)), int32(len(v))})
		}
	}
	resp.finishHeader()
	b := &h2body{rc: res.Body, c: c, trailer: &res.Trailer, resp: resp, reqBody: reqBody}
	resp.Body = b
	ex.h2 = b
	return nil
}

// checkH2Head applies to an HTTP/2 response head the limits HTTP/1 responses have
// (max_headers_count fields, max_response_headers_kb of names and values).
func checkH2Head(h http.Header, addr string, lim headLimits) error {
	n, size := 0, len(":status")+3
	for k, vs := range h {
		n += len(vs)
		for _, v := range vs {
			size += len(k) + len(v)
		}
	}
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

// httpRequest converts req for golang.org/x/net/http2.
//
// Every string handed to http2 is copied first, into one allocation: the caller may reuse the
// memory behind req's strings once RoundTrip returns (the connection manager slices them from
// per-stream buffers), while http2's HPACK encoder keeps header names and values in its
// dynamic table for the connection's lifetime. A reused value corrupts the table (seen as
// "hpack: id (10) <= evictCount" panics under h2load, and wrong headers on later requests).
func httpRequest(ctx context.Context, req *Request, authority string, conn net.Conn) (*http.Request, *h2RequestBody, error) {
	scheme := "http"
	if negotiatedTLS(conn) {
		scheme = "https"
	}
	path := req.Path
	if path == "" {
		path = "/"
	}
	host := req.Host
	if host == "" {
		host = authority
	}
	if !strings.HasPrefix(path, "/") && path != "*" {
		return nil, nil, fmt.Errorf("request path %q: must start with \"/\"", path)
	}
	n := len(path) + len(host)
	for _, f := range req.Header {
		n += len(f.Name) + len(f.Value)
	}
	var cp strings.Builder
	cp.Grow(n)
	path, host = copyString(&cp, path), copyString(&cp, host)
	hr := &http.Request{
		Method:        req.Method,
		URL:           &url.URL{Scheme: scheme, Host: host, Opaque: path},
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Host:          host,
		Header:        make(http.Header, len(req.Header)+1),
		ContentLength: max(req.ContentLength, 0),
	}
	var body *h2RequestBody
	if req.Body != nil {
		body = &h2RequestBody{body: requestBody{r: req.Body, length: req.ContentLength}, interrupt: req.InterruptBody}
		hr.Body = body
		if req.Trailer != nil {
			hr.Trailer = make(http.Header, len(req.Trailer))
			declareTrailers(hr, req.Trailer, req.Header)
			hr.Body = &requestTrailer{r: body, src: req.Trailer, dst: hr.Trailer}
		}
		if req.ContentLength < 0 {
			hr.ContentLength = -1
		}
	}
	for _, f := range req.Header {
		if isFramingHeader(f.Name) || isHopByHop(f.Name) || (hr.Trailer != nil && http1.EqualFold(f.Name, "trailer")) {
			continue // http2 announces the trailers it sends itself
		}
		k := http.CanonicalHeaderKey(copyString(&cp, f.Name))
		hr.Header[k] = append(hr.Header[k], copyString(&cp, f.Value))
	}
	if _, ok := hr.Header["User-Agent"]; !ok {
		hr.Header["User-Agent"] = nil // Envoy adds none; x/net/http2 would add Go's
	}
	return hr.WithContext(ctx), body, nil
}

// copyString appends s to b and returns the copy. b was grown to hold every string copied
// into it, so it never reallocates and the bytes behind each returned string, once written,
// are never written again.
func copyString(b *strings.Builder, s string) string {
	b.WriteString(s)
	all := b.String()
	return all[len(all)-len(s):]
}

// isHopByHop reports the connection-specific headers HTTP/2 forbids.
func isHopByHop(name string) bool {
	for _, h := range [...]string{"connection", "keep-alive", "proxy-connection", "upgrade"} {
		if http1.EqualFold(name, h) {
			return true
		}
	}
	return false
}

func negotiatedTLS(conn net.Conn) bool {
	_, ok := conn.(*tls.Conn)
	return ok
}

// finishH2 ends an HTTP/2 exchange at Response.Close.
func (ex exchange) finishH2() error {
	b, hp := ex.h2, ex.hp
	cut := ex.clock.stop() // max_stream_duration reset the stream
	complete := b.done.Load()
	b.rc.Close() // resets the stream when the body was not read to its end
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
	ex.ended(o, ex.status)
	return nil
}
