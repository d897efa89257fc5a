package httpproxy

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/h2wire"
	"github.com/legateproxy/legate/internal/http1"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/overload"
	"github.com/legateproxy/legate/stats"
)

// tlsHandshakeTimeout bounds a downstream TLS handshake.
const tlsHandshakeTimeout = 10 * time.Second

// h2Preface is the request head of the HTTP/2 client connection preface as readHead returns
// it (RFC 9113 §3.4).
const h2Preface = "PRI * HTTP/2.0\r\n"

// serverConn is one downstream HTTP/1 connection. Its fields belong to the connection's
// goroutine, except idle (read by the drain watcher).
type serverConn struct {
	h        *Handler
	lc       *listener.Conn
	nc       net.Conn // lc, or the TLS connection over it
	rd       reader
	remote   string // the peer's ip:port, or the client a PROXY protocol header named
	remoteIP string
	direct   string // the socket's peer (listener.Conn.DirectRemoteAddr)
	local    string
	restored bool // local is an original destination (listener.Conn.LocalAddressRestored)
	tls      bool
	tlsInfo  *accesslog.TLSInfo // the handshake, for access logs and filters; nil for plain text or neither
	requests uint32
	http1    bool        // counted in downstream_cx_http1_*
	idle     atomic.Bool // waiting for a request head
	deadline time.Time   // the read deadline currently set
	start    time.Time   // when the connection was accepted

	// Deadlines while waiting for a request head (timeout.go).
	idleSince    time.Time     // when the connection went idle, as armIdle last moved it
	idleStamp    int64         // idleSince's stamp (shared.stamps)
	idleAt       time.Time     // the idle timeout as armed (zero: none)
	idleFor      time.Duration // the idle timeout idleAt was computed for (rescaleIdleFor)
	headDeadline time.Time     // request_headers_timeout of the head being read (zero: none)
	maxEnd       time.Time     // end of max_connection_duration (zero: none)
	maxReached   bool          // downstream_cx_max_duration_reached was counted
	// ended is when the last request's stream ended (its final stamp of the clock), which
	// armIdle takes as the idle period's start instead of reading the clock again; zero once
	// used.
	ended int64

	// linger: the connection closes with a request body unread (lingerClose).
	linger bool

	// The raw wait (waitRaw): serveFn is serveRaw, built once; inside is set while requests
	// are served inside the raw read; exit says why the read was left, with the read's error
	// or the started request (held) that must be served outside it.
	serveFn func(fd uintptr) bool
	inside  bool
	// fd is the socket's descriptor while serveRaw runs (-1 otherwise): the raw read holds it
	// open, so a response written from inside may first try a plain send on it
	// (h1writer.writeSocket).
	fd      int
	exit    rawExit
	exitErr error
	held    *stream
}

// emptyReads counts the downstream reads of serveRaw that found the socket empty: the raw
// wait exists to avoid them, and tests count them (TestKeepAliveMakesNoEmptyReads).
var emptyReads stats.HotCounter

// rawExit is why serveRaw left the raw read.
type rawExit uint8

const (
	exitNone    rawExit = iota
	exitClosed          // the connection is done
	exitFailed          // a read failed (exitErr): the client closed, an error, a head too large
	exitHeld            // a request that reads more from the client was started (held)
	exitPreface         // the HTTP/2 prior-knowledge preface: the connection goes to serveH2
)

// ServeConn hands one downstream connection to a goroutine of the handler, which serves it
// until it closes (listener.FilterChainHandler). The connection gets a fresh goroutine rather
// than the listener's: an idle HTTP/1 connection parks in a read with every frame below it on
// its stack, and the runtime shrinks a parked goroutine's stack only while less than a
// quarter of it is in use, so a shallow idle stack halves the memory of an idle connection.
// Close waits for these goroutines.
func (h *Handler) ServeConn(c *listener.Conn) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		c.Close()
		return
	}
	h.wg.Add(1)
	h.mu.Unlock()
	go h.serveConn(c)
}

