package h2client

import (
	"errors"
	"fmt"
	"io"
	"math"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// headerBlock is the header block the read loop decodes (HEADERS then CONTINUATIONs).
type headerBlock struct {
	s         *Stream // nil: a stream no longer open, decoded only to keep HPACK in step
	trailer   bool    // the stream's head is done: this is its trailer section
	endStream bool
	size      int // decoded names and values so far
	wire      int // encoded bytes so far
	status    int
	cl        int64
	regular   bool // a regular field was seen (pseudo-fields must come first)
	err       string
}

// readLoop reads frames until the connection fails.
func (c *Conn) readLoop() {
	defer close(c.done)
	defer c.setCur(nil)
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				c.streamError(se.StreamID, se.Code, se.Error())
				continue
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			c.fail(fmt.Errorf("%w: %w", ErrClosed, err))
			return
		}
		if c.ping != nil {
			c.sawFrame.Store(true)
		}
		if err := c.dispatch(f); err != nil {
			c.fail(fmt.Errorf("%w: %w", ErrClosed, err))
			return
		}
	}
}

// connError is a connection error of the peer's making.
func connError(code http2.ErrCode, format string, args ...any) error {
	return fmt.Errorf("protocol error (%v): %s", code, fmt.Sprintf(format, args...))
}

// dispatch handles one frame; an error is the connection's.
func (c *Conn) dispatch(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.HeadersFrame:
		if err := c.startBlock(f.StreamID, f.StreamEnded()); err != nil {
			return err
		}
		return c.blockFragment(f.HeaderBlockFragment(), f.HeadersEnded())
	case *http2.ContinuationFrame:
		return c.blockFragment(f.HeaderBlockFragment(), f.HeadersEnded())
	case *http2.RSTStreamFrame:
		c.onReset(f.StreamID, f.ErrCode)
	case *http2.SettingsFrame:
		return c.onSettings(f)
	case *http2.WindowUpdateFrame:
		return c.onWindowUpdate(f)
	case *http2.PingFrame:
		if f.IsAck() {
			c.pingAnswered()
			return nil
		}
		c.startWrite()
		c.noteWriteErr(c.fr.WritePing(true, f.Data))
		c.endWrite()
	case *http2.GoAwayFrame:
		c.onGoAway(f.LastStreamID)
	case *http2.PushPromiseFrame:
		return connError(http2.ErrCodeProtocol, "PUSH_PROMISE with push disabled")
	}
	return nil
}

// stream returns the open stream id, nil when it is closed; an error for an id Legate never
// opened.
func (c *Conn) stream(id uint32) (*Stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id%2 == 0 || id >= c.nextID {
		return nil, connError(http2.ErrCodeProtocol, "frame on stream %d, which Legate did not open", id)
	}
	s := c.streams[id]
	c.setCurLocked(s)
	return s, nil
}

// setCur makes s the stream the read loop uses (see Conn.cur).
func (c *Conn) setCur(s *Stream) {
	c.mu.Lock()
	c.setCurLocked(s)
	c.mu.Unlock()
}

// setCurLocked is setCur with mu held; the stream the read loop leaves goes back to the pool
// when it was released while in use.
func (c *Conn) setCurLocked(s *Stream) {
	prev := c.cur
	c.cur = s
	if prev != nil && prev != s && prev.deferred {
		prev.deferred = false
		streamPool.Put(prev)
	}
}

// streamError resets a stream for a protocol error of the peer's.
func (c *Conn) streamError(id uint32, code http2.ErrCode, reason string) {
	s, err := c.stream(id)
	if err != nil || s == nil {
		c.writeReset(id, code) // a closed stream's frame: tell the peer again
		return
	}
	s.reset(code, &StreamError{Code: code, Reason: reason})
}

func (c *Conn) onData(f *http2.DataFrame) error {
	n := int64(f.Length)
	if c.recvWin.Add(-n) < 0 {
		return connError(http2.ErrCodeFlowControl, "DATA beyond the connection window")
	}
	s, err := c.stream(f.StreamID)
	if err != nil {
		return err
	}
	data := f.Data()
	if s == nil {
		c.consumed(int(n)) // a stream Legate reset: its window is the connection's again
		return nil
	}
	c.consumed(int(n) - len(data)) // padding
	s.mu.Lock()
	switch {
	case !s.headDone:
		s.mu.Unlock()
		c.consumed(len(data))
		s.protocolError("DATA before the response head")
		return nil
	case s.ended || s.err != nil:
		s.mu.Unlock()
		c.consumed(len(data))
		s.closedFrame()
		return nil
	case n > s.recvWin:
		s.mu.Unlock()
		c.consumed(len(data))
		s.reset(http2.ErrCodeFlowControl, &StreamError{Code: http2.ErrCodeFlowControl, Reason: "DATA beyond the stream window"})
		return nil
	}
	s.recvWin -= n
	s.got += int64(len(data))
	if s.cl >= 0 && s.got > s.cl && !s.noBody() {
		s.mu.Unlock()
		c.consumed(len(data))
		s.protocolError("DATA beyond the response's content-length")
		return nil
	}
	s.data = append(s.data, data...)
	if f.StreamEnded() {
		s.endLocked()
		return nil
	}
	s.mu.Unlock()
	s.signal()
	return nil
}

