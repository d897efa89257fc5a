package httpproxy

import (
	"errors"
	"github.com/legateproxy/legate/internal/http1"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/legateproxy/legate/internal/h2wire"
	"github.com/legateproxy/legate/pool"
	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2stream is one stream of an h2conn: the request the reader built, its body as the reader
// buffers it, and the response writer its handler writes through. A connection reuses it for
// later streams (newStream, recycle): h2state is zeroed for each, the rest is kept.
type h2stream struct {
	c    *h2conn
	cond sync.Cond // L is c.mu: body bytes, window, reset
	ctx  *h2ctx    // the request's context, ended by cancel
	h2state

	url  url.URL      // the request's URL
	reqv http.Request // req's storage
	// reqHdr is the request's header map and vals the backing array of its values, one
	// per field; arena holds its canonical header names and joined cookies (wireKey).
	reqHdr http.Header
	vals   []string
	arena  []byte
	// list is reqHdr's fields in the order they arrived, when listExact: the connection
	// manager's index of the request (inIndex.fields), from which the upstream request is
	// written; ranging over the map instead was about 600 instructions a request.
	list      []pool.Field
	listExact bool

	// The handler's own.
	hdr http.Header // the response's header map
	// pre holds header field representations the handler encoded itself (a direct response
	// head, httpproxy/directhead.go), sent after :status and before hdr's.
	pre    []byte
	out    []byte
	outBuf [512]byte // out's first buffer: a small response's body needs no allocation
}

// h2state is what an h2stream holds of the one stream it serves.
type h2state struct {
	id  uint32
	req *http.Request
	// tooLarge is a request whose header list went over SETTINGS_MAX_HEADER_LIST_SIZE.
	tooLarge bool
	// preLength: pre holds the response's content-length field (sendHeadH2), which emit then
	// does not add.
	preLength bool
	keys      nameBits // the names reqHdr holds (outheader.go)
	// fields and fieldBytes are the number of values in reqHdr and the sum of their names'
	// and values' lengths (tooManyHeaders).
	fields, fieldBytes int

	// Guarded by c.mu.
	sendWin    int64
	waitWin    bool // a write waits for window
	recvWin    int64
	unack      int64 // stream window consumed, not yet returned
	body       []byte
	bodyR      int
	bodyErr    error // the body's end for the handler (io.EOF, closed, deadline)
	endErr     error // the body's end when the client ended it short of its content-length
	remoteDone bool  // END_STREAM read
	reset      bool  // reset by either side, or the connection ended
	declLen    int64 // content-length, -1 for none
	got        int64
	trailer    http.Header // the request's Trailer, which the handler reads
	gotTrailer http.Header // the trailers read, copied into trailer at the body's end
	noBody     bool        // a response to HEAD: body bytes are dropped
	rdTimer    *time.Timer
	wrTimer    *time.Timer
	wrExpired  bool

	// The handler's own.
	status      int
	headersSent bool
	ended       bool
}

// headers handles a header block: a new stream, or the trailers of one.
func (c *h2conn) headers(f *h2block) error {
	id := f.id
	if id&1 == 0 {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	c.mu.Lock()
	st := c.stream(id)
	refused, active := c.goingAway || c.closing, len(c.streams)
	c.mu.Unlock()
	if st != nil {
		return c.trailers(st, f)
	}
	if id <= c.maxStream.Load() {
		if c.wasClosed(id) {
			return http2.ConnectionError(http2.ErrCodeStreamClosed)
		}
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	c.maxStream.Store(id)
	if f.prio && f.dep == id {
		c.noteClosed(id)
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
	}
	if refused || active >= c.maxStreams {
		c.noteClosed(id)
		code := http2.ErrCodeRefusedStream
		if !refused && c.settingsAcked() {
			code = http2.ErrCodeProtocol
		}
		return http2.StreamError{StreamID: id, Code: code}
	}
	st = c.newStream(id, f.truncated)
	req := &st.reqv
	if code := c.newRequest(f, req, st); code != http2.ErrCodeNo {
		c.noteClosed(id)
		c.recycle(st)
		return http2.StreamError{StreamID: id, Code: code}
	}
	st.noBody = req.Method == http.MethodHead
	// newRequest left Body nil for a body to come, else http.NoBody (comparing with it is a
	// call).
	if req.Body == nil {
		st.declLen = req.ContentLength
		req.Body = (*h2body)(st)
		st.trailer = req.Trailer
	} else {
		st.remoteDone = true
	}
	st.reqv = *req.WithContext(st.ctx) // the copy WithContext makes stays on the stack
	st.req = &st.reqv
	c.mu.Lock()
	st.sendWin = c.initWin
	c.streams[id] = st
	c.mu.Unlock()
	c.pending = append(c.pending, st)
	return nil
}

// h2FreeStreams bounds the finished streams a connection keeps for its next ones, and
// h2MaxKeptArena the arena one of them keeps.
const (
	h2FreeStreams  = h2IdleWorkers
	h2MaxKeptArena = 4 << 10
)

// newStream returns a stream for id: a finished stream of the connection when it keeps one
// (recycle), with its header maps, value array and output buffer, else a new one. Only the
// reader calls it: a stream the reader took from c.streams before its handler ended
// (headers, rstStream, resetStream) is not reused under it until the reader is done with it.
func (c *h2conn) newStream(id uint32, tooLarge bool) *h2stream {
	c.mu.Lock()
	var st *h2stream
	if n := len(c.free); n > 0 {
		st = c.free[n-1]
		c.free[n-1] = nil
		c.free = c.free[:n-1]
	}
	c.mu.Unlock()
	if st == nil {
		st = &h2stream{c: c, ctx: new(h2ctx), reqHdr: make(http.Header, 8), hdr: make(http.Header, 8), vals: make([]string, 0, 8)}
		st.cond.L = &c.mu
	} else {
		st.ctx.renew()
		st.url = url.URL{}
		st.arena = st.arena[:0]
	}
	st.out, st.pre = st.outBuf[:0], st.pre[:0]
	// Zeroed, then set: a composite literal would be built on the stack and copied.
	st.h2state = h2state{}
	st.id, st.tooLarge, st.declLen, st.recvWin = id, tooLarge, -1, c.advStream
	return st
}

// cancel ends the stream's request context.
func (st *h2stream) cancel() { st.ctx.cancel() }

// recycle keeps a stream that is done for the connection's next one: its handler returned
// (or never started) and it left c.streams and c.pending, so nothing else uses it. What it
// kept of its request and response is dropped now; the fields the reader may still read
// through a pointer it took earlier (reset, cancel) stay until newStream.
func (c *h2conn) recycle(st *h2stream) {
	clear(st.reqHdr)
	clearMap(st.hdr) // a direct response head leaves it empty
	clear(st.vals[:cap(st.vals)])
	clear(st.list[:cap(st.list)])
	if cap(st.arena) > h2MaxKeptArena {
		st.arena = nil
	}
	c.mu.Lock()
	if len(c.free) < h2FreeStreams {
		c.free = append(c.free, st)
	}
	c.mu.Unlock()
}

// settingsAcked reports whether the client acknowledged our SETTINGS (its streams over the
// limit are then protocol errors, not refusals).
func (c *h2conn) settingsAcked() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unackedSet == 0
}

// newRequest builds the request of a header block, or reports why the stream is malformed
// (RFC 9113 §8.1.1, §8.2.2, §8.3, RFC 8441 §4).
func (c *h2conn) newRequest(f *h2block, r *http.Request, st *h2stream) http2.ErrCode {
	u := &st.url
	p := &f.pseudo
	method, path, scheme, authority, protocol := p.method, p.path, p.scheme, p.authority, p.protocol
	connect := method == http.MethodConnect
	switch {
	case method == "":
		return http2.ErrCodeProtocol
	case connect && protocol == "" && (path != "" || scheme != "" || authority == ""):
		return http2.ErrCodeProtocol
	case (!connect || protocol != "") && (path == "" || scheme == ""):
		return http2.ErrCodeProtocol
	case protocol != "" && !connect:
		return http2.ErrCodeProtocol
	case hasControl(path) || authority != "" && !http1.ValidAuthority(authority):
		// As nghttp2 and x/net/http2 do; a :path with a space or a :method that is not a
		// token is answered 400 by the handler (h2Malformed).
		return http2.ErrCodeProtocol
	}
	fields := f.fields
	hdr := st.reqHdr
	if len(fields) > cap(st.vals) {
		st.vals = make([]string, 0, len(fields)) // kept for the stream's next requests
	}
	vals := st.vals[:0] // one backing array for the values
	keys, cookies, count, size := nameBits(0), 0, 0, 0
	// list leaves out the fields the request's map loses before it is forwarded: Host (below)
	// and TE (stream.serveH2). A Trailer field, which the map loses only with a body to come,
	// leaves the list inexact.
	list, exact := st.list[:0], true
	for _, hf := range fields {
		switch hf.Name {
		case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
			return http2.ErrCodeProtocol
		case "te":
			if hf.Value != "trailers" {
				return http2.ErrCodeProtocol
			}
		case "cookie":
			cookies++
			continue
		}
		k := st.wireKey(hf.Name)
		count, size = count+1, size+len(k)+len(hf.Value)
		switch hf.Name {
		case "te", "host":
		case "trailer":
			exact = false
		default:
			list = append(list, pool.Field{Name: k, Value: hf.Value})
		}
		if keys.mayHave(k) { // else k is not in hdr yet: no lookup
			if vs, ok := hdr[k]; ok {
				hdr[k] = append(vs, hf.Value)
				continue
			}
		}
		keys |= nameBit(k)
		vals = append(vals, hf.Value)
		n := len(vals)
		hdr[k] = vals[n-1 : n : n]
	}
	if cookies > 0 { // vals has room: the cookie fields took none
		vals = append(vals, st.joinCookies(fields))
		n := len(vals)
		hdr["Cookie"] = vals[n-1 : n : n]
		keys |= nameBit("Cookie")
		count, size = count+1, size+len("Cookie")+len(vals[n-1])
		list = append(list, pool.Field{Name: "Cookie", Value: vals[n-1]})
	}
	st.list, st.listExact = list, exact
	if protocol != "" {
		hdr[":protocol"] = []string{protocol}
		keys |= nameBit(":protocol")
		count, size = count+1, size+len(":protocol")+len(protocol)
	}
	st.keys, st.fields, st.fieldBytes = keys, count, size
	if keys.mayHave(hdrHost) {
		if authority == "" {
			authority = hdr.Get(hdrHost)
		}
		st.uncount(hdrHost, hdr[hdrHost])
		delete(hdr, hdrHost)
	}
	*r = http.Request{Method: method, Proto: "HTTP/2.0", ProtoMajor: 2, Header: hdr, Host: authority,
		RequestURI: path, RemoteAddr: c.remote, TLS: c.tlsState, Body: http.NoBody, URL: u}
	u.Path = path
	if connect && protocol == "" {
		r.RequestURI, u.Path, u.Host = authority, "", authority
	}
	var contentLength []string
	if keys.mayHave(hdrContentLength) {
		contentLength = hdr[hdrContentLength]
	}
	if !f.ended {
		r.ContentLength = -1
		if vs := contentLength; len(vs) > 0 {
			n, err := strconv.ParseUint(vs[0], 10, 63)
			if err != nil || len(vs) > 1 {
				return http2.ErrCodeProtocol
			}
			r.ContentLength = int64(n)
		}
		r.Body = nil // set by the caller
		if keys.mayHave(hdrTrailer) {
			st.uncount(hdrTrailer, hdr[hdrTrailer]) // declaredTrailers takes it out
			r.Trailer = declaredTrailers(hdr)
		}
	} else if vs := contentLength; len(vs) > 0 && vs[0] != "0" {
		return http2.ErrCodeProtocol
	}
	return http2.ErrCodeNo
}

// uncount takes the values vs of k, about to leave the request header, out of fields and
// fieldBytes.
func (st *h2stream) uncount(k string, vs []string) {
	for _, v := range vs {
		st.fields--
		st.fieldBytes -= len(k) + len(v)
	}
}

// wireKey is the canonical key (http.CanonicalHeaderKey) of an HTTP/2 field name, a
// lower-case token (h2block.emit checked it), written into the stream's arena: a string the
// stream's request may keep until the stream is reused, without the lookup in net/textproto's
// table of common names or an allocation for another name.
func (st *h2stream) wireKey(name string) string {
	n := len(st.arena)
	st.arena = append(st.arena, name...)
	b := st.arena[n:]
	upper := true
	for i, c := range b {
		if upper && 'a' <= c && c <= 'z' {
			b[i] = c - ('a' - 'A')
		}
		upper = c == '-'
	}
	return bytesString(b)
}

// joinCookies is the value of the request's Cookie header: its cookie fields' values joined
// with "; " (RFC 9113 §8.2.3), in the stream's arena.
func (st *h2stream) joinCookies(fields []hpack.HeaderField) string {
	start := len(st.arena)
	for _, hf := range fields {
		if hf.Name == "cookie" {
			if len(st.arena) > start {
				st.arena = append(st.arena, "; "...)
			}
			st.arena = append(st.arena, hf.Value...)
		}
	}
	return bytesString(st.arena[start:])
}

// hasControl reports a control character in s.
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// declaredTrailers is the Trailer map of the fields the Trailer header names, to be filled
// at the body's end; the header itself goes.
func declaredTrailers(hdr http.Header) http.Header {
	vs, ok := hdr["Trailer"]
	if !ok {
		return nil
	}
	delete(hdr, "Trailer")
	t := make(http.Header)
	for _, v := range vs {
		for _, k := range strings.Split(v, ",") {
			switch k = http.CanonicalHeaderKey(strings.TrimSpace(k)); k {
			case "", "Transfer-Encoding", "Trailer", "Content-Length":
			default:
				t[k] = nil
			}
		}
	}
	return t
}

// trailers handles the header block that ends a request body.
func (c *h2conn) trailers(st *h2stream, f *h2block) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.remoteDone || st.reset {
		return http2.StreamError{StreamID: st.id, Code: http2.ErrCodeStreamClosed}
	}
	if !f.ended || f.pseudo.seen != 0 {
		return http2.StreamError{StreamID: st.id, Code: http2.ErrCodeProtocol}
	}
	if st.declLen >= 0 && st.got != st.declLen {
		st.endErr = errH2ShortBody
	}
	if st.trailer != nil {
		st.gotTrailer = make(http.Header)
		for _, hf := range f.fields {
			k := http.CanonicalHeaderKey(hf.Name)
			if !httpguts.ValidTrailerHeader(k) {
				return http2.StreamError{StreamID: st.id, Code: http2.ErrCodeProtocol}
			}
			st.gotTrailer[k] = append(st.gotTrailer[k], hf.Value)
		}
	}
	st.remoteDone = true
	st.cond.Broadcast()
	return nil
}

// mayLaunch reports whether the pending streams' handlers may start: no buffered frame
// follows that could reset them.
func (c *h2conn) mayLaunch() bool {
	if len(c.pending) >= h2LaunchBatch || c.rd.Buffered() < 9 {
		return true
	}
	hdr, err := c.rd.Peek(9)
	if err != nil {
		return true
	}
	switch http2.FrameType(hdr[3]) {
	case http2.FrameHeaders, http2.FrameRSTStream, http2.FrameContinuation:
		return false
	}
	return true
}

// launch starts the pending streams' handlers.
func (c *h2conn) launch() {
	for i, st := range c.pending {
		c.pending[i] = nil
		c.startHandler(st)
	}
	c.pending = c.pending[:0]
}

// run serves the stream on a handler goroutine and ends it.
func (st *h2stream) run() {
	abort := true
	defer func() {
		recover() // a panicking handler resets its stream, as http2 did
		st.finish(abort)
	}()
	abort = st.c.serveStream(st)
}

// serveStream serves one stream; it reports whether the stream must be reset because its
// response could not be completed.
func (c *h2conn) serveStream(st *h2stream) bool {
	r := st.req
	if l := c.life; l != nil {
		l.streamStarted()
		defer l.streamEnded()
	}
	if r.Context().Err() != nil {
		c.resetUnserved()
		return false
	}
	switch {
	case st.tooLarge || tooManyHeaders(c.h.cfg, r, st.fields, st.fieldBytes):
		c.refuse(st, http.StatusRequestHeaderFieldsTooLarge)
		return false
	case h2Malformed(r):
		c.refuse(st, http.StatusBadRequest)
		return false
	}
	if c.refusesExtendedConnect(r) {
		return true // resets the stream, as Envoy's codec does without allow_connect
	}
	s := getStream()
	s.serveH2(c, st, r)
	abort, responded, start := s.aborted, s.status != 0, s.start
	if !abort {
		// Before the stream goes back to its pool: the response's header values may be
		// views of its buffers.
		abort = st.end() != nil
	}
	putStream(s)
	reset := r.Context().Err() != nil
	if reset {
		c.streamCut()
	}
	c.streamEnded(reset, responded, start)
	return abort
}

// finish ends the stream once its handler returned: the rest of the response and END_STREAM,
// or RST_STREAM when abort; a request body the client is still sending is refused with
// RST_STREAM (NO_ERROR).
func (st *h2stream) finish(abort bool) {
	c := st.c
	if !abort {
		abort = st.end() != nil
	}
	c.mu.Lock()
	if !st.reset {
		switch {
		case abort:
			c.w.Buf = appendRSTStream(c.w.Buf, st.id, http2.ErrCodeInternal)
		case !st.remoteDone:
			c.w.Buf = appendRSTStream(c.w.Buf, st.id, http2.ErrCodeNo)
		}
	}
	st.reset = true
	st.stopTimers()
	if n := int64(len(st.body) - st.bodyR); n > 0 {
		c.returnConn(n)
	}
	st.body, st.bodyErr = nil, errH2StreamGone
	delete(c.streams, st.id)
	last := c.goingAway && len(c.streams) == 0
	others := len(c.streams) > 0
	c.mu.Unlock()
	st.cancel()
	if others {
		// Other streams' handlers made ready by the same upstream reads run first and add
		// their frames: one write then carries every response that is ready.
		runtime.Gosched()
	}
	c.flush()
	if last {
		c.closeIdle()
	}
	c.recycle(st)
}

// stopTimers stops the deadline timers; one that fired already finds itself no longer the
// stream's and does nothing. mu is held.
func (st *h2stream) stopTimers() {
	if st.rdTimer != nil {
		st.rdTimer.Stop()
		st.rdTimer = nil
	}
	if st.wrTimer != nil {
		st.wrTimer.Stop()
		st.wrTimer = nil
	}
}

// end sends the rest of the response and END_STREAM, once.
func (st *h2stream) end() error {
	if st.ended {
		return nil
	}
	st.ended = true
	if st.status == 0 {
		st.WriteHeader(http.StatusOK)
	}
	return st.emit(true)
}

// Header is the response header map.
func (st *h2stream) Header() http.Header { return st.hdr }

// WriteHeader records the response status; the header block is encoded with the first body
// bytes or the stream's end, so that one write carries both. An informational status is sent
// at once.
func (st *h2stream) WriteHeader(code int) {
	if st.status != 0 {
		return
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		c := st.c
		c.mu.Lock()
		if !st.reset {
			c.appendHeaders(st.id, code, nil, st.hdr, false, false)
			c.flushLocked()
		}
		c.mu.Unlock()
		return
	}
	st.status = code
}

// Write buffers body bytes, sending them once a frame's worth is held.
func (st *h2stream) Write(p []byte) (int, error) {
	if st.status == 0 {
		st.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(st.status) || st.noBody && st.headersSent {
		return len(p), nil
	}
	st.out = append(st.out, p...)
	if len(st.out) >= h2MaxFrame {
		if err := st.emit(false); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush sends what the handler wrote.
func (st *h2stream) Flush() { st.FlushError() }

// FlushError sends what the handler wrote (http.ResponseController).
func (st *h2stream) FlushError() error {
	if st.status == 0 {
		st.WriteHeader(http.StatusOK)
	}
	if err := st.emit(false); err != nil {
		return err
	}
	c := st.c
	c.mu.Lock()
	c.flushLocked()
	err := c.w.Err
	c.mu.Unlock()
	return err
}

// emit encodes the pending header block and body bytes into the connection's write buffer,
// and with end the trailers or END_STREAM. It waits for flow-control window as needed.
func (st *h2stream) emit(end bool) error {
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.reset || c.w.Err != nil {
		return errH2StreamGone
	}
	trailers := false
	if !st.headersSent {
		st.headersSent = true
		if end && !st.preLength && len(st.hdr["Content-Length"]) == 0 && bodyAllowed(st.status) && (len(st.out) > 0 || !st.noBody) {
			// The whole response is at hand: its length goes with it.
			st.hdr["Content-Length"] = []string{strconv.Itoa(len(st.out))}
		}
		if st.noBody {
			st.out = st.out[:0]
		}
		last := end && len(st.out) == 0
		trailers = c.appendHeaders(st.id, st.status, st.pre, st.hdr, last, false) && end
		if last && !trailers {
			return nil
		}
	} else {
		trailers = end && hasTrailers(st.hdr)
	}
	if err := st.sendData(end && !trailers); err != nil {
		return err
	}
	if trailers {
		c.appendHeaders(st.id, 0, nil, st.hdr, true, true)
	}
	if len(c.w.Buf) >= h2FlushAt {
		c.flushLocked()
	}
	return nil
}

// sendData moves st.out into DATA frames as the windows allow, the last one with END_STREAM
// when end; mu is held.
func (st *h2stream) sendData(end bool) error {
	c := st.c
	p := st.out
	defer func() { st.out = st.out[:0] }()
	for len(p) > 0 || end {
		n := min(int64(len(p)), st.sendWin, c.sendWin, int64(c.peerFrame))
		if n <= 0 && len(p) > 0 {
			if err := st.waitWindow(); err != nil {
				return err
			}
			continue
		}
		var flags http2.Flags
		if end && int(n) == len(p) {
			flags, end = http2.FlagDataEndStream, false
		}
		c.w.Buf = appendFrame(c.w.Buf, http2.FrameData, flags, st.id, p[:n])
		st.sendWin -= n
		c.sendWin -= n
		p = p[n:]
	}
	return nil
}

// waitWindow flushes what is buffered (the client may be waiting for it before it grants
// more) and waits for window; mu is held.
func (st *h2stream) waitWindow() error {
	c := st.c
	c.flushLocked()
	for {
		switch {
		case st.reset || c.w.Err != nil:
			return errH2StreamGone
		case st.wrExpired:
			return os.ErrDeadlineExceeded
		case st.sendWin > 0 && c.sendWin > 0:
			return nil
		}
		st.waitWin = true
		st.cond.Wait()
		st.waitWin = false
	}
}

// bodyAllowed reports whether a response with status may have a body (RFC 9110 §6.4.1).
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// hasTrailers reports whether the header map holds trailers (http.TrailerPrefix keys).
func hasTrailers(h http.Header) bool {
	for k := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			return true
		}
	}
	return false
}

// appendHeaders encodes a response header block (trailers: the http.TrailerPrefix keys
// only) and appends its frames; END_STREAM goes with it when end and hdr holds no trailers.
// It reports whether hdr holds trailers; mu is held.
func (c *h2conn) appendHeaders(id uint32, status int, pre []byte, hdr http.Header, end, trailers bool) (hasTrailers bool) {
	b := c.hbuf[:0]
	if c.tableUpdate {
		b, c.tableUpdate = append(b, h2wire.TableSizeZero), false
	}
	if !trailers {
		b = h2wire.AppendStatus(b, status)
	}
	b = append(b, pre...)
	shutdown := false
	for k, vs := range hdr {
		t, ok := strings.CutPrefix(k, http.TrailerPrefix)
		hasTrailers = hasTrailers || ok
		if ok != trailers {
			continue
		} else if ok {
			k = http.CanonicalHeaderKey(t)
		}
		switch k {
		case "Connection":
			// A "Connection: close" response ends the connection gracefully (GOAWAY).
			shutdown = !trailers && len(vs) > 0 && strings.EqualFold(vs[0], "close")
			continue
		case "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "Trailer":
			continue
		}
		idx := h2wire.StaticName(k) // a static table name is a token
		if idx == 0 && !http1.ValidToken(k) {
			continue
		}
		for _, v := range vs {
			switch {
			case !http1.ValidValue(v):
			case idx != 0:
				b = h2wire.AppendIndexedName(b, idx, v)
			default:
				b = h2wire.AppendLiteral(b, k, v)
			}
		}
	}
	c.hbuf = b
	c.appendHeaderBlock(id, end && (trailers || !hasTrailers))
	if shutdown && !c.goingAway && !c.closing {
		c.goingAway = true
		c.w.Buf = appendGoAway(c.w.Buf, c.maxStream.Load(), http2.ErrCodeNo)
	}
	return hasTrailers
}

// SetReadDeadline bounds the handler's reads of the request body (request_timeout); a time
// in the past ends a read waiting now.
func (st *h2stream) SetReadDeadline(t time.Time) error {
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.rdTimer != nil {
		st.rdTimer.Stop()
		st.rdTimer = nil
	}
	if t.IsZero() {
		return nil
	}
	// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
	d := time.Until(t)
	if d <= 0 {
		st.readExpired()
		return nil
	}
	var tm *time.Timer
	tm = time.AfterFunc(d, func() {
		c.mu.Lock()
		if st.rdTimer == tm { // not stopped, replaced, or the stream reused since it fired
			st.readExpired()
		}
		c.mu.Unlock()
	})
	st.rdTimer = tm
	return nil
}

// readExpired ends the body's reads with a timeout; mu is held.
func (st *h2stream) readExpired() {
	if st.bodyErr == nil && !(st.remoteDone && st.bodyR == len(st.body)) {
		st.bodyErr = os.ErrDeadlineExceeded
	}
	st.cond.Broadcast()
}

// SetWriteDeadline bounds the handler's waits for window; when it passes the stream is
// reset (INTERNAL_ERROR), as http2 did.
func (st *h2stream) SetWriteDeadline(t time.Time) error {
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.wrTimer != nil {
		st.wrTimer.Stop()
		st.wrTimer = nil
	}
	if t.IsZero() {
		return nil
	}
	// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
	d := time.Until(t)
	if d <= 0 {
		st.writeExpired()
		return nil
	}
	var tm *time.Timer
	tm = time.AfterFunc(d, func() {
		c.mu.Lock()
		if st.wrTimer == tm { // not stopped, replaced, or the stream reused since it fired
			st.writeExpired()
		}
		c.mu.Unlock()
	})
	st.wrTimer = tm
	return nil
}

// writeExpired resets the stream; mu is held.
func (st *h2stream) writeExpired() {
	st.wrExpired = true
	if !st.reset {
		st.reset = true
		st.c.w.Buf = appendRSTStream(st.c.w.Buf, st.id, http2.ErrCodeInternal)
		st.cancel()
	}
	st.cond.Broadcast()
}

// h2body is a stream's request body as its handler reads it.
type h2body h2stream

var errH2BodyClosed = errors.New("http2: request body closed by handler")

func (b *h2body) Read(p []byte) (int, error) {
	st := (*h2stream)(b)
	c := st.c
	c.mu.Lock()
	for {
		if n := len(st.body) - st.bodyR; n > 0 && st.bodyErr == nil {
			k := copy(p, st.body[st.bodyR:])
			st.bodyR += k
			if st.bodyR == len(st.body) {
				st.body, st.bodyR = st.body[:0], 0
			}
			st.consumed(int64(k))
			if len(c.w.Buf) > 0 {
				c.flushLocked()
			}
			c.mu.Unlock()
			return k, nil
		}
		switch {
		case st.bodyErr != nil:
			err := st.bodyErr
			c.mu.Unlock()
			return 0, err
		case st.remoteDone:
			st.bodyErr = io.EOF
			if st.endErr != nil {
				st.bodyErr = st.endErr
			}
			// On the handler's goroutine, as it reads the end: the Trailer map it may have
			// handed on (an upstream request) changes only now.
			for k, vs := range st.gotTrailer {
				if _, ok := st.trailer[k]; ok {
					st.trailer[k] = vs
				}
			}
		case st.reset:
			st.bodyErr = errH2StreamGone
		default:
			st.cond.Wait()
		}
	}
}

// consumed returns window for n body bytes the handler read; mu is held.
func (st *h2stream) consumed(n int64) {
	st.c.returnConn(n)
	if !st.remoteDone {
		st.returnStream(n)
	}
}

// returnStream gives back stream window; mu is held.
func (st *h2stream) returnStream(n int64) {
	st.unack += n
	if st.unack >= max(st.c.advStream/4, 1) {
		st.c.w.Buf = appendWindowUpdate(st.c.w.Buf, st.id, uint32(st.unack))
		st.recvWin += st.unack
		st.unack = 0
	}
}

// Close ends the handler's reads; bytes the client still sends are dropped.
func (b *h2body) Close() error {
	st := (*h2stream)(b)
	c := st.c
	c.mu.Lock()
	if st.bodyErr == nil || st.bodyErr == io.EOF {
		st.bodyErr = errH2BodyClosed
	}
	if n := int64(len(st.body) - st.bodyR); n > 0 {
		c.returnConn(n)
	}
	st.body, st.bodyR = st.body[:0], 0
	st.cond.Broadcast()
	c.mu.Unlock()
	return nil
}

// Stream handlers run on the connection's parked goroutines (workers), whose stacks have
// grown to what a handler needs, instead of on a new goroutine, whose stack grows again, per
// stream. Up to h2IdleWorkers wait between streams; they end with the connection.
const h2IdleWorkers = 16

// startHandler runs st's handler on an idle worker, else on a new one.
func (c *h2conn) startHandler(st *h2stream) {
	c.mu.Lock()
	var ch chan *h2stream
	if n := len(c.workers); n > 0 {
		ch = c.workers[n-1]
		c.workers = c.workers[:n-1]
	}
	c.mu.Unlock()
	if ch != nil {
		ch <- st
		return
	}
	go c.work(st)
}

// work is a worker: it serves st, then waits for the next stream.
func (c *h2conn) work(st *h2stream) {
	var ch chan *h2stream
	for st != nil {
		growStack()
		st.run()
		c.mu.Lock()
		if c.ended || len(c.workers) >= h2IdleWorkers {
			c.mu.Unlock()
			return
		}
		if ch == nil {
			ch = make(chan *h2stream, 1)
		}
		c.workers = append(c.workers, ch)
		c.mu.Unlock()
		st = <-ch
	}
}

// stopWorkers ends the idle workers of a connection that ended.
func (c *h2conn) stopWorkers() {
	c.mu.Lock()
	c.ended = true
	idle := c.workers
	c.workers = nil
	c.mu.Unlock()
	for _, ch := range idle {
		close(ch)
	}
}

// h2HandlerStack is about the stack a stream's handler uses: with the worker's own frames, a
// 16 KiB stack, which a proxied request's handler did not outgrow under callgrind (and a
// handler that needs more grows it as any goroutine does).
const h2HandlerStack = 12 << 10

// stackNever is false; growStack's frame is never written, but it is reserved.
var stackNever bool

// growStack has the goroutine's stack hold h2HandlerStack more bytes: a new worker's stack
// grows there in one copy of its few frames here, instead of doubling there one copy at a
// time deep in a handler, where each copy walks every frame (and a stack the garbage
// collector shrank while the worker waited grows back the same way).
//
//go:noinline
func growStack() {
	if stackNever {
		var frame [h2HandlerStack]byte
		stackSink(frame[:])
	}
}

//go:noinline
func stackSink([]byte) {}