// serveConn serves c on its own goroutine. The frames parked under an idle HTTP/1 read are
// serveConn, serverConn.loop and reader.fill; everything else runs in out-of-line helpers
// that have returned by then, so the parked stack stays under a quarter of 4 KiB and the
// runtime shrinks it.
//
// The connection is closed last, after wg.Done: when it is the last connection of a removed
// filter chain, the listener calls Close from inside c.Close, and Close waits for wg.
func (h *Handler) serveConn(c *listener.Conn) {
	defer c.Close()
	defer h.wg.Done()
	start := h.cxOpened()
	if sc := h.openConn(c, start); sc != nil {
		sc.loop()
		sc.finish()
	}
	h.cxClosed(start)
}

// openConn counts the connection, terminates TLS and serves HTTP/2 connections to their
// end. It returns the HTTP/1 connection to serve, or nil when the connection is done.
//
//go:noinline
func (h *Handler) openConn(c *listener.Conn, start time.Time) *serverConn {
	h.watchDrain(c)
	nc, info, isTLS, alpnH2, ok := h.handshake(c)
	if !ok {
		return nil
	}
	if h.cfg.Codec == config.CodecHTTP2 || alpnH2 {
		h.serveH2(c, nc, nil, start, info)
		return nil
	}
	if isTLS {
		h.stats.DownstreamCxSslActive.Inc()
	}
	sc := &serverConn{h: h, lc: c, nc: nc, tls: isTLS, tlsInfo: info, start: start, fd: -1}
	sc.initLimits(start)
	sc.remote = c.RemoteAddr().String()
	sc.remoteIP = hostOnly(sc.remote)
	sc.direct = directRemote(c, sc.remote)
	sc.local, sc.restored = c.LocalAddr().String(), c.LocalAddressRestored()
	var raw syscall.RawConn
	if sock, ok := c.Conn.(syscall.Conn); ok && !isTLS {
		raw, _ = sock.SyscallConn()
	}
	sc.rd.init(nc, raw, h.maxHead, h.stats)
	if raw != nil {
		sc.serveFn = sc.serveRaw
	}
	h.track(sc, true)
	return sc
}

// finish accounts for the end of an HTTP/1 connection and closes it.
//
//go:noinline
func (sc *serverConn) finish() {
	h := sc.h
	h.track(sc, false)
	if sc.tls {
		h.stats.DownstreamCxSslActive.Dec()
	}
	if sc.http1 {
		h.stats.DownstreamCxHTTP1Active.Dec()
	}
	if sc.linger {
		sc.lingerClose()
	}
	sc.nc.Close() // the socket (a TLS connection sends its close_notify first)
}

// Bounds of lingerClose: Envoy's delayed_close_timeout default, and a cap on the bytes read.
const (
	lingerTime     = time.Second
	lingerMaxBytes = 64 << 20
)

// lingerClose ends a connection whose client may still be sending a request body that will
// not be read (an upstream answered a large upload early). Closing a socket with unread bytes
// makes the kernel send a reset, which can destroy the response before the client reads it:
// the write side is shut first, so the response ends with a FIN, and what the client still
// sends is read and dropped for a while, as Envoy's delayed close does.
//
//go:noinline
func (sc *serverConn) lingerClose() {
	shutWriter(sc.nc, sc.lc.Conn)()
	// Real clock: a socket deadline, which the runtime poller compares with the system clock.
	sc.nc.SetReadDeadline(time.Now().Add(lingerTime))
	for n := 0; n < lingerMaxBytes; {
		m, err := sc.nc.Read(sc.rd.buf)
		if err != nil {
			return
		}
		n += m
	}
}

func (h *Handler) cxOpened() time.Time {
	h.stats.DownstreamCxTotal.Inc()
	h.stats.DownstreamCxActive.Inc()
	return h.sh.deps.Now()
}

func (h *Handler) cxClosed(start time.Time) {
	st := h.stats
	st.DownstreamCxActive.Dec()
	st.DownstreamCxDestroy.Inc()
	st.DownstreamCxLengthMs.Record(uint64(h.sh.deps.Now().Sub(start).Milliseconds()))
}

// socketConn is the listener connection as the codecs see it: closing it closes the socket
// only. The listener's accounting runs when serveConn closes the listener.Conn itself, last,
// because on a removed chain's last connection that Close calls Handler.Close.
type socketConn struct{ *listener.Conn }

