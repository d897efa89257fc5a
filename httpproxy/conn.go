package httpproxy

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/listener"
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
	remote   string // the peer's ip:port
	remoteIP string
	local    string
	tls      bool
	requests uint32
	idle     atomic.Bool // waiting for a request head
	deadline time.Time   // the read deadline currently set
}

// ServeConn serves one downstream connection until it closes (listener.FilterChainHandler).
func (h *Handler) ServeConn(c *listener.Conn) {
	st := h.stats
	st.DownstreamCxTotal.Inc()
	st.DownstreamCxActive.Inc()
	start := h.sh.deps.Now()
	defer func() {
		st.DownstreamCxActive.Dec()
		st.DownstreamCxDestroy.Inc()
		st.DownstreamCxLengthMs.Record(uint64(h.sh.deps.Now().Sub(start).Milliseconds()))
		c.Close()
	}()
	h.watchDrain(c)
	var nc net.Conn = c
	isTLS := false
	if h.tls != nil {
		tc := tls.Server(c, h.tlsConfig())
		c.SetDeadline(time.Now().Add(tlsHandshakeTimeout))
		if err := tc.Handshake(); err != nil {
			return
		}
		c.SetDeadline(time.Time{})
		st.DownstreamCxSslTotal.Inc()
		st.DownstreamCxSslActive.Inc()
		defer st.DownstreamCxSslActive.Dec()
		nc, isTLS = tc, true
		if tc.ConnectionState().NegotiatedProtocol == "h2" {
			h.serveH2(c, tc, nil)
			return
		}
	}
	if h.cfg.Codec == config.CodecHTTP2 {
		h.serveH2(c, nc, nil)
		return
	}
	sc := &serverConn{h: h, lc: c, nc: nc, tls: isTLS}
	sc.remote = c.RemoteAddr().String()
	sc.remoteIP = hostOnly(sc.remote)
	sc.local = c.LocalAddr().String()
	sc.rd = reader{conn: nc, buf: make([]byte, readBufferSize), max: h.maxHead, rx: &st.DownstreamCxRxBytesTotal}
	h.track(sc, true)
	defer h.track(sc, false)
	sc.serve()
}

// serve runs the HTTP/1 request loop.
func (sc *serverConn) serve() {
	h := sc.h
	st := h.stats
	http1Counted := false
	for {
		sc.idle.Store(true)
		if sc.drainNow() {
			return
		}
		if sc.rd.buffered() == 0 {
			sc.armIdle()
		}
		head, err := sc.rd.readHead()
		sc.idle.Store(false)
		if err != nil {
			if sc.headError(err) {
				continue
			}
			return
		}
		if sc.requests == 0 && string(head) == h2Preface && h.cfg.Codec == config.CodecAuto {
			// Prior-knowledge HTTP/2 (h2c): hand the connection, preface included, to http2.
			pre := append([]byte(h2Preface+"\r\n"), sc.rd.buf[sc.rd.r:sc.rd.w]...)
			sc.clearDeadline()
			h.serveH2(sc.lc, sc.nc, pre)
			return
		}
		if !http1Counted {
			http1Counted = true
			st.DownstreamCxHTTP1Total.Inc()
			st.DownstreamCxHTTP1Active.Inc()
			defer st.DownstreamCxHTTP1Active.Dec()
		}
		sc.requests++
		s := getStream()
		keep := s.serveH1(sc, head)
		putStream(s)
		sc.rd.shrink()
		if !keep {
			return
		}
	}
}

// armIdle sets the read deadline for the idle timeout. The deadline is only moved when it is
// more than an eighth of the timeout off, so a busy connection rarely touches its timer; an
// early expiry is recognised in headError and the wait resumes.
func (sc *serverConn) armIdle() {
	d := sc.h.cfg.IdleTimeout
	if d <= 0 {
		if !sc.deadline.IsZero() {
			sc.clearDeadline()
		}
		return
	}
	want := sc.h.sh.deps.Now().Add(d)
	if diff := want.Sub(sc.deadline); diff > d/8 || diff < 0 {
		sc.deadline = want
		sc.nc.SetReadDeadline(want)
	}
}

func (sc *serverConn) clearDeadline() {
	sc.deadline = time.Time{}
	sc.nc.SetReadDeadline(time.Time{})
}

