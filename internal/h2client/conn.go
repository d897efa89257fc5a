// Package h2client is Legate's HTTP/2 client connection to an upstream, on x/net/http2's frame
// layer (http2.Framer) and HPACK decoder.
//
// One goroutine per connection reads frames and hands each stream's response head, body and
// trailers to the goroutine waiting for them; requests are encoded by the calling goroutine
// into the connection's pending bytes under one mutex, never held across a system call, and
// written out by whichever writer finds no write in progress, so that requests arriving
// together share a write. A request body is sent by
// a goroutine of its own (the response may start, and a bidirectional stream go on, before
// the body ends); a request without one is a single HEADERS frame.
//
// Locks: Conn.wmu (pending bytes) is taken before Conn.mu (stream table, windows,
// settings), and Stream.mu (a stream's response) after either; the read loop never takes wmu
// while it holds mu.
package h2client

import (
	"bufio"
	"errors"
	"fmt"
	"github.com/legateproxy/legate/internal/h2wire"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Config configures a connection.
type Config struct {
	// StreamWindow is the receive window of each stream: how much of a response may wait
	// unread. 0 means 65535.
	StreamWindow int32
	// ConnWindow is the connection's receive window; 0 means 1 GiB.
	ConnWindow int32
	// MaxHeaderBytes bounds a response head's (or trailer section's) decoded names and
	// values; a larger one fails its stream. 0 means 1 MiB.
	MaxHeaderBytes int
	// HeaderTableSize is the HPACK dynamic table the peer may use for responses; 0 means
	// 4096.
	HeaderTableSize uint32
	// PingInterval, when set, sends a PING after that long without a frame from the peer;
	// the connection closes when PingTimeout passes without its answer.
	PingInterval, PingTimeout time.Duration
}

// Errors a stream or connection ends with. Callers branch on them with errors.Is.
var (
	// ErrClosed: the connection closed (locally, by the peer, or on an I/O error).
	ErrClosed = errors.New("http2: connection closed")
	// ErrUnprocessed: the peer did not process the stream (GOAWAY with a lower last stream
	// id, or RST_STREAM REFUSED_STREAM before any response): it may be retried elsewhere.
	ErrUnprocessed = errors.New("http2: stream not processed by the upstream")
	// ErrCanceled: the stream was cancelled locally (Stream.Cancel).
	ErrCanceled = errors.New("http2: stream cancelled")
)

// StreamError is a stream's reset: by the peer (Remote) or by Legate for a protocol error.
type StreamError struct {
	Code   http2.ErrCode
	Remote bool
	Reason string
}

func (e *StreamError) Error() string {
	if e.Remote {
		return fmt.Sprintf("http2: stream reset by the upstream: %v", e.Code)
	}
	return fmt.Sprintf("http2: stream error %v: %s", e.Code, e.Reason)
}

// maxStreamID is the last client stream id (RFC 9113 §5.1.1).
const maxStreamID = math.MaxInt32

// Conn is one HTTP/2 client connection.
type Conn struct {
	nc  net.Conn
	cfg Config
	fr  *http2.Framer // frames are read by the read loop, written under wmu (into w.Buf)

	// Writing: frames are appended to w.Buf under wmu, which is never held across a system
	// call. The writer that finds no write in progress (h2wire.Writer.Flush) writes it out, outside
	// wmu, and goes on while others appended more; the others return at once. Streams
	// opened together thus share a write, and nobody waits for wmu behind a socket write.
	wmu     sync.Mutex
	w       h2wire.Writer // Err: the first write error
	drained sync.Cond     // on wmu: the writer in progress took what was pending
	hbuf    []byte        // header block being written

	mu       sync.Mutex
	sendCond sync.Cond // on mu: send window opened, or a stream or the connection ended
	streams  map[uint32]*Stream
	nextID   uint32
	reserved int
	peerMax  uint32 // peer's SETTINGS_MAX_CONCURRENT_STREAMS
	peerWin  int32  // peer's SETTINGS_INITIAL_WINDOW_SIZE
	sendWin  int64  // connection send window
	goAway   bool
	lastID   uint32 // GOAWAY's last stream id
	closed   bool
	err      error
	maxFrame atomic.Uint32 // peer's SETTINGS_MAX_FRAME_SIZE
	// state mirrors closed (stateClosed) and "no new streams" (stateClosing) for the pool's
	// look at each connection without mu.
	state atomic.Uint32

	// Receive flow control: recvWin is the connection window left to the peer (read loop
	// takes, readers return through unacked).
	recvWin atomic.Int64
	unacked atomic.Int64

	// Read loop only: the header block being decoded.
	dec *hpack.Decoder
	blk headerBlock
	// cur is the stream the read loop last looked up, which it may use outside mu until its
	// next look-up: a stream released meanwhile goes back to the stream pool only then
	// (Stream.recycle). Guarded by mu.
	cur *Stream

	// Keepalive (PingInterval).
	sawFrame atomic.Bool
	pingOut  atomic.Bool
	ping     *time.Timer

	done chan struct{} // closed when the read loop has ended
}

// New starts an HTTP/2 connection on nc: it writes the preface and SETTINGS and starts the
// read loop. It does not wait for the peer's SETTINGS.
func New(nc net.Conn, cfg Config) (*Conn, error) {
	if cfg.StreamWindow <= 0 {
		cfg.StreamWindow = 65535
	}
	if cfg.ConnWindow <= 0 {
		cfg.ConnWindow = 1 << 30
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = 1 << 20
	}
	if cfg.HeaderTableSize == 0 {
		cfg.HeaderTableSize = 4096
	}
	c := &Conn{
		nc:      nc,
		cfg:     cfg,
		streams: map[uint32]*Stream{},
		nextID:  1,
		peerMax: 100, // until the peer's SETTINGS say otherwise, as x/net assumes
		peerWin: 65535,
		sendWin: 65535,
		done:    make(chan struct{}),
	}
	c.sendCond.L = &c.mu
	c.drained.L = &c.wmu
	c.w.Wake = &c.drained
	c.maxFrame.Store(16384)
	c.recvWin.Store(int64(cfg.ConnWindow))
	c.fr = http2.NewFramer((*frameSink)(c), bufio.NewReaderSize(nc, 16<<10))
	c.fr.SetReuseFrames()
	c.fr.SetMaxReadFrameSize(16384) // the default, which Legate's SETTINGS leave as is
	c.dec = hpack.NewDecoder(cfg.HeaderTableSize, c.emit)
	// A string longer than MaxHeaderBytes fails its stream (emit); this bound only keeps
	// the decoder's buffer in line with the block's own (blockFragment).
	c.dec.SetMaxStringLength(4*cfg.MaxHeaderBytes + 4096)
	c.w.Buf = append(c.w.Buf, http2.ClientPreface...)
	err := c.fr.WriteSettings(
		http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(cfg.StreamWindow)},
		http2.Setting{ID: http2.SettingHeaderTableSize, Val: cfg.HeaderTableSize},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: uint32(min(cfg.MaxHeaderBytes+cfg.MaxHeaderBytes/4, math.MaxInt32))},
	)
	if err == nil && cfg.ConnWindow > 65535 {
		err = c.fr.WriteWindowUpdate(0, uint32(cfg.ConnWindow-65535))
	}
	if err == nil {
		_, err = nc.Write(c.w.Buf)
		c.w.Buf = c.w.Buf[:0]
	}
	if err != nil {
		return nil, err
	}
	if cfg.PingInterval > 0 {
		// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
		c.ping = time.AfterFunc(cfg.PingInterval, c.keepalive)
	}
	go c.readLoop()
	return c, nil
}