// Close closes the socket.
func (s socketConn) Close() error { return s.Conn.Conn.Close() }

// handshake terminates TLS when the chain has a transport socket, counting it in the
// listener's ssl.* stats. When the handler has access logs or HTTP filters, it returns the
// connection's TLS state for them (%DOWNSTREAM_TLS_*%, tls_properties, the filters'
// Connection), made once per connection.
func (h *Handler) handshake(c *listener.Conn) (nc net.Conn, info *accesslog.TLSInfo, isTLS, alpnH2, ok bool) {
	if h.tls == nil {
		return socketConn{c}, nil, false, false, true
	}
	logged := len(h.logs) > 0
	// Real clock: a socket deadline, which the runtime poller compares with the system clock.
	tc, cs, local, err := h.tls.Accept(newTLSSocket(c), time.Now().Add(h.ov.ScaleTimer(overload.TransportSocketConnect, tlsHandshakeTimeout)), logged)
	if err != nil {
		return nil, nil, false, false, false
	}
	h.stats.DownstreamCxSslTotal.Inc()
	if logged || len(h.filters) > 0 { // filters read the peer's certificate and SNI (rbac)
		info = &accesslog.TLSInfo{State: cs, Local: local}
	}
	return tc, info, true, cs.NegotiatedProtocol == "h2", true
}

// downstreamTLS returns what the access log knows of the stream's downstream TLS connection:
// its state (nil for plain text) and SNI.
func (s *stream) downstreamTLS() (*accesslog.TLSInfo, string) {
	var info *accesslog.TLSInfo
	switch d := s.drain.(type) {
	case *serverConn:
		info = d.tlsInfo
	case *h2conn:
		info = d.tlsInfo
	}
	if info == nil {
		return nil, ""
	}
	return info, info.State.ServerName
}

// loop is the HTTP/1 request loop. It keeps no locals of its own across the read.
func (sc *serverConn) loop() {
	for {
		head, err := sc.rd.nextHead()
		switch {
		case head != nil:
			if !sc.handle(head) {
				return
			}
			continue
		case err != nil:
			sc.headError(err)
			return
		case !sc.beforeRead():
			return
		}
		if !sc.rd.rawReady() {
			if err := sc.rd.fill(); err != nil && !sc.readFailed(err) {
				return
			}
		} else if !sc.waitRaw() {
			return
		}
	}
}

// waitRaw waits for the next request on a plain socket, and serves it, inside one raw read
// of the socket (serveRaw), so that no read is made that can only find the socket empty
// (docs/DESIGN.md, "The request path"). It reports whether the connection stays open.
func (sc *serverConn) waitRaw() bool {
	sc.inside, sc.exit = true, exitNone
	err := sc.rd.raw.Read(sc.serveFn)
	sc.inside, sc.fd = false, -1
	if sc.rd.buf == nil { // the wait failed: a deadline or a close
		sc.rd.buf = getReadBuffer()
	}
	switch sc.exit {
	case exitClosed:
		return false
	case exitHeld:
		s := sc.held
		sc.held = nil
		return sc.serve(s)
	case exitPreface:
		sc.toH2()
		return false
	case exitFailed:
		err = sc.exitErr
		sc.exitErr = nil
		if errno, ok := err.(syscall.Errno); ok {
			err = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", errno)}
		}
	}
	return err == nil || sc.readFailed(err)
}

// serveRaw is the callback of waitRaw's raw read. It reads what the socket holds and serves
// every complete request that reads nothing more from the client (the response is written
// with nc.Write, whose lock is not the read's); once a read left the socket empty it
// returns false, and the runtime calls it again when bytes come (at once if they came while
// a request was served: readiness is kept from the raw read's start). It returns true to
// leave the read when the connection closes, a read fails, or a request must be served
// outside because it reads from the client (nc.Read would wait on the read lock held here).
func (sc *serverConn) serveRaw(fd uintptr) bool {
	rd := &sc.rd
	sc.fd = int(fd)
	for {
		short, err := rd.readSocket(fd)
		switch {
		case err == syscall.EAGAIN:
			emptyReads.Inc()
			rd.release()
			return false
		case err != nil:
			sc.exit, sc.exitErr = exitFailed, err
			return true
		}
		if !sc.serveHeads() {
			return true
		}
		if !short {
			continue // the buffer filled: the socket may hold more
		}
		if !sc.beforeRead() {
			sc.exit = exitClosed
			return true
		}
		rd.release()
		return false
	}
}

