package httpproxy

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2ReadBuffer is the read buffer of an HTTP/2 downstream connection. Reads of at least this
// size go straight to the socket.
const h2ReadBuffer = 8 << 10

// h2 frame types and flags the header watch reads (RFC 9113 §6).
const (
	h2FrameHeaders      = 0x1
	h2FrameContinuation = 0x9
	h2FlagEndHeaders    = 0x4
	h2FrameHeaderLen    = 9
	h2PrefaceLen        = len(h2Preface) + len("\r\nSM\r\n\r\n")
)

// h2wire is the socket of an HTTP/2 downstream connection as http2.Server uses it.
//
//   - Some frames are held whole and rewritten before http2 reads them (frameGate).
//   - Reads are buffered: http2's framer reads each frame header and each payload straight
//     from its connection, two system calls per frame; one buffered read takes what the socket
//     has, many frames under load.
//   - Response headers are held back briefly for the DATA that follows them (corking):
//     http2 writes a response's HEADERS frame, waits until it is written and flushed, and only
//     then takes the DATA frame, so every response cost two socket writes. A flush whose last
//     frame is a HEADERS frame that does not end its stream is kept for up to corkDelay and
//     goes out with the next write (or alone when the delay passes, or before a close).
//   - A failed read or write (end of stream or reset from the peer) is noted, so that
//     streams cut by the peer's close are told from streams it reset (downstream_rq_rx_reset).
//   - With request_headers_timeout, the frames read are followed (headerWatch).
//   - The client's connection preface is checked as it is read (checkPreface): http2 closes
//     a connection with a wrong one at once, which resets it (its unread bytes are dropped)
//     before the client reads anything; RFC 9113 §3.4 makes it a connection error.
//
// Read runs on http2's read goroutine only. Writes come from http2 one at a time and from
// the cork and header timers; wmu orders them.
type h2wire struct {
	net.Conn
	h       *Handler
	preface int    // bytes of the client preface checked so far
	buf     []byte // made on first use
	r, w    int    // unread bytes are buf[r:w]
	ready   int    // of which buf[r:r+ready] may be handed to http2 (frameGate)
	// refused are the last streams takeReset refused (HEADERS and RST_STREAM read together),
	// nrefused how many were: a later HEADERS on one is a connection error (wasRefused). They
	// belong to http2's read goroutine, as the gate does.
	refused  [8]uint32
	nrefused uint32
	gate     frameGate
	peerGone atomic.Bool
	hw       *headerWatch // nil without request_headers_timeout
	resets   resetGuard   // the premature reset guard (h2reset.go)
	draining atomic.Bool  // it closed the connection
	// shutWrite shuts the socket's write side (a FIN, after TLS's close_notify).
	shutWrite func()

	wmu    sync.Mutex // guards the fields below
	out    frameCursor
	cork   []byte      // held frames, whole; empty when none
	timer  *time.Timer // writes cork when corkDelay passes; made on first use
	werr   error       // the failure of a write of held frames, returned by the next Write
	calm   []byte      // a GOAWAY of the wire's own (goAway), waiting for a frame boundary
	calmAt time.Time   // when it was sent; read by linger after draining is set
	// corkFor replaces corkDelay when set (tests that must not depend on the scheduler).
	corkFor time.Duration
}

// corkDelay bounds how long response headers wait for their DATA frame; the DATA of a
// response whose body is at hand follows within microseconds.
const corkDelay = 200 * time.Microsecond

// maxCork bounds the bytes held back.
const maxCork = 16 << 10

// frameCursor follows frame boundaries in a byte stream of HTTP/2 frames.
type frameCursor struct {
	hdr  [h2FrameHeaderLen]byte
	nh   int // bytes of hdr filled
	left int // payload bytes left in the current frame
}

// atBoundary reports whether the bytes so far end a frame.
func (c *frameCursor) atBoundary() bool { return c.nh == 0 && c.left == 0 }

// advance moves over b and returns the type and flags of the last frame whose header b
// completed (typ 0xff when none).
func (c *frameCursor) advance(b []byte) (typ, flags byte) {
	typ = 0xff
	for len(b) > 0 {
		if c.left > 0 {
			k := min(c.left, len(b))
			c.left -= k
			b = b[k:]
			continue
		}
		k := copy(c.hdr[c.nh:], b)
		c.nh += k
		b = b[k:]
		if c.nh == h2FrameHeaderLen {
			c.nh = 0
			c.left = int(c.hdr[0])<<16 | int(c.hdr[1])<<8 | int(c.hdr[2])
			typ, flags = c.hdr[3], c.hdr[4]
		}
	}
	return typ, flags
}