// Reserve takes a stream slot for a coming Open when the connection takes new streams and
// the peer's SETTINGS_MAX_CONCURRENT_STREAMS leaves room.
func (c *Conn) Reserve() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.goAway || c.nextID+2*uint32(c.reserved) > maxStreamID {
		return false
	}
	if uint32(len(c.streams)+c.reserved) >= c.peerMax {
		return false
	}
	c.reserved++
	return true
}

// Unreserve returns a slot Reserve took that Open will not use.
func (c *Conn) Unreserve() {
	c.mu.Lock()
	c.reserved--
	c.closeIfDoneLocked()
	c.mu.Unlock()
}

// Connection states (Conn.state).
const (
	stateClosing uint32 = 1 << iota // GOAWAY received, or stream ids used up
	stateClosed
)

// Closed reports whether the connection is closed.
func (c *Conn) Closed() bool { return c.state.Load()&stateClosed != 0 }

// Closing reports whether the connection takes no new streams (closed, GOAWAY received, or
// stream ids used up).
func (c *Conn) Closing() bool { return c.state.Load() != 0 }

// noteStateLocked updates state from the fields it mirrors; mu is held.
func (c *Conn) noteStateLocked() {
	var st uint32
	if c.goAway || c.nextID > maxStreamID {
		st |= stateClosing
	}
	if c.closed {
		st |= stateClosed | stateClosing
	}
	c.state.Store(st)
}

// Close closes the connection; its streams fail with ErrClosed.
func (c *Conn) Close() error {
	c.fail(ErrClosed)
	return nil
}