// serveHeads serves the complete requests buffered inside serveRaw; it reports false to leave
// the raw read (sc.exit says why).
func (sc *serverConn) serveHeads() bool {
	for {
		head, err := sc.rd.nextHead()
		switch {
		case err != nil:
			sc.headError(err)
			sc.exit = exitClosed
			return false
		case head == nil:
			return true
		case !sc.handle(head):
			sc.exit = exitClosed
			return false
		case sc.exit != exitNone:
			return false
		}
	}
}

// beforeRead prepares a wait for more request bytes: an idle connection closes when a drain
// has started, and (re)arms its idle timeout. It reports false to close the connection.
//
//go:noinline
func (sc *serverConn) beforeRead() bool {
	if sc.rd.buffered() > 0 {
		sc.armHeadTimeout()
		return true
	}
	sc.idle.Store(true)
	if sc.drainNow() {
		return false
	}
	sc.armIdle()
	return true
}

// readFailed handles a failed read; it reports whether to keep waiting for the request.
//
//go:noinline
func (sc *serverConn) readFailed(err error) bool {
	sc.idle.Store(false)
	if err == io.EOF && sc.rd.buffered() > 0 {
		err = io.ErrUnexpectedEOF
	}
	return sc.headError(err)
}

// handle serves one request whose head was read; it reports whether the connection may
// carry another request. Inside serveRaw, a request that must be served outside the raw
// read is only started, and left to waitRaw (sc.exit).
//
//go:noinline
func (sc *serverConn) handle(head []byte) bool {
	sc.idle.Store(false)
	h := sc.h
	if sc.requests == 0 && string(head) == h2Preface && h.cfg.Codec == config.CodecAuto {
		if sc.inside {
			sc.exit = exitPreface
			return true
		}
		sc.toH2()
		return false
	}
	sc.headDone()
	if !sc.http1 {
		sc.http1 = true
		h.stats.DownstreamCxHTTP1Total.Inc()
		h.stats.DownstreamCxHTTP1Active.Inc()
	}
	sc.requests++
	s := getStream()
	if !s.startH1(sc, head) {
		putStream(s)
		return false
	}
	if sc.inside && s.readsClient() {
		sc.exit, sc.held = exitHeld, s
		return true
	}
	return sc.serve(s)
}

// serve serves a started request; it reports whether the connection may carry another.
func (sc *serverConn) serve(s *stream) bool {
	keep := s.serveH1()
	putStream(s)
	sc.rd.shrink()
	return keep
}

// toH2 hands a connection that opened with the prior-knowledge HTTP/2 preface (h2c), the
// preface included, to the HTTP/2 server.
func (sc *serverConn) toH2() {
	pre := append([]byte(h2Preface+"\r\n"), sc.rd.buf[sc.rd.r:sc.rd.w]...)
	sc.clearDeadline()
	sc.h.serveH2(sc.lc, sc.nc, pre, sc.start, sc.tlsInfo)
}

// armIdle sets the read deadline for the idle timeout (or an earlier deadline of
// max_connection_duration). The idle period's start is only moved when it is more than an
// eighth of the timeout old, so a busy connection rarely touches its timer.
func (sc *serverConn) armIdle() {
	d := sc.idleTimeout()
	now := sc.ended
	sc.ended = 0
	if d <= 0 {
		sc.idleAt, sc.idleFor = time.Time{}, 0
	} else {
		if now == 0 {
			now = sc.h.sh.stamps.Now()
		}
		if since := time.Duration(now - sc.idleStamp); since > d/8 || since < 0 || sc.idleSince.IsZero() {
			sc.idleSince, sc.idleStamp = sc.h.sh.stamps.Time(now), now
			sc.idleFor = 0 // idleAt is to be computed again
		} else if d == sc.idleFor && sc.headDeadline.IsZero() && sc.maxEnd.IsZero() && sc.deadline == sc.idleAt {
			return // the deadline set is the idle one and stands (about 80 instructions)
		}
	}
	sc.rescaleIdleFor(d)
	sc.setDeadline(sc.nextDeadline())
}