// h2wireTLS is an h2wire over TLS: http2.Server reads the TLS state through
// ConnectionState.
type h2wireTLS struct {
	*h2wire
	tc *tls.Conn
}

// ConnectionState is the TLS connection's state.
func (w h2wireTLS) ConnectionState() tls.ConnectionState { return w.tc.ConnectionState() }

// newH2Wire wraps conn (nc, or nc behind a replayed preface) for http2; raw is the socket
// under nc.
func (h *Handler) newH2Wire(conn, nc, raw net.Conn) (*h2wire, net.Conn) {
	w := &h2wire{Conn: conn, h: h, gate: frameGate{skip: h2PrefaceLen}, shutWrite: shutWriter(nc, raw), resets: h.newResetGuard()}
	if d := h.cfg.RequestHeadersTimeout; d > 0 {
		w.hw = &headerWatch{h: h, wire: w, timeout: d, skip: h2PrefaceLen}
	}
	if tc, ok := nc.(*tls.Conn); ok {
		return w, h2wireTLS{h2wire: w, tc: tc}
	}
	return w, w
}

func (w *h2wire) Read(p []byte) (int, error) {
	if w.draining.Load() {
		return 0, w.linger()
	}
	n, err := w.read(p)
	if w.preface < len(http2.ClientPreface) && n > 0 && !w.checkPreface(p[:n]) {
		return 0, w.badPreface()
	}
	return n, err
}

func (w *h2wire) read(p []byte) (int, error) {
	if w.ready == 0 {
		if g := &w.gate; w.r == w.w && g.skip == 0 && len(p) >= h2ReadBuffer && g.left >= len(p) {
			// Inside a frame that passes as is: straight from the socket.
			n, err := w.Conn.Read(p)
			g.left -= n
			w.arrived(p[:n])
			w.failed(err)
			return n, err
		}
		if err := w.advance(); err != nil && w.ready == 0 {
			w.failed(err)
			return 0, err
		}
	}
	n := copy(p, w.buf[w.r:w.r+w.ready])
	w.r += n
	w.ready -= n
	return n, nil
}

// checkPreface compares bytes read with the part of the client preface they stand for.
func (w *h2wire) checkPreface(p []byte) bool {
	want := http2.ClientPreface[w.preface:]
	k := min(len(p), len(want))
	w.preface += k
	return string(p[:k]) == want[:k]
}

// errBadPreface ends a connection whose client preface is wrong.
var errBadPreface = errors.New("http2: invalid client connection preface")

// prefaceDrain bounds how long a connection with a wrong preface is read before it closes.
const prefaceDrain = 250 * time.Millisecond

// badPreface answers a wrong client preface with a GOAWAY (PROTOCOL_ERROR) and reads what
// the client sent until it closes or prefaceDrain passes, so that the connection ends with
// a FIN the client reads after the GOAWAY, not with a reset. It runs on http2's read
// goroutine, before http2 serves any stream.
func (w *h2wire) badPreface() error {
	w.h.stats.DownstreamCxProtocolError.Inc()
	var out bytes.Buffer
	http2.NewFramer(&out, nil).WriteGoAway(0, http2.ErrCodeProtocol, nil)
	w.wmu.Lock()
	w.flushCork()
	if w.out.atBoundary() && w.werr == nil {
		w.Conn.Write(out.Bytes())
	}
	w.wmu.Unlock()
	// Real clock: a socket deadline, which the runtime poller compares with the system clock.
	w.Conn.SetReadDeadline(time.Now().Add(prefaceDrain))
	var discard [512]byte
	for {
		if _, err := w.Conn.Read(discard[:]); err != nil {
			return errBadPreface
		}
	}
}

// arrived follows bytes as they come from the socket. The header watch sees them before the
// frame gate holds or rewrites them, so that a header block's timer starts with the first
// bytes of its frame, however slowly the rest comes.
func (w *h2wire) arrived(p []byte) {
	if w.hw != nil && len(p) > 0 {
		w.hw.read(p)
	}
}

// failed notes a read or write failure that means the peer went away: http2 closes the
// connection on either, and the failed write may come first (the peer reset the connection
// before the read side saw it).
func (w *h2wire) failed(err error) {
	if err != nil && !errors.Is(err, net.ErrClosed) {
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			w.peerGone.Store(true)
		}
	}
}