// endLocked ends the response at END_STREAM, or fails it when its body broke its
// content-length; s.mu is held, and released.
func (s *Stream) endLocked() {
	if reason := s.endCheck(); reason != "" {
		s.mu.Unlock()
		s.protocolError(reason)
		return
	}
	s.ended = true
	s.mu.Unlock()
	s.signal()
}

// protocolError resets the stream for the peer's breaking of the protocol.
func (s *Stream) protocolError(reason string) {
	s.reset(http2.ErrCodeProtocol, &StreamError{Code: http2.ErrCodeProtocol, Reason: reason})
}

// closedFrame answers a frame on a stream whose response is over with RST_STREAM
// STREAM_CLOSED; what the stream received stands.
func (s *Stream) closedFrame() {
	if s.leave() {
		s.c.writeReset(s.id, http2.ErrCodeStreamClosed)
	}
}

// noBody reports a response that has no body whatever its content-length says; s.mu is held.
func (s *Stream) noBody() bool {
	return s.head || s.status == 204 || s.status == 304
}

// endCheck checks the response at END_STREAM; s.mu is held.
func (s *Stream) endCheck() string {
	if s.cl >= 0 && s.got != s.cl && !s.noBody() {
		return fmt.Sprintf("response body of %d bytes; content-length %d", s.got, s.cl)
	}
	return ""
}

// startBlock starts decoding a HEADERS frame's header block.
func (c *Conn) startBlock(id uint32, endStream bool) error {
	s, err := c.stream(id)
	if err != nil {
		return err
	}
	c.blk = headerBlock{s: s, endStream: endStream, cl: -1}
	if s == nil {
		return nil
	}
	s.mu.Lock()
	switch {
	case s.ended || s.err != nil:
		// The response is over (or failed); the block is decoded for HPACK's sake only.
		s.mu.Unlock()
		c.blk.s = nil
		s.closedFrame()
		return nil
	case s.headDone:
		c.blk.trailer = true
		s.traw, s.tlens = s.traw[:0], s.tlens[:0]
		if !endStream {
			c.blk.err = "trailers without END_STREAM"
		}
	default:
		s.hdr, s.lens = s.hdr[:0], s.lens[:0]
	}
	s.mu.Unlock()
	return nil
}

// blockFragment decodes a fragment of the header block; at its end the stream gets its head
// or trailers.
func (c *Conn) blockFragment(p []byte, end bool) error {
	c.blk.wire += len(p)
	if c.blk.wire > 2*c.cfg.MaxHeaderBytes+4096 {
		return connError(http2.ErrCodeEnhanceYourCalm, "header block of more than %d bytes", c.blk.wire)
	}
	if _, err := c.dec.Write(p); err != nil {
		return connError(http2.ErrCodeCompression, "%v", err)
	}
	if !end {
		return nil
	}
	if err := c.dec.Close(); err != nil {
		return connError(http2.ErrCodeCompression, "%v", err)
	}
	b := &c.blk
	s := b.s
	if s == nil {
		return nil
	}
	if b.err == "" && b.trailer && b.status != 0 {
		b.err = "pseudo-field in trailers"
	}
	if b.err == "" && !b.trailer {
		switch {
		case b.status == 0:
			b.err = "response without :status"
		case b.status == 101:
			b.err = "101 response over HTTP/2"
		case b.status < 200 && b.endStream:
			b.err = "informational response with END_STREAM"
		case b.status < 200:
			return nil // an interim response: the final one follows
		}
	}
	if b.err != "" {
		s.protocolError(b.err)
		return nil
	}
	s.mu.Lock()
	if !b.trailer {
		s.status, s.cl, s.headDone = b.status, b.cl, true
		if b.endStream && b.cl < 0 && !s.head {
			s.cl = 0 // the head ends the stream: the body is known to be empty
		}
	}
	if b.endStream {
		s.endLocked()
		return nil
	}
	s.mu.Unlock()
	s.signal()
	return nil
}

// emit receives each decoded field of the block being read.
func (c *Conn) emit(f hpack.HeaderField) {
	b := &c.blk
	if b.s == nil || b.err != "" {
		return
	}
	b.size += len(f.Name) + len(f.Value)
	if b.size > c.cfg.MaxHeaderBytes {
		b.err = fmt.Sprintf("response header list of more than %d bytes", c.cfg.MaxHeaderBytes)
		return
	}
	if len(f.Name) > 0 && f.Name[0] == ':' {
		c.pseudo(f)
		return
	}
	b.regular = true
	for i := range len(f.Name) {
		if ch := f.Name[i]; ch >= 'A' && ch <= 'Z' {
			b.err = fmt.Sprintf("upper-case field name %q", f.Name)
			return
		}
	}
	s := b.s
	if b.trailer {
		s.traw = append(append(s.traw, f.Name...), f.Value...)
		s.tlens = append(s.tlens, [2]int32{int32(len(f.Name)), int32(len(f.Value))})
		return
	}
	if f.Name == "content-length" {
		n, ok := parseLength(f.Value)
		if !ok || (b.cl >= 0 && b.cl != n) {
			b.err = fmt.Sprintf("invalid content-length %q", f.Value)
			return
		}
		b.cl = n
	}
	s.hdr = append(append(s.hdr, f.Name...), f.Value...)
	s.lens = append(s.lens, [2]int32{int32(len(f.Name)), int32(len(f.Value))})
}

