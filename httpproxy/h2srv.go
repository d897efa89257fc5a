package httpproxy

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/internal/h2wire"
	"github.com/legateproxy/legate/listener"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Legate's own HTTP/2 server connection (RFC 9113), on x/net/http2's frame layer only
// (http2.Framer for reading frames other than header blocks, which h2block.go decodes with
// its own hpack.Decoder; responses' header blocks are encoded by internal/h2wire, without
// a dynamic table).
//
// One goroutine per connection reads frames (serve) and keeps the connection's state: its
// streams, settings, both directions' flow-control windows. Each stream's handler runs on a
// goroutine of its own (h2Workers, parked goroutines whose stacks have already grown). There
// is no writer goroutine: whoever has frames to send (a handler, the reader with its acks and
// window updates, a timer) encodes them into the connection's write buffer under mu and
// flushes; when a flush is already writing, the new frames go with its next write
// (flushLocked), so that responses of several streams finishing together share one write.
// A handler whose flow-control window is empty waits on its stream's condition, which the
// reader signals on WINDOW_UPDATE and SETTINGS.
//
// The reader starts a stream's handler only once no frame that could end the stream is
// already buffered behind its HEADERS (launch): a client resetting streams as fast as it
// opens them (CVE-2023-44487) has them refused before a handler, a route or an upstream
// request is spent on them.

// Frame-level limits of the server.
const (
	h2MaxFrame      = 16 << 10 // SETTINGS_MAX_FRAME_SIZE we accept (the protocol's default)
	h2TableSize     = 4096     // our HPACK decoder's table (the protocol's default)
	h2DefaultWindow = 65535    // both windows' initial size (RFC 9113 §6.9.2)
	h2MaxWindow     = 1<<31 - 1
	h2FlushAt       = 64 << 10 // a write buffer this large is flushed by whoever adds to it
	h2GoAwayLinger  = time.Second
	h2ClosedRing    = 32 // streams remembered as closed, for STREAM_CLOSED errors
	h2LaunchBatch   = 32 // new streams held before their handlers start, at most
)

// errH2StreamGone is a handler's write or read on a stream the client reset or whose
// connection ended.
var errH2StreamGone = errors.New("http2: stream closed")

// errH2ShortBody ends a request body shorter than its content-length.
var errH2ShortBody = errors.New("http2: request body shorter than its content-length")

// h2conn is one HTTP/2 downstream connection.
type h2conn struct {
	h        *Handler
	cut      atomic.Bool // a stream was cut by the peer's close (counted once)
	drain    func() bool // the listener's DrainClose
	remote   string
	remoteIP string
	direct   string // see serverConn.direct
	local    string
	restored bool // see serverConn.restored
	tls      bool
	tlsInfo  *accesslog.TLSInfo // see serverConn.tlsInfo
	lc       *listener.Conn     // the downstream connection
	// life runs the connection's idle timeout and max_connection_duration, and its drain.
	life *h2Lifetime

	nc        net.Conn // the connection: the socket or TLS over it
	shutWrite func()
	tlsState  *tls.ConnectionState
	resets    resetGuard
	hw        *headerWatch // nil without request_headers_timeout
	peerGone  atomic.Bool
	draining  atomic.Bool // the premature reset guard closed the connection
	calmAt    time.Time   // when its GOAWAY went; read by linger once draining is set
	maxStream atomic.Uint32
	workers   []chan *h2stream // idle workers; guarded by mu
	free      []*h2stream      // finished streams kept for new ones (recycle); guarded by mu
	ended     bool             // the connection ended; guarded by mu

	// The reader's own state.
	rd          *bufio.Reader
	fr          *http2.Framer
	dec         *hpack.Decoder
	blk         h2block // the header block being decoded
	listLimit   uint32  // SETTINGS_MAX_HEADER_LIST_SIZE we sent
	peeked      int     // payload bytes viewed in rd
	big         []byte  // a payload larger than rd's buffer
	pre         []byte  // bytes read before the connection came here
	pending     []*h2stream
	closedIDs   [h2ClosedRing]uint32
	nclosed     int
	sawSettings bool
	recvWin     int64 // connection window the client still has
	advConnWin  int64 // the connection window we keep granting
	advStream   int64 // SETTINGS_INITIAL_WINDOW_SIZE we sent
	maxStreams  int

	mu        sync.Mutex // guards the fields below and every stream's shared fields
	streams   map[uint32]*h2stream
	w         h2wire.Writer // the frames to write; Err stops writing
	sendWin   int64         // connection window we may still send
	initWin   int64         // the client's SETTINGS_INITIAL_WINDOW_SIZE
	peerFrame int           // the client's SETTINGS_MAX_FRAME_SIZE
	hbuf      []byte        // the header block being encoded
	// tableUpdate: the client changed SETTINGS_HEADER_TABLE_SIZE; the next header block
	// starts with a table size update (to 0: Legate's encoder keeps no table).
	tableUpdate bool
	connUnack   int64 // connection window consumed and not yet returned
	goingAway   bool  // a GOAWAY was sent: no new streams
	closing     bool  // the write side is shut or about to be
	// endWrite, once set, ends the write side after the frames queued before it: the flush
	// that writes them last sets it as w.Err (dropping later frames) and shuts the socket's
	// write side. A flush in progress on another goroutine may be that one, so that a GOAWAY
	// queued behind its write is not cut off by a shut made before it went out.
	endWrite   error
	writeShut  bool
	unackedSet int // SETTINGS frames we sent that the client has not acknowledged
}