const h2FlagEndStream = 0x1

func (w *h2wire) Write(p []byte) (int, error) {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if err := w.werr; err != nil {
		return 0, err
	}
	if w.draining.Load() {
		return len(p), nil // the GOAWAY was the last frame; http2's writes are dropped
	}
	whole := w.out.atBoundary()
	typ, flags := w.out.advance(p)
	if whole && w.out.atBoundary() && typ == h2FrameHeaders && flags&(h2FlagEndHeaders|h2FlagEndStream) == h2FlagEndHeaders &&
		len(w.cork)+len(p) <= maxCork {
		w.hold(p)
		return len(p), nil
	}
	buf := p
	if len(w.cork) > 0 {
		w.timer.Stop()
		w.cork = append(w.cork, p...)
		buf = w.cork
	}
	n, err := w.Conn.Write(buf)
	w.cork = w.cork[:0]
	if err != nil {
		w.failed(err)
		return max(n-(len(buf)-len(p)), 0), err
	}
	w.afterWrite()
	return len(p), nil
}

// hold keeps p (whole frames ending in response HEADERS) for the next write; wmu is held.
func (w *h2wire) hold(p []byte) {
	if len(w.cork) == 0 {
		d := corkDelay
		if w.corkFor > 0 {
			d = w.corkFor
		}
		if w.timer == nil {
			// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
			w.timer = time.AfterFunc(d, w.uncork)
		} else {
			w.timer.Reset(d)
		}
	}
	w.cork = append(w.cork, p...)
}

// uncork writes held frames whose delay has passed.
func (w *h2wire) uncork() {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	w.flushCork()
	w.afterWrite()
}

// flushCork writes the held frames; wmu is held.
func (w *h2wire) flushCork() {
	if len(w.cork) == 0 {
		return
	}
	w.timer.Stop()
	if _, err := w.Conn.Write(w.cork); err != nil && w.werr == nil {
		w.failed(err)
		w.werr = err
	}
	w.cork = w.cork[:0]
}

// afterWrite sends a pending header timeout reply or GOAWAY at a frame boundary; wmu is held.
func (w *h2wire) afterWrite() {
	if w.calm != nil && w.out.atBoundary() && len(w.cork) == 0 {
		w.sendCalm()
	}
	if w.hw != nil && w.hw.pending != nil && w.out.atBoundary() && len(w.cork) == 0 {
		w.hw.send(w.hw.pending)
		w.hw.pending = nil
	}
}

// Close writes held frames and closes the connection.
func (w *h2wire) Close() error {
	w.wmu.Lock()
	w.flushCork()
	w.wmu.Unlock()
	return w.Conn.Close()
}

// headerWatch applies request_headers_timeout to HTTP/2 streams. Envoy runs a timer per
// stream from its creation (the first HEADERS frame) until its request headers are complete
// (the frame with END_HEADERS), and on expiry answers 408 "request header timeout" and counts
// downstream_rq_header_timeout. http2 only hands complete header blocks over, so the watch
// follows the frames as they are read: a HEADERS frame opening a stream arms the timer, the
// end of the frame carrying END_HEADERS disarms it. On expiry the stream gets the 408
// (HEADERS and DATA frames written between http2's frames, their header fields literal and
// never indexed so the client's HPACK table is untouched) and, because RFC 9113 §6.10 lets
// the client send nothing but the rest of the header block, the connection is closed after a
// GOAWAY naming the last stream whose headers completed.
type headerWatch struct {
	h       *Handler
	wire    *h2wire
	timeout time.Duration

	// The read side's frame parser; only the read goroutine touches these.
	skip      int // connection preface bytes still to pass over
	hdr       [h2FrameHeaderLen]byte
	nh        int  // bytes of hdr filled
	left      int  // payload bytes left in the current frame
	endsBlock bool // the current frame ends the watched header block
	inBlock   bool // a watched header block is open
	maxStream uint32

	mu       sync.Mutex // guards the fields below, shared with the timer
	timer    *time.Timer
	open     bool      // a header block is open
	stream   uint32    // its stream
	deadline time.Time // when it times out
	lastDone uint32    // the last stream whose header block completed

	pending []byte // the timeout reply, waiting for a frame boundary; guarded by wire.wmu
}

