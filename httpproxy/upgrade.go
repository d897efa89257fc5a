package httpproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/breaker"
	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/http1"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/pool"
)

// Upgrades and tunnels (Envoy's upgrade_configs and CONNECT support).
//
// A request asks for an upgrade when it is an HTTP/1.1 request whose Connection lists
// "upgrade" (the type is its Upgrade value, "websocket" for a WebSocket), a CONNECT (type
// "CONNECT", HTTP/1.1 or HTTP/2), or an HTTP/2 extended CONNECT (RFC 8441; the type is its
// :protocol). The route's upgrade_configs decide first, then the connection manager's; an
// upgrade neither enables is refused with 403 (upgrade_failed), never downgraded. An
// "Upgrade: h2c" is stripped instead, as Envoy strips it.
//
// An accepted upgrade gets an upstream connection of its own, never pooled: either the
// request is forwarded on it as HTTP/1.1 (with its Upgrade and Connection headers; an HTTP/2
// extended CONNECT becomes a GET with "upgrade: <protocol>"; to a cluster that speaks HTTP/2
// it goes as an extended CONNECT, upgrade_h2.go) and, when the upstream switches protocols
// (101, or 2xx for a CONNECT or over HTTP/2), bytes are copied both ways; or, on a route whose
// CONNECT upgrade has connect_config, the CONNECT is terminated: Legate answers 200 once the
// TCP connection to the host is up and copies bytes. Any other answer is forwarded as a
// normal response. Each direction ends with a half-close of the other side; the tunnel ends
// when both have, when either side fails, or after the route's idle_timeout (else the
// connection manager's stream_idle_timeout) without a byte either way.
//
// The copy runs on the stream's goroutine (downstream to upstream) and one goroutine of its
// own (upstream to downstream), which the stream waits for before it returns.

const (
	upgradeConnect       = "CONNECT"
	detailsUpgradeFailed = "upgrade_failed"
	tunnelBufferSize     = 16 << 10
)

// errBadTarget is an upgrade whose method, target or authority cannot be written in an
// HTTP/1.1 request head.
var errBadTarget = errors.New("request target not valid in an HTTP/1.1 request line")

// upgradeType returns the upgrade an HTTP/1 request asks for ("" for none). A request that
// names h2c asks for none: Envoy removes an h2c upgrade and serves the request as HTTP/1.1.
func upgradeType(rh *http1.RequestHead) string {
	switch {
	case rh.Method == http.MethodConnect:
		return upgradeConnect
	case !rh.ConnUpgrade || rh.Upgrade == "" || http1.EqualFold(rh.Upgrade, "h2c"):
		return ""
	}
	return rh.Upgrade
}

// h2Upgrade recognises a CONNECT (no path) and an extended CONNECT (:protocol, with a path) on
// an HTTP/2 stream and returns the request's path.
func (s *stream) h2Upgrade(r *http.Request, path string) string {
	if r.Method != http.MethodConnect {
		return path
	}
	if p := r.Header[":protocol"]; len(p) > 0 {
		delete(r.Header, ":protocol")
		s.upgrade = p[0]
		return path
	}
	s.upgrade = upgradeConnect
	return ""
}

// upgradeAllowed applies Envoy's rule: a route that lists the type decides (enabled or
// not); otherwise the connection manager's entry for the type, when enabled.
func (h *Handler) upgradeAllowed(t string, r *route.Route) bool {
	if r != nil {
		if enabled, found := r.UpgradeEnabled(t); found {
			return enabled
		}
	}
	for _, uc := range h.cfg.UpgradeConfigs {
		if strings.EqualFold(uc.Type, t) {
			return uc.Enabled
		}
	}
	return false
}

// acceptUpgrade decides an upgrade request routed to m (nil: no route). A refused upgrade is
// answered 403 and reported false; an accepted one is counted as Envoy counts it (the caller
// takes it out of downstream_cx_upgrades_active when the stream ends).
func (s *stream) acceptUpgrade(m *route.Match) bool {
	var r *route.Route
	if m != nil {
		r = m.Route
	}
	st := s.h.stats
	if !s.h.upgradeAllowed(s.upgrade, r) {
		st.DownstreamRqWsOnNonWsRoute.Inc()
		s.details = detailsUpgradeFailed
		s.localReply(http.StatusForbidden, nil, nil)
		return false
	}
	st.DownstreamCxUpgradesTotal.Inc()
	st.DownstreamCxUpgradesActive.Inc()
	s.upgrading = true
	return true
}