// DrainClose is the listener's drain decision for the connection.
func (c *h2conn) DrainClose() bool { return c.drain() }

// h2Settings are the settings the server announces, with the connection window it grants.
type h2Settings struct {
	maxStreams  uint32
	streamWin   uint32
	connWin     uint32
	headerList  uint32
	connectProt bool
}

// start makes the connection's state.
func (c *h2conn) start(nc net.Conn, pre []byte) {
	set := c.h.h2set
	c.nc, c.pre = nc, pre
	c.streams = map[uint32]*h2stream{}
	c.sendWin, c.initWin, c.peerFrame = h2DefaultWindow, h2DefaultWindow, h2MaxFrame
	c.recvWin, c.advConnWin = h2DefaultWindow, int64(set.connWin)
	c.advStream, c.maxStreams = int64(set.streamWin), int(set.maxStreams)
	c.rd = bufio.NewReaderSize(h2SocketReader{c}, h2ReadBuffer)
	c.fr = http2.NewFramer(nil, c.rd)
	c.listLimit = set.headerList
	c.dec = hpack.NewDecoder(h2TableSize, c.blk.emit)
	c.dec.SetMaxStringLength(int(set.headerList))
	c.fr.SetMaxReadFrameSize(h2MaxFrame)
	c.fr.SetReuseFrames()
}

// h2SocketReader reads the connection for the frame reader: bytes read before the connection
// came here first; every read is shown to the header watch, and a failure that means the
// peer went away is noted.
type h2SocketReader struct{ c *h2conn }

func (r h2SocketReader) Read(p []byte) (int, error) {
	c := r.c
	if len(c.pre) > 0 {
		n := copy(p, c.pre)
		c.pre = c.pre[n:]
		c.arrived(p[:n])
		return n, nil
	}
	n, err := c.nc.Read(p)
	c.arrived(p[:n])
	c.failed(err)
	return n, err
}

// arrived follows bytes as they come from the socket: the header watch sees them as they
// come, so that a header block's timer starts with the first bytes of its frame.
func (c *h2conn) arrived(p []byte) {
	if c.hw != nil && len(p) > 0 {
		c.hw.read(p)
	}
}

// failed notes a read or write failure that means the peer went away.
func (c *h2conn) failed(err error) {
	if err != nil && !errors.Is(err, net.ErrClosed) {
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			c.peerGone.Store(true)
		}
	}
}

// serve runs the connection's reader until the connection ends.
func (c *h2conn) serve() {
	defer c.end()
	if !c.readPreface() {
		return
	}
	c.sendSettings()
	for {
		if c.rd.Buffered() == 0 {
			c.launch()
			c.flush()
		}
		// Checked at every frame, not only when the buffer runs dry: a client flooding
		// resets keeps it full, and the reader would read on for as long as it floods.
		if c.draining.Load() {
			c.linger()
			return
		}
		if err := c.nextFrame(); err != nil {
			if !c.readFailed(err) {
				return
			}
		}
		if len(c.pending) > 0 && c.mayLaunch() {
			c.launch()
		}
	}
}