// pseudo handles a response pseudo-field: only :status, once, before regular fields.
func (c *Conn) pseudo(f hpack.HeaderField) {
	b := &c.blk
	switch {
	case b.regular:
		b.err = "pseudo-field after a regular field"
	case f.Name != ":status":
		b.err = fmt.Sprintf("pseudo-field %q in a response", f.Name)
	case b.status != 0:
		b.err = "duplicate :status"
	case len(f.Value) != 3 || !digits(f.Value) || f.Value[0] == '0':
		b.err = fmt.Sprintf("invalid :status %q", f.Value)
	default:
		b.status = int(f.Value[0]-'0')*100 + int(f.Value[1]-'0')*10 + int(f.Value[2]-'0')
	}
}

func digits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseLength parses a content-length value.
func parseLength(s string) (int64, bool) {
	if s == "" || len(s) > 18 || !digits(s) {
		return 0, false
	}
	var n int64
	for i := range len(s) {
		n = n*10 + int64(s[i]-'0')
	}
	return n, true
}

// onReset handles the peer's RST_STREAM.
func (c *Conn) onReset(id uint32, code http2.ErrCode) {
	s, err := c.stream(id)
	if err != nil || s == nil {
		return
	}
	s.mu.Lock()
	complete, head := s.ended, s.headDone
	s.mu.Unlock()
	var e error = &StreamError{Code: code, Remote: true}
	switch {
	case complete && code == http2.ErrCodeNo:
		// The response is whole; the peer wants no more of the request.
		s.bodyMu.Lock()
		s.stopped = true
		s.bodyMu.Unlock()
		c.mu.Lock()
		s.sent = true
		if c.streams[id] == s {
			delete(c.streams, id)
		}
		s.closedBy = true
		c.sendCond.Broadcast()
		c.closeIfDoneLocked()
		c.mu.Unlock()
		return
	case code == http2.ErrCodeRefusedStream && !head:
		e = fmt.Errorf("%w: %w", ErrUnprocessed, e)
	}
	s.fail(e)
}

func (c *Conn) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	err := f.ForeachSetting(func(st http2.Setting) error {
		if err := st.Valid(); err != nil {
			return err
		}
		switch st.ID {
		case http2.SettingMaxConcurrentStreams:
			c.mu.Lock()
			c.peerMax = st.Val
			c.mu.Unlock()
		case http2.SettingInitialWindowSize:
			c.mu.Lock()
			delta := int64(st.Val) - int64(c.peerWin)
			c.peerWin = int32(st.Val)
			for _, s := range c.streams {
				s.sendWin += delta
			}
			c.sendCond.Broadcast()
			c.mu.Unlock()
		case http2.SettingMaxFrameSize:
			c.maxFrame.Store(st.Val)
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.startWrite()
	c.noteWriteErr(c.fr.WriteSettingsAck())
	return c.endWrite()
}

func (c *Conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	inc := int64(f.Increment)
	c.mu.Lock()
	if f.StreamID == 0 {
		defer c.mu.Unlock()
		if c.sendWin+inc > math.MaxInt32 {
			return connError(http2.ErrCodeFlowControl, "connection window above 2^31-1")
		}
		c.sendWin += inc
		c.sendCond.Broadcast()
		return nil
	}
	s := c.streams[f.StreamID]
	overflow := s != nil && s.sendWin+inc > math.MaxInt32
	if s != nil && !overflow {
		s.sendWin += inc
		c.sendCond.Broadcast()
	}
	c.mu.Unlock()
	if overflow {
		s.reset(http2.ErrCodeFlowControl, &StreamError{Code: http2.ErrCodeFlowControl, Reason: "stream window above 2^31-1"})
	}
	return nil
}

// onGoAway stops new streams; those above the last stream id fail as unprocessed, the others
// go on, and the connection closes after the last.
func (c *Conn) onGoAway(last uint32) {
	c.mu.Lock()
	c.goAway = true
	c.noteStateLocked()
	if c.lastID == 0 || last < c.lastID {
		c.lastID = last
	}
	var lost []*Stream
	for id, s := range c.streams {
		if id > last {
			lost = append(lost, s)
			delete(c.streams, id)
			s.failLocked(fmt.Errorf("%w: GOAWAY with last stream %d", ErrUnprocessed, last))
		}
	}
	c.sendCond.Broadcast()
	c.closeIfDoneLocked()
	c.mu.Unlock()
	for _, s := range lost {
		s.signal() // a stream reused since only wakes its new reader for nothing
	}
}