// tunnelsPost reports a POST on a route whose CONNECT upgrade allows POST (allow_post): it
// is terminated as a CONNECT would be.
func (s *stream) tunnelsPost(m *route.Match) bool {
	c := m.Route.Connect
	return s.upgrade == "" && c != nil && c.AllowPost && s.req.Method == http.MethodPost
}

// forwardUpgrade serves an accepted upgrade (or an allow_post POST) on route m of mgr's
// cluster.
func (s *stream) forwardUpgrade(mgr *pool.Manager, m *route.Match) {
	r := m.Route
	terminate := r.Connect != nil && (s.upgrade == upgradeConnect || s.upgrade == "")
	c := mgr.Cluster()
	snap := c.Snapshot()
	s.lbctx = lb.Context{MetadataMatch: m.MetadataMatch, OverrideHost: c.OriginalDst(s.header(), s.local, s.restored)}
	if c.IsForwardProxy() {
		s.lbctx.OverrideHost = c.ForwardProxyKey(s.req.Authority)
	}
	if len(r.HashPolicy) > 0 {
		s.req.AddCookie = s.addCookie
		s.lbctx.HashKey, s.lbctx.HasHashKey = r.HashKey(&s.req, s.remoteIP)
	}
	hst, err := c.Pick(&s.lbctx)
	if err != nil {
		s.noHealthyUpstream(snap, m)
		return
	}
	s.upstream = hst.Address()
	s.attempts = 1
	var deadline time.Time
	var deadlineAt int64
	if r.Timeout > 0 {
		deadline, deadlineAt = s.start.Add(r.Timeout), s.startAt+int64(r.Timeout)
	}
	s.ctx.reset(deadlineAt)
	prio := config.PriorityDefault
	if r.Priority == route.PriorityHigh {
		prio = config.PriorityHigh
	}
	h2 := !terminate && mgr.Protocol(&pool.Request{HTTP2: s.h2w != nil}) == pool.HTTP2
	var alpn []string
	switch {
	case h2:
		alpn = []string{"h2"}
	case mgr.AutoHTTP():
		alpn = []string{"http/1.1"} // auto_config: an HTTP/1.1 upgrade needs an HTTP/1.1 connection
	}
	up, err := mgr.ConnectUpgrade(&s.ctx, hst, prio, alpn, s.req.Authority, s.header().Get, s.conn)
	if err != nil {
		kind := classify(err, &s.ctx)
		reportFailure(c, hst, kind, err)
		if errors.Is(err, breaker.ErrOverflow) {
			s.flags |= accesslog.UpstreamOverflow
			s.details = "overflow"
			if !s.h.cfg.Router.SuppressEnvoyHeaders {
				s.setRespHeader(hdrOverloaded, "true")
			}
			s.localReply(http.StatusServiceUnavailable, []byte(bodyResetPrefix+reasonOverflow), m)
			return
		}
		s.failReply(kind, err, m)
		return
	}
	defer up.Close()
	st := snap.Stats
	st.UpstreamRqTotal.Inc()
	st.UpstreamRqActive.Inc()
	defer st.UpstreamRqActive.Dec()
	if terminate {
		s.details = "via_upstream"
		s.answerTunnel(http.StatusOK, m)
		s.splice(tcpEnd(up, up), m)
		return
	}
	if h2 {
		s.upgradeOverH2(up, m, snap.Stats, deadline)
		return
	}
	s.upgradeUpstream(up, m, snap.Stats, deadline, &c.Config().HTTP1)
}