// drainNow reports whether an idle connection should close because of a drain.
func (sc *serverConn) drainNow() bool {
	select {
	case <-sc.lc.DrainStarted():
		if sc.rd.buffered() == 0 {
			sc.h.stats.DownstreamCxDrainClose.Inc()
			return true
		}
	default:
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
		if sc.rd.buffered() == 0 && sc.drainNow() {
			return false
		}
		now := sc.h.sh.deps.Now()
		if sc.h.cfg.IdleTimeout <= 0 || (!sc.deadline.IsZero() && now.Before(sc.deadline)) {
			// Woken early (drain start, or the deadline was moved): keep waiting.
			sc.nc.SetReadDeadline(sc.deadline)
			return true
		}
		if sc.rd.buffered() == 0 {
			st.DownstreamCxIdleTimeout.Inc()
		} else {
			st.DownstreamRqHeaderTimeout.Inc()
		}
	case err == io.EOF || errors.Is(err, net.ErrClosed):
		st.DownstreamCxDestroyRemote.Inc()
	case errors.Is(err, errHeadTooLarge):
		st.DownstreamCxProtocolError.Inc()
		sc.writeError(http.StatusRequestHeaderFieldsTooLarge)
	case errors.Is(err, errTooManyHdrs):
		st.DownstreamCxProtocolError.Inc()
		sc.writeError(http.StatusRequestHeaderFieldsTooLarge)
	case errors.Is(err, errNotImpl):
		st.DownstreamCxProtocolError.Inc()
		sc.writeError(http.StatusNotImplemented)
	case errors.Is(err, errBadRequest):
		st.DownstreamCxProtocolError.Inc()
		sc.writeError(http.StatusBadRequest)
	default:
		st.DownstreamCxDestroyRemote.Inc()
	}
	return false
}

// writeError answers a request the codec could not parse and closes the connection, as
// Envoy's HTTP/1 codec does ("Bad Request" style replies with no body details).
func (sc *serverConn) writeError(status int) {
	w := h1writer{conn: sc.nc, tx: &sc.h.stats.DownstreamCxTxBytesTotal}
	w.buf = appendStatusLine(nil, 1, status)
	w.buf = append(w.buf, "content-length: 0\r\nconnection: close\r\n\r\n"...)
	w.flush()
	sc.h.stats.responseCode(status)
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
}

func (h *Handler) drainWatcher(started <-chan struct{}) {
	defer h.wg.Done()
	select {
	case <-started:
	case <-h.stop:
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h.h2base.Shutdown(ctx) // runs http2's graceful shutdown (GOAWAY) on every h2 connection
	h.mu.Lock()
	now := time.Now()
	for sc := range h.conns {
		if sc.idle.Load() {
			sc.nc.SetReadDeadline(now)
		}
	}
	h.mu.Unlock()
}

// serveH2 serves an HTTP/2 connection; pre holds bytes already read from it (the
// prior-knowledge preface).
func (h *Handler) serveH2(lc *listener.Conn, nc net.Conn, pre []byte) {
	st := h.stats
	st.DownstreamCxHTTP2Total.Inc()
	st.DownstreamCxHTTP2Active.Inc()
	defer st.DownstreamCxHTTP2Active.Dec()
	conn := nc
	if len(pre) > 0 {
		conn = &prefixConn{Conn: nc, pre: pre}
	}
	remote := lc.RemoteAddr().String()
	ch := &h2conn{h: h, lc: lc, remote: remote, remoteIP: hostOnly(remote), local: lc.LocalAddr().String(), tls: nc != net.Conn(lc)}
	h.http2.ServeConn(conn, &http2.ServeConnOpts{Handler: ch, BaseConfig: h.h2base})
}

// prefixConn replays bytes read before the connection changed hands.
type prefixConn struct {
	net.Conn
	pre []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(p, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// h2conn is the per-connection http.Handler of an HTTP/2 connection.
type h2conn struct {
	h        *Handler
	lc       *listener.Conn
	remote   string
	remoteIP string
	local    string
	tls      bool
}

func (c *h2conn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := getStream()
	s.serveH2(c, w, r)
	abort := s.closeConn && s.flags&accesslog.UpstreamConnectionTermination != 0 && s.headSent
	putStream(s)
	if abort {
		panic(http.ErrAbortHandler) // resets the stream: the response could not be completed
	}
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
}

func newDateCache(now func() time.Time) *dateCache { return &dateCache{now: now} }

// get returns the Date header value for now.
func (d *dateCache) get(now time.Time) string {
	sec := now.Unix()
	if v := d.cur.Load(); v != nil && v.sec == sec {
		return v.s
	}
	v := &dateValue{sec: sec, s: now.UTC().Format(http.TimeFormat)}
	d.cur.Store(v)
	return v.s
}