// readPreface checks the client's connection preface as it arrives (RFC 9113 §3.4).
func (c *h2conn) readPreface() bool {
	want := http2.ClientPreface
	for len(want) > 0 {
		b, err := c.rd.Peek(1)
		if err != nil {
			return false
		}
		n := min(c.rd.Buffered(), len(want))
		b, _ = c.rd.Peek(n)
		if string(b) != want[:n] {
			c.badPreface()
			return false
		}
		c.rd.Discard(n)
		want = want[n:]
	}
	return true
}

// prefaceDrain bounds how long a connection with a wrong preface is read before it closes.
const prefaceDrain = 250 * time.Millisecond

// badPreface answers a wrong client preface with a GOAWAY (PROTOCOL_ERROR) and reads what
// the client sent until it closes or prefaceDrain passes, so that the connection ends with
// a FIN the client reads after the GOAWAY, not with a reset.
func (c *h2conn) badPreface() {
	c.h.stats.DownstreamCxProtocolError.Inc()
	c.mu.Lock()
	c.w.Buf = appendGoAway(c.w.Buf, 0, http2.ErrCodeProtocol)
	c.mu.Unlock()
	c.flush()
	// Real clock: a socket deadline, which the runtime poller compares with the system clock.
	c.nc.SetReadDeadline(time.Now().Add(prefaceDrain))
	var discard [512]byte
	for {
		if _, err := c.nc.Read(discard[:]); err != nil {
			return
		}
	}
}

// sendSettings writes the server's SETTINGS and the connection window beyond the default.
func (c *h2conn) sendSettings() {
	set := c.h.h2set
	c.mu.Lock()
	var p [6 * 6]byte
	n := 0
	put := func(id http2.SettingID, v uint32) {
		binary.BigEndian.PutUint16(p[n:], uint16(id))
		binary.BigEndian.PutUint32(p[n+2:], v)
		n += 6
	}
	put(http2.SettingMaxConcurrentStreams, set.maxStreams)
	put(http2.SettingInitialWindowSize, set.streamWin)
	put(http2.SettingMaxHeaderListSize, set.headerList)
	put(http2.SettingMaxFrameSize, h2MaxFrame)
	if set.connectProt {
		put(http2.SettingEnableConnectProtocol, 1)
	}
	c.w.Buf = appendFrame(c.w.Buf, http2.FrameSettings, 0, 0, p[:n])
	c.unackedSet++
	if d := c.advConnWin - h2DefaultWindow; d > 0 {
		c.w.Buf = appendWindowUpdate(c.w.Buf, 0, uint32(d))
		c.recvWin += d
	}
	c.mu.Unlock()
	c.flush()
}

// readFailed handles a failed frame read or a frame refused; it reports whether to go on.
func (c *h2conn) readFailed(err error) bool {
	var se http2.StreamError
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &se):
		c.noteStreamID(se.StreamID)
		c.resetStream(se.StreamID, se.Code)
		return true
	case errors.As(err, &ce):
		c.connError(http2.ErrCode(ce))
	case errors.Is(err, http2.ErrFrameTooLarge):
		c.connError(http2.ErrCodeFrameSize)
	case c.fr.ErrorDetail() != nil && !c.peerGone.Load():
		c.connError(http2.ErrCodeProtocol)
	}
	return false
}

// connError ends the connection with a GOAWAY carrying code.
func (c *h2conn) connError(code http2.ErrCode) {
	c.mu.Lock()
	if !c.closing {
		c.w.Buf = appendGoAway(c.w.Buf, c.maxStream.Load(), code)
		c.closing = true
	}
	c.endWritesLocked(errConnClosing)
	c.mu.Unlock()
	c.lingerClose()
}

// lingerClose reads (discarding) for a while after the write side was shut, so that the
// GOAWAY reaches the client before the close, which would reset a connection with unread
// bytes.
func (c *h2conn) lingerClose() {
	// Real clock: a socket deadline, which the runtime poller compares with the system clock.
	c.nc.SetReadDeadline(time.Now().Add(h2GoAwayLinger))
	var discard [512]byte
	for {
		if _, err := c.nc.Read(discard[:]); err != nil {
			return
		}
	}
}

// end closes the connection and every stream still open on it.
func (c *h2conn) end() {
	c.mu.Lock()
	c.closing = true
	if c.w.Err == nil {
		c.w.Err = net.ErrClosed
	}
	gone := make([]*h2stream, 0, len(c.streams)+len(c.pending))
	for _, st := range c.streams {
		st.reset = true
		st.cond.Broadcast()
		gone = append(gone, st)
	}
	c.mu.Unlock()
	c.nc.Close()
	for _, st := range gone {
		st.cancel()
	}
	for _, st := range c.pending {
		c.resetUnserved()
		st.cancel()
	}
	c.pending = nil
	c.stopWorkers()
	if c.hw != nil {
		c.hw.stop()
	}
}