// upgradeUpstream forwards the upgrade request on up and serves what the upstream answers; o
// are the cluster's HTTP/1 codec options.
func (s *stream) upgradeUpstream(up *pool.TCPConn, m *route.Match, cs *cluster.Stats, deadline time.Time, o *config.HTTP1Options) {
	head, err := s.upgradeHead(m, o.StatelessCase())
	if err != nil {
		s.details = "upgrade_failed{invalid_target}"
		s.localReply(http.StatusBadRequest, nil, nil)
		return
	}
	upStart := s.h.sh.deps.Now()
	up.SetDeadline(deadline) // the route's timeout bounds the wait for the answer
	br := bufio.NewReaderSize(up, tunnelBufferSize)
	var resp *http.Response
	if _, err = up.Write(head); err == nil {
		var bodyErr error
		if err, bodyErr = s.sendUpgradeBody(up); bodyErr != nil {
			s.details = "upgrade_failed{request_body}"
			s.localReply(http.StatusBadRequest, nil, nil)
			s.closeConn = true
			return
		}
	}
	if err == nil {
		resp, err = readUpgradeResponse(br, s.upgrade)
	}
	if !s.takeAnswer(resp, err, false, up, m, cs, upStart) {
		return
	}
	s.answerTunnel(s.switchStatus(resp.Header.Values(hdrUpgrade)), m)
	s.splice(tcpEnd(br, up), m)
}

// switchStatus returns the status that opens the tunnel downstream, with its headers set: 200
// on an HTTP/2 stream (RFC 8441 §5) and for a CONNECT, else 101 with the upgrade protocols
// (upgrade, or the request's upgrade when the upstream named none) and "connection: upgrade".
func (s *stream) switchStatus(upgrade []string) int {
	if s.h2w != nil || s.upgrade == upgradeConnect || s.upgrade == "" {
		return http.StatusOK
	}
	if len(upgrade) == 0 {
		upgrade = []string{s.upgrade}
	}
	s.resp[hdrUpgrade] = append(s.resp[hdrUpgrade], upgrade...)
	s.setRespHeader(hdrConnection, "upgrade")
	return http.StatusSwitchingProtocols
}

