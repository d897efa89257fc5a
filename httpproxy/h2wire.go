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
//   - Reads are buffered: http2's framer reads each frame header and each payload straight
//     from its connection, two system calls per frame; one buffered read takes what the socket
//     has, many frames under load.
//   - A failed read (end of stream or reset from the peer) is noted, so that streams cut by
//     the peer's close are told from streams it reset (downstream_rq_rx_reset).
//   - With request_headers_timeout, the frames read are followed (headerWatch).
//
// Read runs on http2's read goroutine only; http2 issues one Write at a time, and the header
// watch's timer writes under headerWatch.wmu.
type h2wire struct {
	net.Conn
	buf      []byte // made on first use
	r, w     int    // unread bytes are buf[r:w]
	peerGone atomic.Bool
	hw       *headerWatch // nil without request_headers_timeout
}

// h2wireTLS is an h2wire over TLS: http2.Server reads the TLS state through
// ConnectionState.
type h2wireTLS struct {
	*h2wire
	tc *tls.Conn
}

// ConnectionState is the TLS connection's state.
func (w h2wireTLS) ConnectionState() tls.ConnectionState { return w.tc.ConnectionState() }

// newH2Wire wraps conn (nc, or nc behind a replayed preface) for http2.
func (h *Handler) newH2Wire(conn, nc net.Conn) (*h2wire, net.Conn) {
	w := &h2wire{Conn: conn}
	if d := h.cfg.RequestHeadersTimeout; d > 0 {
		w.hw = &headerWatch{h: h, wire: w, timeout: d, skip: h2PrefaceLen}
	}
	if tc, ok := nc.(*tls.Conn); ok {
		return w, h2wireTLS{h2wire: w, tc: tc}
	}
	return w, w
}

func (w *h2wire) Read(p []byte) (int, error) {
	if w.r == w.w {
		if len(p) >= h2ReadBuffer {
			n, err := w.Conn.Read(p)
			w.got(p[:n], err)
			return n, err
		}
		if w.buf == nil {
			w.buf = make([]byte, h2ReadBuffer)
		}
		n, err := w.Conn.Read(w.buf)
		w.r, w.w = 0, n
		if n == 0 {
			w.got(nil, err)
			return 0, err
		}
	}
	n := copy(p, w.buf[w.r:w.w])
	w.r += n
	w.got(p[:n], nil)
	return n, nil
}

// got accounts for bytes read and a read failure.
func (w *h2wire) got(p []byte, err error) {
	if w.hw != nil && len(p) > 0 {
		w.hw.read(p)
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			w.peerGone.Store(true)
		}
	}
}

func (w *h2wire) Write(p []byte) (int, error) {
	if w.hw == nil {
		return w.Conn.Write(p)
	}
	return w.hw.write(p)
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

	wmu     sync.Mutex // orders writes; guards the write side's parser and pending
	whdr    [h2FrameHeaderLen]byte
	wnh     int
	wleft   int
	pending []byte // the timeout reply, waiting for a frame boundary
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
	hw.wmu.Lock()
	defer hw.wmu.Unlock()
	if hw.wnh == 0 && hw.wleft == 0 {
		hw.send(reply)
		return
	}
	hw.pending = reply
}

// send writes the timeout reply and closes the connection; wmu is held.
func (hw *headerWatch) send(reply []byte) {
	hw.wire.Conn.Write(reply)
	hw.wire.Conn.Close()
}

// write passes http2's bytes to the socket and follows their frame boundaries, so that a
// timeout reply goes out between two frames.
func (hw *headerWatch) write(p []byte) (int, error) {
	hw.wmu.Lock()
	defer hw.wmu.Unlock()
	n, err := hw.wire.Conn.Write(p)
	b := p[:n]
	for len(b) > 0 {
		if hw.wleft > 0 {
			k := min(hw.wleft, len(b))
			hw.wleft -= k
			b = b[k:]
			continue
		}
		k := copy(hw.whdr[hw.wnh:], b)
		hw.wnh += k
		b = b[k:]
		if hw.wnh == h2FrameHeaderLen {
			hw.wnh = 0
			hw.wleft = int(hw.whdr[0])<<16 | int(hw.whdr[1])<<8 | int(hw.whdr[2])
		}
	}
	if hw.pending != nil && hw.wnh == 0 && hw.wleft == 0 {
		hw.send(hw.pending)
		hw.pending = nil
	}
	return n, err
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