// nextFrame reads one frame and handles it; a header block is read whole.
func (c *h2conn) nextFrame() error {
	fh, err := c.fr.ReadFrameHeader()
	if err != nil {
		return err
	}
	if !c.sawSettings && fh.Type != http2.FrameSettings {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if fh.Type == http2.FrameHeaders {
		if err := c.readHeaderBlock(fh); err != nil {
			return err
		}
		return c.headers(&c.blk)
	}
	f, err := c.fr.ReadFrameForHeader(fh)
	if err != nil {
		return err
	}
	return c.frame(f)
}

// frame handles one frame read other than HEADERS.
func (c *h2conn) frame(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.DataFrame:
		return c.data(f)
	case *http2.SettingsFrame:
		return c.settings(f)
	case *http2.WindowUpdateFrame:
		return c.windowUpdate(f)
	case *http2.PingFrame:
		if !f.IsAck() {
			c.mu.Lock()
			c.w.Buf = appendFrame(c.w.Buf, http2.FramePing, http2.FlagPingAck, 0, f.Data[:])
			c.mu.Unlock()
		}
	case *http2.RSTStreamFrame:
		return c.rstStream(f)
	case *http2.PriorityFrame:
		if f.StreamDep == f.StreamID {
			return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeProtocol}
		}
	case *http2.GoAwayFrame:
		c.shutdown()
	case *http2.PushPromiseFrame:
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	return nil
}

// noteStreamID takes id as used: a later HEADERS frame on it is one on a closed stream.
func (c *h2conn) noteStreamID(id uint32) {
	if id&1 == 1 && id > c.maxStream.Load() {
		c.maxStream.Store(id)
		c.noteClosed(id)
	}
}

func (c *h2conn) noteClosed(id uint32) {
	c.closedIDs[c.nclosed%h2ClosedRing] = id
	c.nclosed++
}

func (c *h2conn) wasClosed(id uint32) bool {
	for _, v := range c.closedIDs {
		if v == id {
			return true
		}
	}
	return false
}

// stream returns the open stream id (mu held), else nil.
func (c *h2conn) stream(id uint32) *h2stream {
	return c.streams[id]
}

// settings applies the client's SETTINGS in order (RFC 9113 §6.5.3).
func (c *h2conn) settings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		c.mu.Lock()
		if c.unackedSet > 0 {
			c.unackedSet--
		}
		c.mu.Unlock()
		return nil
	}
	c.sawSettings = true
	if err := f.ForeachSetting(func(s http2.Setting) error { return s.Valid() }); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	err := f.ForeachSetting(c.applySetting)
	if err == nil {
		c.w.Buf = appendFrame(c.w.Buf, http2.FrameSettings, http2.FlagSettingsAck, 0, nil)
	}
	return err
}

// applySetting applies one setting; mu is held.
func (c *h2conn) applySetting(s http2.Setting) error {
	switch s.ID {
	case http2.SettingInitialWindowSize:
		d := int64(s.Val) - c.initWin
		c.initWin = int64(s.Val)
		for _, st := range c.streams {
			st.sendWin += d
			if st.sendWin > h2MaxWindow {
				return http2.ConnectionError(http2.ErrCodeFlowControl)
			}
			st.cond.Broadcast()
		}
	case http2.SettingMaxFrameSize:
		c.peerFrame = int(s.Val)
	case http2.SettingHeaderTableSize:
		c.tableUpdate = true
	}
	return nil
}

// windowUpdate adds to a window we send on.
func (c *h2conn) windowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	inc := int64(f.Increment)
	if f.StreamID == 0 {
		c.sendWin += inc
		if c.sendWin > h2MaxWindow {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		for _, st := range c.streams {
			if st.waitWin {
				st.cond.Broadcast()
			}
		}
		return nil
	}
	st := c.stream(f.StreamID)
	if st == nil {
		if f.StreamID > c.maxStream.Load() {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		return nil
	}
	st.sendWin += inc
	if st.sendWin > h2MaxWindow {
		return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeFlowControl}
	}
	st.cond.Broadcast()
	return nil
}