// sendUpgradeBody sends the body an HTTP/1.1 upgrade request announced, before its answer
// is awaited (the upstream answers once it has the body), chunked again when it came
// chunked. It returns the upstream's write error, or the client's read error.
func (s *stream) sendUpgradeBody(w io.Writer) (writeErr, readErr error) {
	if s.sc == nil || s.body == nil {
		return nil, nil
	}
	chunked := s.contentLength < 0
	buf := make([]byte, tunnelBufferSize)
	out := make([]byte, 0, tunnelBufferSize+32)
	for {
		n, err := s.body.Read(buf)
		out = out[:0]
		if n > 0 && chunked {
			out = strconv.AppendInt(out, int64(n), 16)
			out = append(out, '\r', '\n')
		}
		out = append(out, buf[:n]...)
		if n > 0 && chunked {
			out = append(out, '\r', '\n')
		}
		if err == io.EOF && chunked {
			out = append(out, "0\r\n\r\n"...)
		}
		if len(out) > 0 {
			if _, werr := w.Write(out); werr != nil {
				return werr, nil
			}
		}
		if err == io.EOF {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// takeAnswer accounts for the upstream's answer to an upgrade (err: none came; h2: it came
// over HTTP/2) and reports whether it opens the tunnel: 101 to an HTTP/1.1 upgrade, a 2xx to
// a CONNECT or over HTTP/2. Any other outcome is answered downstream here: a failure as the
// router answers one, another answer forwarded as a normal response.
func (s *stream) takeAnswer(resp *http.Response, err error, h2 bool, up *pool.TCPConn, m *route.Match, cs *cluster.Stats, upStart time.Time) bool {
	if err != nil {
		kind := failReset
		if isDeadline(err) {
			kind = failTimeout
		}
		s.failReply(kind, err, m)
		return false
	}
	up.SetDeadline(time.Time{})
	s.h.sh.stats.upstream(m.Cluster).charge(resp.StatusCode, cs, s.line)
	s.copyUpgradeHeaders(resp, upStart)
	s.details = "via_upstream"
	ok := resp.StatusCode == http.StatusSwitchingProtocols
	if h2 || s.upgrade == upgradeConnect {
		ok = resp.StatusCode >= 200 && resp.StatusCode < 300
	}
	if !ok {
		s.forwardAnswer(resp, m)
	}
	return ok
}

// readUpgradeResponse reads the upstream's answer to an upgrade request, past interim 1xx
// answers other than 101.
func readUpgradeResponse(br *bufio.Reader, upgrade string) (*http.Response, error) {
	method := http.MethodGet
	if upgrade == upgradeConnect {
		method = http.MethodConnect // a 2xx to a CONNECT has no body: the tunnel follows
	}
	for {
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
	}
}

// upgradeHead builds the HTTP/1.1 request head sent upstream, its names in case c (the
// cluster's header_key_format): the route's path and host rewrites and header mutations
// apply; an extended CONNECT becomes a GET with "upgrade: <protocol>", as Envoy converts it
// for HTTP/1.1 upstreams.
func (s *stream) upgradeHead(m *route.Match, c config.HeaderCase) ([]byte, error) {
	hd := s.upstreamRequest(m).header()
	path, authority := s.outPath, s.outAuthority
	s.fillEntryBasics()
	m.FinalizeRequestHeaders(hd, &s.entry)
	method, target := s.req.Method, path
	switch {
	case s.upgrade == upgradeConnect:
		target = authority
	case s.h2w != nil:
		method = http.MethodGet
	}
	if !http1.ValidToken(method) || !http1.ValidTarget(target) || !http1.ValidAuthority(authority) {
		return nil, errBadTarget
	}
	b := make([]byte, 0, 512)
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, target...)
	b = append(b, " HTTP/1.1\r\n"...)
	b = appendField(b, "host", authority, c)
	for k, vs := range hd {
		if k == hdrHost {
			continue
		}
		for _, v := range vs {
			b = appendField(b, k, v, c)
		}
	}
	if s.upgrade != upgradeConnect {
		b = appendField(b, "connection", "upgrade", c)
		b = appendField(b, "upgrade", s.upgrade, c)
	}
	if s.sc != nil && s.body != nil && s.contentLength < 0 {
		b = appendField(b, "transfer-encoding", "chunked", c) // sendUpgradeBody chunks it again
	}
	return append(b, '\r', '\n'), nil
}

// appendField appends the field line "name: value", the name in case c.
func appendField(b []byte, name, value string, c config.HeaderCase) []byte {
	b = config.AppendName(b, name, c)
	b = append(b, ": "...)
	b = append(b, value...)
	return append(b, '\r', '\n')
}

// copyUpgradeHeaders sets the downstream response headers from the upstream's answer,
// without its hop-by-hop and framing headers.
func (s *stream) copyUpgradeHeaders(resp *http.Response, upStart time.Time) {
	clear(s.resp)
	for k, vs := range resp.Header {
		if skipResponseHeader(k) {
			continue
		}
		s.resp[k] = append(s.resp[k], vs...)
	}
	if !s.h.cfg.Router.SuppressEnvoyHeaders {
		s.setRespHeader(hdrServiceTime, strconv.FormatInt(s.h.sh.deps.Now().Sub(upStart).Milliseconds(), 10))
	}
}

// forwardAnswer forwards an upstream answer that did not open the tunnel as a normal
// response.
func (s *stream) forwardAnswer(resp *http.Response, m *route.Match) {
	defer resp.Body.Close()
	s.sendHead(resp.StatusCode, resp.ContentLength, m)
	buf := make([]byte, tunnelBufferSize)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if s.writeBody(buf[:n]) != nil {
				s.closeConn = true
				return
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			s.flags |= accesslog.UpstreamConnectionTermination
			s.closeConn = true
			s.aborted = true
			if s.h2w == nil {
				s.hw.flush()
			}
			return
		}
	}
	s.finish()
}

// answerTunnel sends the head that opens the tunnel (101 or 200) and flushes it.
func (s *stream) answerTunnel(status int, m *route.Match) {
	s.tunnel = true
	s.closeConn = true // the connection carries the tunnel to its end
	s.sendHead(status, -1, m)
	if s.h2w != nil {
		s.h2w.Flush()
		return
	}
	s.hw.flush()
}

// tunnelEnd is one side of a tunnel.
type tunnelEnd struct {
	r io.Reader
	w io.Writer
	// closeWrite tells the side that no more bytes come (a half-close).
	closeWrite func()
	// abort unblocks every read and write on the side.
	abort func()
}

// tcpEnd is the upstream side of a tunnel on an HTTP/1.1 or TCP connection, read through r
// (up, or a buffer over it).
func tcpEnd(r io.Reader, up *pool.TCPConn) tunnelEnd {
	return tunnelEnd{r: r, w: up, closeWrite: func() { up.CloseWrite() }, abort: func() { up.Close() }}
}

// splice copies bytes between the client and upEnd until both directions have ended,
// applying the idle timeout, and records the bytes and the end for the access log.
func (s *stream) splice(upEnd tunnelEnd, m *route.Match) {
	down := s.downstreamEnd()
	abort := func() {
		down.abort()
		upEnd.abort()
	}
	idle := startIdleTimer(s.tunnelIdleTimeout(m.Route), abort)
	var wg sync.WaitGroup
	var sent int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		var err error
		sent, err = pump(&down, &upEnd, idle)
		if err != nil {
			abort()
		}
	}()
	received, err := pump(&upEnd, &down, idle)
	if err != nil {
		abort()
	}
	wg.Wait()
	if idle.stop() {
		s.flags |= accesslog.StreamIdleTimeout
		s.h.stats.DownstreamRqIdleTimeout.Inc()
	}
	s.bytesIn += received
	s.bytesOut += sent
	s.finish()
}