// idleTimeout is the connection manager's idle_timeout as reduce_timeouts scales it now.
func (sc *serverConn) idleTimeout() time.Duration {
	return sc.h.ov.ScaleTimer(overload.ConnectionIdle, sc.h.cfg.IdleTimeout)
}

// rescaleIdle recomputes the idle deadline from the idle period's start under the present
// scale of reduce_timeouts (the connection was woken because it changed, or is going idle).
func (sc *serverConn) rescaleIdle() { sc.rescaleIdleFor(sc.idleTimeout()) }

// rescaleIdleFor is rescaleIdle with the idle timeout d as scaled now. idleAt stands while
// neither the idle period's start nor d moved (idleFor: the d it was computed for; 0: none),
// as on a busy connection from request to request (the sum was about 75 instructions).
func (sc *serverConn) rescaleIdleFor(d time.Duration) {
	if d > 0 && d != sc.idleFor && !sc.idleSince.IsZero() {
		sc.idleAt, sc.idleFor = sc.idleSince.Add(d), d
	}
}

func (sc *serverConn) clearDeadline() {
	sc.deadline = time.Time{}
	sc.nc.SetReadDeadline(time.Time{})
}

// drainNow reports whether an idle connection should close because of a drain. A
// connection that has not carried a request yet is not idle but new: its first request may
// be in flight (a hot-restart parent accepted it just before handing its sockets over), so it
// is read and answered with "connection: close" instead of being closed unanswered.
func (sc *serverConn) drainNow() bool {
	if sc.lc.Draining() && sc.rd.buffered() == 0 && sc.requests > 0 {
		sc.h.stats.DownstreamCxDrainClose.Inc()
		return true
	}
	return false
}

// headError handles a failure to read a request head: timeouts (idle or drain wake-ups),
// the peer closing, and malformed requests, which get Envoy's 400/431/501 replies. It
// reports whether the connection should keep waiting for the head (an early wake-up).
func (sc *serverConn) headError(err error) (resume bool) {
	st := sc.h.stats
	var ne net.Error
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return sc.readTimeout()
	case err == io.EOF || err == io.ErrUnexpectedEOF || errors.Is(err, net.ErrClosed):
		st.DownstreamCxDestroyRemote.Inc()
	case errors.Is(err, errHeadTooLarge):
		st.DownstreamCxProtocolError.Inc()
		sc.writeError(http.StatusRequestHeaderFieldsTooLarge)
	case errors.Is(err, http1.ErrTooManyFields):
		st.DownstreamCxProtocolError.Inc()
		sc.writeError(http.StatusRequestHeaderFieldsTooLarge)
	case errors.Is(err, http1.ErrUnsupportedCoding):
		st.DownstreamCxProtocolError.Inc()
		sc.writeError(http.StatusNotImplemented)
	case errors.Is(err, http1.ErrMalformed):
		st.DownstreamCxProtocolError.Inc()
		sc.writeError(http.StatusBadRequest)
	default:
		st.DownstreamCxDestroyRemote.Inc()
	}
	return false
}

// writeError answers a request the codec could not parse and closes the connection, as
// Envoy's HTTP/1 codec does ("Bad Request" style replies with no body details).
func (sc *serverConn) writeError(status int) { sc.writeReply(status, "") }

// writeReply writes a local reply with a text/plain body before the connection closes.
func (sc *serverConn) writeReply(status int, body string) {
	w := h1writer{conn: sc.nc, tx: sc.h.stats.rq}
	w.buf = appendStatusLine(nil, 1, status)
	if body != "" {
		w.buf = append(w.buf, "content-type: text/plain\r\n"...)
	}
	w.buf = append(w.buf, "content-length: "...)
	w.buf = strconv.AppendInt(w.buf, int64(len(body)), 10)
	w.buf = append(w.buf, "\r\nconnection: close\r\n\r\n"...)
	w.buf = append(w.buf, body...)
	w.flush()
	sc.h.stats.responseCode(status, stats.ThisLine())
}