// rstStream ends a stream the client reset.
func (c *h2conn) rstStream(f *http2.RSTStreamFrame) error {
	id := f.StreamID
	for i, st := range c.pending {
		if st.id == id {
			// Reset before its handler started: refused, counted as a premature reset.
			c.pending = append(c.pending[:i], c.pending[i+1:]...)
			c.mu.Lock()
			delete(c.streams, id)
			c.mu.Unlock()
			c.noteClosed(id)
			st.cancel()
			c.recycle(st)
			c.resetOnArrival()
			c.afterStreamClosed()
			return nil
		}
	}
	c.mu.Lock()
	st := c.stream(id)
	if st == nil {
		c.mu.Unlock()
		if id > c.maxStream.Load() {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		return nil
	}
	st.reset = true
	st.cond.Broadcast()
	c.mu.Unlock()
	st.cancel()
	return nil
}

// resetStream sends RST_STREAM with code and forgets the stream.
func (c *h2conn) resetStream(id uint32, code http2.ErrCode) {
	c.mu.Lock()
	st := c.stream(id)
	if st != nil {
		st.reset = true
		st.cond.Broadcast()
	}
	c.w.Buf = appendRSTStream(c.w.Buf, id, code)
	c.mu.Unlock()
	pending := false
	for i, p := range c.pending {
		if p == st {
			c.pending = append(c.pending[:i], c.pending[i+1:]...)
			c.mu.Lock()
			delete(c.streams, id)
			c.mu.Unlock()
			c.afterStreamClosed()
			pending = true
			break
		}
	}
	if st != nil {
		st.cancel()
	}
	if pending {
		c.recycle(st) // its handler never started
	}
}

// data takes request body bytes.
func (c *h2conn) data(f *http2.DataFrame) error {
	id, size := f.StreamID, int64(f.Length)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recvWin -= size
	if c.recvWin < 0 {
		return http2.ConnectionError(http2.ErrCodeFlowControl)
	}
	st := c.stream(id)
	if st == nil || st.remoteDone || st.reset {
		c.returnConn(size)
		if st == nil && id > c.maxStream.Load() {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeStreamClosed}
	}
	st.recvWin -= size
	if st.recvWin < 0 {
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeFlowControl}
	}
	p := f.Data()
	st.got += int64(len(p))
	if st.declLen >= 0 && st.got > st.declLen {
		c.returnConn(size)
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
	}
	if f.StreamEnded() && st.declLen >= 0 && st.got != st.declLen {
		// The handler reads what came, then an error: the client's fault (400).
		st.endErr = errH2ShortBody
	}
	if pad := size - int64(len(p)); pad > 0 {
		c.returnConn(pad)
		st.returnStream(pad)
	}
	if st.bodyErr != nil {
		c.returnConn(int64(len(p)))
	} else {
		st.body = append(st.body, p...)
	}
	if f.StreamEnded() {
		st.remoteDone = true
	}
	st.cond.Broadcast()
	return nil
}

// returnConn gives back connection window for n bytes consumed; mu is held.
func (c *h2conn) returnConn(n int64) {
	c.connUnack += n
	if c.connUnack >= max(c.advConnWin/4, 1) {
		c.w.Buf = appendWindowUpdate(c.w.Buf, 0, uint32(c.connUnack))
		c.recvWin += c.connUnack
		c.connUnack = 0
	}
}

// shutdown starts the connection's graceful end: a GOAWAY naming the last stream the client
// opened; streams still open finish, new ones are refused, and the connection closes once
// none is left.
func (c *h2conn) shutdown() {
	c.mu.Lock()
	if c.goingAway || c.closing {
		c.mu.Unlock()
		return
	}
	c.goingAway = true
	c.w.Buf = appendGoAway(c.w.Buf, c.maxStream.Load(), http2.ErrCodeNo)
	idle := len(c.streams) == 0
	c.mu.Unlock()
	c.flush()
	if idle {
		c.closeIdle()
	}
}

// closeIdle ends a connection that sent its GOAWAY and has no stream left: its write side
// is shut, and the reader, woken by an expired deadline, lingers and closes it.
func (c *h2conn) closeIdle() {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.closing = true
	c.endWritesLocked(errConnClosing)
	c.mu.Unlock()
	// Real clock: a socket deadline, which the runtime poller compares with the system clock.
	c.nc.SetReadDeadline(time.Now().Add(h2GoAwayLinger))
}