// read follows the frames in bytes just read.
func (hw *headerWatch) read(b []byte) {
	for len(b) > 0 {
		switch {
		case hw.skip > 0:
			n := min(hw.skip, len(b))
			hw.skip -= n
			b = b[n:]
		case hw.left > 0:
			n := min(hw.left, len(b))
			hw.left -= n
			b = b[n:]
			if hw.left == 0 && hw.endsBlock {
				hw.blockDone()
			}
		default:
			n := copy(hw.hdr[hw.nh:], b)
			hw.nh += n
			b = b[n:]
			if hw.nh == h2FrameHeaderLen {
				hw.nh = 0
				hw.frame()
			}
		}
	}
}

// frame handles a frame header just read.
func (hw *headerWatch) frame() {
	h := &hw.hdr
	hw.left = int(h[0])<<16 | int(h[1])<<8 | int(h[2])
	typ, flags := h[3], h[4]
	id := binary.BigEndian.Uint32(h[5:]) & 0x7fffffff
	hw.endsBlock = false
	switch typ {
	case h2FrameHeaders:
		if id > hw.maxStream { // a new stream (a HEADERS frame of an open one is trailers)
			hw.maxStream = id
			hw.blockStart(id)
		}
		hw.endsBlock = hw.inBlock && flags&h2FlagEndHeaders != 0
	case h2FrameContinuation:
		hw.endsBlock = hw.inBlock && flags&h2FlagEndHeaders != 0
	}
	if hw.endsBlock && hw.left == 0 {
		hw.blockDone()
	}
}

func (hw *headerWatch) blockStart(id uint32) {
	hw.inBlock = true
	hw.mu.Lock()
	hw.open, hw.stream = true, id
	// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
	hw.deadline = time.Now().Add(hw.timeout)
	if hw.timer == nil {
		hw.timer = time.AfterFunc(hw.timeout, hw.expire)
	} else {
		hw.timer.Reset(hw.timeout)
	}
	hw.mu.Unlock()
}

func (hw *headerWatch) blockDone() {
	hw.inBlock, hw.endsBlock = false, false
	hw.mu.Lock()
	hw.open = false
	hw.lastDone = hw.stream
	hw.timer.Stop()
	hw.mu.Unlock()
}

// expire runs on the timer's goroutine.
func (hw *headerWatch) expire() {
	hw.mu.Lock()
	if !hw.open {
		hw.mu.Unlock()
		return
	}
	// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
	if left := time.Until(hw.deadline); left > 0 { // a later block re-armed the timer
		hw.timer.Reset(left)
		hw.mu.Unlock()
		return
	}
	hw.open = false
	id, last := hw.stream, hw.lastDone
	hw.mu.Unlock()

	h := hw.h
	st := h.stats
	st.DownstreamRqTotal.Inc()
	st.DownstreamRqHTTP2Total.Inc()
	st.DownstreamRqHeaderTimeout.Inc()
	st.responseCode(http.StatusRequestTimeout)
	h.lstats.responseCode(http.StatusRequestTimeout)
	reply := headerTimeoutReply(id, last)
	w := hw.wire
	w.wmu.Lock()
	defer w.wmu.Unlock()
	w.flushCork()
	if w.out.atBoundary() {
		hw.send(reply)
		return
	}
	hw.pending = reply
}

// send writes the timeout reply and closes the connection; wire.wmu is held.
func (hw *headerWatch) send(reply []byte) {
	hw.wire.Conn.Write(reply)
	hw.wire.Conn.Close()
}

// headerTimeoutReply is the frames answering a stream whose request headers timed out:
// HEADERS (:status 408, text/plain) and DATA "request header timeout" ending the stream, then
// GOAWAY (NO_ERROR) with last as the last stream processed.
func headerTimeoutReply(id, last uint32) []byte {
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	body := bodyRequestHeaderTimeout
	for _, f := range [...][2]string{
		{":status", strconv.Itoa(http.StatusRequestTimeout)},
		{"content-type", textPlain},
		{"content-length", strconv.Itoa(len(body))},
	} {
		// Sensitive: never indexed, so the client's dynamic table, which http2's own encoder
		// tracks, does not change.
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1], Sensitive: true})
	}
	var out bytes.Buffer
	fr := http2.NewFramer(&out, nil)
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true})
	fr.WriteData(id, true, []byte(body))
	fr.WriteGoAway(last, http2.ErrCodeNo, nil)
	return out.Bytes()
}