// pump copies src to dst until src ends (then dst is half-closed) or a read or write fails.
// It returns the bytes copied.
func pump(dst, src *tunnelEnd, idle *idleTimer) (int64, error) {
	buf := make([]byte, tunnelBufferSize)
	var n int64
	for {
		k, err := src.r.Read(buf)
		if k > 0 {
			idle.touch()
			if _, werr := dst.w.Write(buf[:k]); werr != nil {
				return n, werr
			}
			n += int64(k)
		}
		if err == io.EOF {
			dst.closeWrite()
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// downstreamEnd is the client's side of the tunnel. On HTTP/1 it is the socket, with the
// bytes the connection read past the request head first. On HTTP/2 it is the stream: its
// request body and its response; HTTP/2 has no half-close a handler can send, so when the
// upstream side ends the stream is ended (END_STREAM once the handler returns).
func (s *stream) downstreamEnd() tunnelEnd {
	if s.h2w != nil {
		body := &h2TunnelBody{body: s.h2req.Body}
		w := s.h2w
		abort := func() {
			body.body.Close()
			// A write waiting for a client that does not read (no flow-control window) ends
			// only with a write deadline, which resets the stream.
			w.SetWriteDeadline(time.Unix(1, 0))
		}
		return tunnelEnd{r: body, w: h2TunnelWriter{s.h2w}, closeWrite: body.end, abort: abort}
	}
	sc := s.sc
	nc := sc.nc
	nc.SetDeadline(time.Time{}) // the tunnel's idle timer replaces the connection's deadlines
	st := s.h.stats
	// An allow_post POST sends its body, read through the connection's buffer. An upgrade
	// sends the raw bytes that follow its head and its body (sendUpgradeBody sent the body).
	var r io.Reader = s.body
	if r == nil || s.upgrading {
		rd := &sc.rd
		var pre []byte
		if rd.buffered() > 0 {
			pre = append(pre, rd.buf[rd.r:rd.w]...)
			rd.r = rd.w
		}
		r = &countedReader{pre: pre, conn: nc, n: &st.DownstreamCxRxBytesTotal}
	}
	return tunnelEnd{
		r: r,
		w: countedWriter{w: nc, n: &st.DownstreamCxTxBytesTotal},
		closeWrite: func() {
			if cw, ok := halfCloser(sc); ok {
				cw.CloseWrite()
			}
		},
		abort: func() { nc.SetDeadline(time.Unix(1, 0)) },
	}
}

// halfCloser returns what half-closes the client connection: the TLS connection, or the
// TCP socket under the listener's connection.
func halfCloser(sc *serverConn) (interface{ CloseWrite() error }, bool) {
	if cw, ok := sc.nc.(interface{ CloseWrite() error }); ok {
		return cw, true
	}
	cw, ok := sc.lc.Conn.(interface{ CloseWrite() error })
	return cw, ok
}

// tunnelIdleTimeout is the route's idle_timeout, else the connection manager's
// stream_idle_timeout (0: none).
func (s *stream) tunnelIdleTimeout(r *route.Route) time.Duration {
	if r.IdleTimeoutSet {
		return r.IdleTimeout
	}
	return s.h.cfg.StreamIdleTimeout
}

// countedReader reads the bytes the connection buffered before the tunnel started, then the
// socket, counting socket bytes in downstream_cx_rx_bytes_total.
type countedReader struct {
	pre  []byte
	conn net.Conn
	n    interface{ Add(uint64) }
}

func (c *countedReader) Read(p []byte) (int, error) {
	if len(c.pre) > 0 {
		k := copy(p, c.pre)
		c.pre = c.pre[k:]
		return k, nil
	}
	k, err := c.conn.Read(p)
	c.n.Add(uint64(k))
	return k, err
}

// countedWriter writes to the socket, counting bytes in downstream_cx_tx_bytes_total.
type countedWriter struct {
	w net.Conn
	n interface{ Add(uint64) }
}

func (c countedWriter) Write(p []byte) (int, error) {
	k, err := c.w.Write(p)
	c.n.Add(uint64(k))
	return k, err
}

// h2TunnelBody reads an HTTP/2 tunnel's request body. When the upstream side has ended, end
// closes it so that the stream can end too, and the read it interrupts is the body's end,
// not a failure.
type h2TunnelBody struct {
	body  io.ReadCloser
	ended atomic.Bool
}

func (b *h2TunnelBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err != nil && b.ended.Load() {
		err = io.EOF
	}
	return n, err
}

func (b *h2TunnelBody) end() {
	b.ended.Store(true)
	b.body.Close()
}

// h2TunnelWriter writes to an HTTP/2 stream and flushes each write, so that tunnel bytes
// leave at once.
type h2TunnelWriter struct{ w *h2stream }

func (h h2TunnelWriter) Write(p []byte) (int, error) {
	n, err := h.w.Write(p)
	if err == nil {
		err = h.w.FlushError()
	}
	return n, err
}

// idleTimer calls onIdle when no byte has crossed the tunnel for d. A nil *idleTimer (no
// timeout) does nothing.
type idleTimer struct {
	d      time.Duration
	onIdle func()
	mu     sync.Mutex // guards the fields below
	last   time.Time  // when the last byte crossed
	t      *time.Timer
	done   bool // stopped, or fired
	fired  bool
	// running is held while onIdle runs: stop waits for it, so the tunnel's handler does not
	// return (and x/net/http2 free the stream onIdle's abort writes to) under it.
	running sync.WaitGroup
}

func startIdleTimer(d time.Duration, onIdle func()) *idleTimer {
	if d <= 0 {
		return nil
	}
	// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
	it := &idleTimer{d: d, onIdle: onIdle, last: time.Now()}
	it.mu.Lock()
	it.t = time.AfterFunc(d, it.check)
	it.mu.Unlock()
	return it
}

func (it *idleTimer) touch() {
	if it == nil {
		return
	}
	it.mu.Lock()
	// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
	it.last = time.Now()
	it.mu.Unlock()
}

// check runs when the timer fires: the tunnel is idle, or the timer is set again for the
// rest of the period since the last byte.
func (it *idleTimer) check() {
	it.mu.Lock()
	if it.done {
		it.mu.Unlock()
		return
	}
	// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
	if rest := it.d - time.Since(it.last); rest > 0 {
		it.t.Reset(rest)
		it.mu.Unlock()
		return
	}
	it.done, it.fired = true, true
	it.running.Add(1)
	it.mu.Unlock()
	defer it.running.Done()
	it.onIdle()
}

// stop stops the timer and reports whether it had fired.
func (it *idleTimer) stop() bool {
	if it == nil {
		return false
	}
	it.mu.Lock()
	it.done = true
	it.t.Stop()
	fired := it.fired
	it.mu.Unlock()
	it.running.Wait() // an onIdle under way ends first
	return fired
}