// Done is closed once the connection's read loop has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// fail closes the connection with err, failing every stream.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed, c.err = true, err
	c.noteStateLocked()
	streams := c.streams
	c.streams = map[uint32]*Stream{}
	for _, s := range streams {
		s.failLocked(err)
	}
	c.sendCond.Broadcast()
	c.mu.Unlock()
	if c.ping != nil {
		c.ping.Stop()
	}
	c.nc.Close()
	for _, s := range streams {
		s.signal() // a stream reused since only wakes its new reader for nothing
	}
}

// closeIfDoneLocked closes a connection that received GOAWAY once its last stream is over.
// c.mu is held; the close happens on another goroutine, which takes it.
func (c *Conn) closeIfDoneLocked() {
	if c.goAway && !c.closed && len(c.streams) == 0 && c.reserved == 0 {
		go c.fail(ErrClosed)
	}
}

// startWrite takes the write lock.
func (c *Conn) startWrite() { c.wmu.Lock() }

// endWrite releases the write lock after writing out what was appended, unless a write is in
// progress, whose writer then writes it too. A write error closes the connection.
func (c *Conn) endWrite() error {
	if c.w.Err != nil || !c.flush() {
		// Request bodies wait while maxPending is already waiting for the socket: the
		// peer's windows alone would let them buffer without bound.
		for c.w.Flushing() && len(c.w.Buf) > maxPending && c.w.Err == nil {
			c.drained.Wait()
		}
		err := c.w.Err
		c.wmu.Unlock()
		return err
	}
	err := c.w.Err
	c.wmu.Unlock()
	if err != nil {
		c.fail(fmt.Errorf("%w: %w", ErrClosed, err))
	}
	return err
}

// flush writes out what is pending unless a write is in progress; wmu is held.
func (c *Conn) flush() bool {
	flushed, _ := c.w.Flush(&c.wmu, c.nc)
	return flushed
}

// maxPending is how much may wait behind a write in progress before writers wait for it.
const maxPending = 256 << 10

// frameSink is where the framer writes: the connection's pending bytes, under wmu.
type frameSink Conn

func (w *frameSink) Write(p []byte) (int, error) {
	w.w.Buf = append(w.w.Buf, p...)
	return len(p), nil
}

// noteWriteErr keeps the first write error; wmu is held.
func (c *Conn) noteWriteErr(err error) {
	if err != nil && c.w.Err == nil {
		c.w.Err = err
	}
}

// writeBlock writes a header block as HEADERS and CONTINUATION frames; wmu is held.
func (c *Conn) writeBlock(id uint32, block []byte, endStream bool) {
	max := int(c.maxFrame.Load())
	n := min(len(block), max)
	c.noteWriteErr(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:n], EndStream: endStream, EndHeaders: n == len(block)}))
	for block = block[n:]; len(block) > 0; block = block[n:] {
		n = min(len(block), max)
		c.noteWriteErr(c.fr.WriteContinuation(id, n == len(block), block[:n]))
	}
}

// writeReset sends RST_STREAM.
func (c *Conn) writeReset(id uint32, code http2.ErrCode) {
	c.startWrite()
	c.noteWriteErr(c.fr.WriteRSTStream(id, code))
	c.endWrite()
}

// writeWindowUpdate returns n bytes of window to the peer.
func (c *Conn) writeWindowUpdate(id uint32, n uint32) {
	c.startWrite()
	c.noteWriteErr(c.fr.WriteWindowUpdate(id, n))
	c.endWrite()
}

// consumed returns n bytes read from a stream to the connection's receive window, in
// batches of half the window.
func (c *Conn) consumed(n int) {
	if n <= 0 {
		return
	}
	u := c.unacked.Add(int64(n))
	if u < int64(c.cfg.ConnWindow/2) || !c.unacked.CompareAndSwap(u, 0) {
		return
	}
	c.recvWin.Add(u)
	c.writeWindowUpdate(0, uint32(u))
}

// keepalive runs on the keepalive timer: a PING after PingInterval without a frame from the
// peer, the connection closed when it is not answered within PingTimeout.
func (c *Conn) keepalive() {
	if c.pingOut.Load() {
		c.fail(fmt.Errorf("%w: no answer to a keepalive PING within %v", ErrClosed, c.cfg.PingTimeout))
		return
	}
	if c.sawFrame.Swap(false) {
		c.ping.Reset(c.cfg.PingInterval)
		return
	}
	c.pingOut.Store(true)
	c.startWrite()
	c.noteWriteErr(c.fr.WritePing(false, [8]byte{'l', 'e', 'g', 'a', 't', 'e'}))
	if c.endWrite() == nil {
		c.ping.Reset(max(c.cfg.PingTimeout, time.Millisecond))
	}
}

// pingAnswered notes a PING ack.
func (c *Conn) pingAnswered() {
	if c.pingOut.Swap(false) {
		c.ping.Reset(c.cfg.PingInterval)
	}
}