// track adds or removes a connection from the set the drain watcher wakes.
func (h *Handler) track(sc *serverConn, add bool) {
	h.mu.Lock()
	if add {
		h.conns[sc] = struct{}{}
	} else {
		delete(h.conns, sc)
	}
	h.mu.Unlock()
}

// watchDrain starts, once per handler, the goroutine that wakes idle HTTP/1 connections and
// sends GOAWAY on HTTP/2 connections when the filter chain starts draining.
func (h *Handler) watchDrain(c *listener.Conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.watching || h.closed {
		return
	}
	h.watching = true
	h.wg.Add(1)
	go h.drainWatcher(c.DrainStarted())
	if ch := h.ov.TimersChanged(); ch != nil && (h.ov.ScalesTimer(overload.ConnectionIdle) || h.ov.ScalesTimer(overload.ConnectionMax)) {
		h.wg.Add(1)
		go h.timerWatcher(ch)
	}
}

// timerWatcher wakes the idle HTTP/1 connections each time reduce_timeouts' state changes,
// so that they move their idle and duration deadlines, and moves the duration timers of
// HTTP/2 connections: Envoy's scaled timers follow the scale while they run, so connections
// idle before the pressure rose are closed sooner too. ch is the first change to wait for.
func (h *Handler) timerWatcher(ch <-chan struct{}) {
	defer h.wg.Done()
	for {
		select {
		case <-ch:
		case <-h.stop:
			return
		}
		ch = h.ov.TimersChanged() // before the wake-up, so that no change is missed
		h.mu.Lock()
		for sc := range h.conns {
			if sc.idle.Load() {
				sc.nc.SetReadDeadline(time.Unix(1, 0)) // in the past: the read returns now
			}
		}
		for l := range h.h2lives {
			l.rescale()
		}
		h.mu.Unlock()
	}
}

func (h *Handler) drainWatcher(started <-chan struct{}) {
	defer h.wg.Done()
	select {
	case <-started:
	case <-h.stop:
		return
	}
	h.mu.Lock()
	for l := range h.h2lives { // every HTTP/2 connection: a graceful GOAWAY
		l.goAway()
	}
	// Real clock: a socket deadline, which the runtime poller compares with the system clock.
	now := time.Now()
	for sc := range h.conns {
		if sc.idle.Load() {
			sc.nc.SetReadDeadline(now)
		}
	}
	h.mu.Unlock()
}

// serveH2 serves an HTTP/2 connection accepted at start; pre holds bytes already read from
// it (the prior-knowledge preface); info is its TLS state for access logs (nil for none).
func (h *Handler) serveH2(lc *listener.Conn, nc net.Conn, pre []byte, start time.Time, info *accesslog.TLSInfo) {
	st := h.stats
	st.DownstreamCxHTTP2Total.Inc()
	st.DownstreamCxHTTP2Active.Inc()
	defer st.DownstreamCxHTTP2Active.Dec()
	remote := lc.RemoteAddr().String()
	tc, isTLS := nc.(*tls.Conn)
	c := &h2conn{h: h, drain: lc.DrainClose, remote: remote, remoteIP: hostOnly(remote), local: lc.LocalAddr().String(), restored: lc.LocalAddressRestored(), tls: isTLS, tlsInfo: info}
	c.lc = lc
	c.direct = directRemote(lc, remote)
	if isTLS {
		cs := tc.ConnectionState()
		c.tlsState = &cs
	}
	c.shutWrite = shutWriter(nc, lc.Conn)
	c.resets = h.newResetGuard()
	if d := h.cfg.RequestHeadersTimeout; d > 0 {
		c.hw = &headerWatch{h: h, c: c, timeout: d, skip: h2PrefaceLen}
	}
	c.start(nc, pre)
	l := h.newH2Lifetime(c, start)
	defer l.stop()
	if l.idle != nil {
		c.life = l
	}
	c.serve()
}