// afterStreamClosed closes a connection in its graceful end once its last stream is gone.
func (c *h2conn) afterStreamClosed() {
	c.mu.Lock()
	last := c.goingAway && len(c.streams) == 0
	c.mu.Unlock()
	if last {
		c.closeIdle()
	}
}

// flush writes the write buffer; a flush already writing takes the new frames with it.
func (c *h2conn) flush() {
	c.mu.Lock()
	c.flushLocked()
	c.mu.Unlock()
}

// flushLocked is flush with mu held (released while writing); after a write error, frames
// are dropped.
func (c *h2conn) flushLocked() {
	flushed, err := c.w.Flush(&c.mu, c.nc)
	if !flushed {
		return
	}
	if c.w.Err != nil {
		if err != nil {
			c.failed(err)
		}
		c.w.Buf = c.w.Buf[:0]
	}
	if c.endWrite != nil && !c.writeShut {
		c.writeShut = true
		if c.w.Err == nil {
			c.w.Err = c.endWrite
		}
		c.mu.Unlock() // a TLS close_notify is a write
		c.shutWrite()
		c.mu.Lock()
	}
}

// endWritesLocked has the write side shut once the frames queued so far are written (now, or
// by the flush in progress); why is the error later frames are dropped with. mu is held.
func (c *h2conn) endWritesLocked(why error) {
	if c.endWrite == nil {
		c.endWrite = why
	}
	c.flushLocked()
	if !c.writeShut {
		// The flush in progress shuts the write side once it is done; a peer that does not
		// read could hold it blocked, so the shut comes anyway after h2GoAwayLinger.
		// Real clock: a bound on a socket write, which the runtime poller times by the system clock.
		time.AfterFunc(h2GoAwayLinger, c.forceShut)
	}
}

// forceShut shuts the write side if no flush did yet; the write it cuts fails.
func (c *h2conn) forceShut() {
	c.mu.Lock()
	if c.writeShut {
		c.mu.Unlock()
		return
	}
	c.writeShut = true
	if c.w.Err == nil {
		c.w.Err = c.endWrite
	}
	c.mu.Unlock()
	c.shutWrite()
}

// appendFrame appends one frame.
func appendFrame(b []byte, typ http2.FrameType, flags http2.Flags, id uint32, payload []byte) []byte {
	n := len(payload)
	b = append(b, byte(n>>16), byte(n>>8), byte(n), byte(typ), byte(flags))
	b = binary.BigEndian.AppendUint32(b, id)
	return append(b, payload...)
}

func appendWindowUpdate(b []byte, id, inc uint32) []byte {
	var p [4]byte
	binary.BigEndian.PutUint32(p[:], inc)
	return appendFrame(b, http2.FrameWindowUpdate, 0, id, p[:])
}

func appendRSTStream(b []byte, id uint32, code http2.ErrCode) []byte {
	var p [4]byte
	binary.BigEndian.PutUint32(p[:], uint32(code))
	return appendFrame(b, http2.FrameRSTStream, 0, id, p[:])
}

func appendGoAway(b []byte, last uint32, code http2.ErrCode) []byte {
	var p [8]byte
	binary.BigEndian.PutUint32(p[:], last)
	binary.BigEndian.PutUint32(p[4:], uint32(code))
	return appendFrame(b, http2.FrameGoAway, 0, 0, p[:])
}

// appendHeaderBlock appends the header block in c.hbuf as HEADERS and CONTINUATION frames
// no larger than the client takes; mu is held.
func (c *h2conn) appendHeaderBlock(id uint32, end bool) {
	block := c.hbuf
	typ := http2.FrameHeaders
	var flags http2.Flags
	if end {
		flags = http2.FlagHeadersEndStream
	}
	for {
		n := min(len(block), c.peerFrame)
		f := flags
		if n == len(block) {
			f |= http2.FlagHeadersEndHeaders
		}
		c.w.Buf = appendFrame(c.w.Buf, typ, f, id, block[:n])
		block = block[n:]
		if len(block) == 0 {
			return
		}
		typ, flags = http2.FrameContinuation, 0
	}
}

// errTooManyResets ends a connection closed by the premature reset guard.
var errTooManyResets = errors.New("http2: too many premature stream resets")

// errConnClosing drops the frames queued after a connection's last GOAWAY.
var errConnClosing = errors.New("http2: connection closing")
