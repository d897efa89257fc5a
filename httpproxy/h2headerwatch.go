package httpproxy

import (
	"bytes"
	"encoding/binary"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/legateproxy/legate/stats"
)

// h2ReadBuffer is the read buffer of an HTTP/2 downstream connection: one read takes what
// the socket has, many frames under load. Frames larger than it are read straight into the
// frame reader's buffer.
const h2ReadBuffer = 8 << 10

// h2 frame types and flags the header watch reads (RFC 9113 §6).
const (
	h2FrameHeaders      = 0x1
	h2FrameContinuation = 0x9
	h2FlagEndHeaders    = 0x4
	h2FrameHeaderLen    = 9
	h2PrefaceLen        = len(h2Preface) + len("\r\nSM\r\n\r\n")
)

// headerWatch applies request_headers_timeout to HTTP/2 streams. Envoy runs a timer per
// stream from its creation (the first HEADERS frame) until its request headers are complete
// (the frame with END_HEADERS), and on expiry answers 408 "request header timeout" and counts
// downstream_rq_header_timeout. The frame reader only hands complete header blocks over, so the watch
// follows the frames as they are read: a HEADERS frame opening a stream arms the timer, the
// end of the frame carrying END_HEADERS disarms it. On expiry the stream gets the 408
// (HEADERS and DATA frames written between the connection's frames, their header fields
// literal and never indexed so the client's HPACK table is untouched) and, because RFC 9113 §6.10 lets
// the client send nothing but the rest of the header block, the connection is closed after a
// GOAWAY naming the last stream whose headers completed.
type headerWatch struct {
	h       *Handler
	c       *h2conn
	timeout time.Duration

	// The read side's frame parser; only the connection's reader touches these.
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
	stopped  bool
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
	if !hw.open || hw.stopped {
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
	l := stats.ThisLine()
	st.responseCode(http.StatusRequestTimeout, l)
	h.lstats.responseCode(http.StatusRequestTimeout, l)
	reply := headerTimeoutReply(id, last)
	c := hw.c
	c.mu.Lock()
	if !c.closing {
		c.closing = true
		c.w.Buf = append(c.w.Buf, reply...)
		c.flushLocked()
	}
	c.mu.Unlock()
	c.nc.Close()
}

// stop disarms the timer once the connection ended.
func (hw *headerWatch) stop() {
	hw.mu.Lock()
	hw.stopped, hw.open = true, false
	if hw.timer != nil {
		hw.timer.Stop()
	}
	hw.mu.Unlock()
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