// streamCut counts a stream whose request context ended while it was served: the client
// reset it (downstream_rq_rx_reset), or the connection went away under it (counted once per
// connection: downstream_cx_destroy_remote_active_rq, downstream_cx_destroy_active_rq).
func (c *h2conn) streamCut() {
	st := c.h.stats
	if !c.peerGone.Load() {
		st.DownstreamRqRxReset.Inc()
		return
	}
	if c.cut.CompareAndSwap(false, true) {
		st.DownstreamCxDestroyRemoteActiveRq.Inc()
		st.DownstreamCxDestroyActiveRq.Inc()
	}
}

// h2Malformed reports an HTTP/2 request whose pseudo-headers could not be forwarded as they
// are: a :method that is not a token, a :path with a space or control character (each would
// split or forge an HTTP/1 upstream request line, as nghttp2 checks), an :authority (or
// Host) that is not host[:port], such as one with userinfo (RFC 9113 §8.3.1, RFC 9110 §4.2.4),
// or a :protocol on a method other than CONNECT (RFC 8441 §4, as nghttp2 checks).
func h2Malformed(r *http.Request) bool {
	return !http1.ValidToken(r.Method) || !http1.ValidTarget(r.RequestURI) || !http1.ValidAuthority(r.Host) ||
		(r.Method != http.MethodConnect && len(r.Header[":protocol"]) > 0)
}

// hostOnly strips the port from an ip:port address.
func hostOnly(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// appendStatusLine appends "HTTP/1.x <code> <reason>\r\n".
func appendStatusLine(dst []byte, minor, status int) []byte {
	if minor != 0 && status >= 100 && status < 100+len(statusLines) {
		return append(dst, statusLines[status-100]...)
	}
	return formatStatusLine(dst, minor, status)
}

// statusLines are the HTTP/1.1 status lines of the codes 100 to 599, made once: formatting
// one for every response cost about 220 instructions.
var statusLines = func() (t [500]string) {
	for i := range t {
		t[i] = string(formatStatusLine(nil, 1, 100+i))
	}
	return t
}()

func formatStatusLine(dst []byte, minor, status int) []byte {
	if minor == 0 {
		dst = append(dst, "HTTP/1.0 "...)
	} else {
		dst = append(dst, "HTTP/1.1 "...)
	}
	dst = strconv.AppendInt(dst, int64(status), 10)
	dst = append(dst, ' ')
	dst = append(dst, http.StatusText(status)...)
	return append(dst, '\r', '\n')
}

// dateCache keeps the HTTP date string, refreshed at most once a second.
type dateCache struct {
	now func() time.Time
	cur atomic.Pointer[dateValue]
}

type dateValue struct {
	sec int64
	s   string
	h2  string // the Date field, HPACK encoded (getH2; dateCache's own values)
}

func newDateCache(now func() time.Time) *dateCache { return &dateCache{now: now} }

// get returns the Date header value for now.
func (d *dateCache) get(now time.Time) string {
	sec := now.Unix()
	if v := d.cur.Load(); v != nil && v.sec == sec {
		return v.s
	}
	v := d.refresh(now, sec)
	return v.s
}

// getH2 returns the Date field for now, HPACK encoded, as get's value is a second.
func (d *dateCache) getH2(now time.Time) string {
	sec := now.Unix()
	if v := d.cur.Load(); v != nil && v.sec == sec {
		return v.h2
	}
	return d.refresh(now, sec).h2
}

// refresh makes and keeps the values of second sec, now's.
func (d *dateCache) refresh(now time.Time, sec int64) *dateValue {
	v := &dateValue{sec: sec, s: now.UTC().Format(http.TimeFormat)}
	v.h2 = string(h2wire.AppendIndexedName(nil, h2wire.StaticName(hdrDate), v.s))
	d.cur.Store(v)
	return v
}

// directRemote returns the socket peer of c, whose remote address reads remote: the same
// string unless a PROXY protocol header replaced the remote address.
func directRemote(c *listener.Conn, remote string) string {
	if d := c.DirectRemoteAddr(); d != c.RemoteAddr() {
		return d.String()
	}
	return remote
}
