package pool

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Limits of the HTTP/1.1 response parser, Envoy's defaults for max_response_headers_kb and
// max_headers_count.
const (
	maxHeaderBytes = 60 << 10
	maxHeaders     = 100
)

// ErrProtocol is wrapped by every error about a malformed upstream response (Envoy's
// upstream_cx_protocol_error).
var ErrProtocol = errors.New("upstream protocol error")

func protocolError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...)
}

// bodyMode is how a response body is delimited.
type bodyMode uint8

const (
	bodyNone bodyMode = iota
	bodyLength
	bodyChunked
	bodyUntilClose
)

// framing is what the response head says about the body and the connection.
type framing struct {
	mode      bodyMode
	length    int64
	keepAlive bool
}

// writeRequestHead writes the request line and headers with the framing headers the codec
// chooses, ending with the empty line. Nothing is flushed.
func writeRequestHead(bw *bufio.Writer, req *Request, authority string) {
	bw.WriteString(req.Method)
	bw.WriteByte(' ')
	if req.Path == "" {
		bw.WriteByte('/')
	} else {
		bw.WriteString(req.Path)
	}
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	if req.Host != "" {
		bw.WriteString(req.Host)
	} else {
		bw.WriteString(authority)
	}
	bw.WriteString("\r\n")
	for i := range req.Header {
		f := &req.Header[i]
		if isFramingHeader(f.Name) {
			continue
		}
		bw.WriteString(f.Name)
		bw.WriteString(": ")
		bw.WriteString(f.Value)
		bw.WriteString("\r\n")
	}
	switch {
	case req.Body != nil && req.ContentLength < 0:
		bw.WriteString("Transfer-Encoding: chunked\r\n")
	case req.ContentLength > 0 || (req.ContentLength == 0 && methodExpectsBody(req.Method)):
		bw.WriteString("Content-Length: ")
		bw.Write(strconv.AppendInt(bw.AvailableBuffer(), max(req.ContentLength, 0), 10))
		bw.WriteString("\r\n")
	}
	bw.WriteString("\r\n")
}

// isFramingHeader reports whether name is Content-Length or Transfer-Encoding, or a
// hop-by-hop header the codec owns.
func isFramingHeader(name string) bool {
	switch len(name) {
	case len("content-length"):
		return equalFoldString(name, "content-length")
	case len("transfer-encoding"):
		return equalFoldString(name, "transfer-encoding")
	case len("host"):
		return equalFoldString(name, "host")
	}
	return false
}

func equalFoldString(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i], b[i]
		if x != y && (x|0x20 != y|0x20 || (x|0x20) < 'a' || (x|0x20) > 'z') {
			return false
		}
	}
	return true
}

// methodExpectsBody reports whether an empty body is announced with Content-Length: 0, as
// user agents do for these methods.
func methodExpectsBody(m string) bool { return m == "POST" || m == "PUT" || m == "PATCH" }

// writeRequestBody writes req.Body after the head: exactly ContentLength bytes, or chunks.
// scratch is a per-connection buffer for chunked bodies.
func writeRequestBody(bw *bufio.Writer, req *Request, scratch []byte) error {
	if req.Body == nil {
		return nil
	}
	if req.ContentLength >= 0 {
		left := req.ContentLength
		for left > 0 {
			if bw.Available() == 0 {
				if err := bw.Flush(); err != nil {
					return err
				}
			}
			buf := bw.AvailableBuffer()
			buf = buf[:min(int64(cap(buf)), left)]
			n, err := req.Body.Read(buf)
			bw.Write(buf[:n])
			left -= int64(n)
			if err == io.EOF {
				if left > 0 {
					return fmt.Errorf("request body: %d bytes short of content length %d", left, req.ContentLength)
				}
				break
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	for {
		n, err := req.Body.Read(scratch)
		if n > 0 {
			bw.Write(strconv.AppendUint(bw.AvailableBuffer(), uint64(n), 16))
			bw.WriteString("\r\n")
			bw.Write(scratch[:n])
			bw.WriteString("\r\n")
		}
		if err == io.EOF {
			_, err = bw.WriteString("0\r\n\r\n")
			return err
		}
		if err != nil {
			return err
		}
	}
}

// readLine reads one line, CRLF or LF terminated, appending it (without the line end) to
// dst. Lines longer than the reader's buffer are accumulated up to limit bytes.
func readLine(br *bufio.Reader, dst []byte, limit int) ([]byte, int, error) {
	start := len(dst)
	for {
		s, err := br.ReadSlice('\n')
		if len(dst)-start+len(s) > limit {
			return dst, 0, protocolError("header section larger than %d bytes", maxHeaderBytes)
		}
		dst = append(dst, s...)
		if err == nil {
			break
		}
		if err != bufio.ErrBufferFull {
			return dst, 0, err
		}
	}
	n := len(dst) - start
	line := dst[start:]
	line = line[:len(line)-1]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return dst[:start+len(line)], n, nil
}

// readResponseHead parses the status line and headers into resp, skipping interim (1xx)
// responses other than 101. head is set for a HEAD request.
func readResponseHead(br *bufio.Reader, resp *Response, head bool) (framing, error) {
	for {
		resp.reset()
		f, err := readOneHead(br, resp, head)
		if err != nil {
			return f, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == 101 {
			resp.finishHeader()
			return f, nil
		}
	}
}

func readOneHead(br *bufio.Reader, resp *Response, head bool) (framing, error) {
	var f framing
	// The status line is parsed in place, then dropped from the storage.
	line, used, err := readLine(br, resp.raw[:0], maxHeaderBytes)
	if err != nil {
		return f, err
	}
	budget := maxHeaderBytes - used
	if err := parseStatusLine(line, resp); err != nil {
		return f, err
	}
	resp.raw = resp.raw[:0]
	f.keepAlive = resp.ProtoMinor == 1
	var clSeen, chunked, teSeen bool
	var cl int64
	for {
		mark := len(resp.raw)
		var n int
		resp.raw, n, err = readLine(br, resp.raw, budget)
		if err != nil {
			return f, err
		}
		budget -= n
		line := resp.raw[mark:]
		resp.raw = resp.raw[:mark]
		if len(line) == 0 {
			break
		}
		if len(resp.lens) == maxHeaders {
			return f, protocolError("more than %d headers", maxHeaders)
		}
		name, value, err := splitHeader(line)
		if err != nil {
			return f, err
		}
		// name and value alias the bytes just past len(resp.raw); addField copies them
		// forward over themselves, which append handles as a memmove.
		switch {
		case equalFold(name, "content-length"):
			v, ok := parseContentLength(value)
			if !ok || (clSeen && v != cl) {
				return f, protocolError("content-length %q is invalid", value)
			}
			clSeen, cl = true, v
		case equalFold(name, "transfer-encoding"):
			teSeen = true
			chunked = lastTokenIs(value, "chunked")
		case equalFold(name, "connection"):
			if hasToken(value, "close") {
				f.keepAlive = false
			} else if resp.ProtoMinor == 0 && hasToken(value, "keep-alive") {
				f.keepAlive = true
			}
		}
		resp.addField(name, value)
	}
	switch {
	case head || resp.StatusCode < 200 || resp.StatusCode == 204 || resp.StatusCode == 304:
		f.mode = bodyNone
		if clSeen {
			resp.ContentLength = cl
		}
		if resp.StatusCode == 101 {
			f.keepAlive = false
		}
	case teSeen && chunked:
		f.mode = bodyChunked
		if clSeen {
			f.keepAlive = false // both framings: RFC 9112 6.3 says close after
		}
	case teSeen:
		f.mode, f.keepAlive = bodyUntilClose, false
	case clSeen:
		f.mode, f.length = bodyLength, cl
		resp.ContentLength = cl
		if cl == 0 {
			f.mode = bodyNone
		}
	default:
		f.mode, f.keepAlive = bodyUntilClose, false
	}
	return f, nil
}

// parseStatusLine reads "HTTP/1.x NNN reason".
func parseStatusLine(line []byte, resp *Response) error {
	if len(line) < 12 || string(line[:7]) != "HTTP/1." || line[8] != ' ' ||
		(len(line) > 12 && line[12] != ' ') {
		return protocolError("status line %q is malformed", line)
	}
	switch line[7] {
	case '0':
		resp.ProtoMinor = 0
	case '1':
		resp.ProtoMinor = 1
	default:
		return protocolError("status line %q: unsupported version", line)
	}
	code := 0
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return protocolError("status line %q: status code is not 3 digits", line)
		}
		code = code*10 + int(c-'0')
	}
	if code < 100 {
		return protocolError("status line %q: status code %d < 100", line, code)
	}
	resp.StatusCode = code
	return nil
}

// splitHeader splits "Name: value" and trims optional whitespace around the value.
func splitHeader(line []byte) (name, value []byte, err error) {
	if line[0] == ' ' || line[0] == '\t' {
		return nil, nil, protocolError("obsolete header line folding")
	}
	i := 0
	for i < len(line) && line[i] != ':' {
		if !isTokenChar(line[i]) {
			return nil, nil, protocolError("header name %q has an invalid character", line[:i+1])
		}
		i++
	}
	if i == 0 || i == len(line) {
		return nil, nil, protocolError("header line %q has no name or colon", line)
	}
	name, value = line[:i], line[i+1:]
	for len(value) > 0 && (value[0] == ' ' || value[0] == '\t') {
		value = value[1:]
	}
	for len(value) > 0 && (value[len(value)-1] == ' ' || value[len(value)-1] == '\t') {
		value = value[:len(value)-1]
	}
	for _, c := range value {
		if c == 0 || c == '\r' || c == '\n' {
			return nil, nil, protocolError("header %q value has a control character", name)
		}
	}
	return name, value, nil
}

func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

func parseContentLength(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// hasToken reports whether the comma-separated list v holds token (case-insensitive).
func hasToken(v []byte, token string) bool {
	for len(v) > 0 {
		i := 0
		for i < len(v) && v[i] != ',' {
			i++
		}
		t := trimOWS(v[:i])
		if equalFold(t, token) {
			return true
		}
		if i == len(v) {
			break
		}
		v = v[i+1:]
	}
	return false
}

// lastTokenIs reports whether the last element of the comma-separated list v is token.
func lastTokenIs(v []byte, token string) bool {
	i := len(v)
	for i > 0 && v[i-1] != ',' {
		i--
	}
	return equalFold(trimOWS(v[i:]), token)
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// body reads one response body from a connection's bufio.Reader. It is embedded in the
// connection and reset for each response, so reading a body allocates nothing.
type body struct {
	br        *bufio.Reader
	mode      bodyMode
	left      int64 // bytes left in the body (bodyLength) or in the current chunk
	crlf      bool  // a chunk's trailing CRLF is still to be read
	done      bool
	err       error
	line      []byte // chunk-size line storage
	onDone    func() // called once when the body ends cleanly; may be nil
	readBytes int64
	resp      *Response // receives the chunked trailer section; may be nil
}

func (b *body) reset(br *bufio.Reader, f framing, resp *Response) {
	b.br, b.mode, b.left, b.crlf, b.err, b.readBytes, b.resp = br, f.mode, f.length, false, nil, 0, resp
	b.done = f.mode == bodyNone
	if f.mode == bodyChunked {
		b.left = 0
	}
}

// complete reports whether the body was read to its end without error.
func (b *body) complete() bool { return b.done && b.err == nil }

// peek returns buffered body bytes (at least one unless at the end or on error) without
// consuming them.
func (b *body) peek() ([]byte, error) {
	if b.err != nil {
		return nil, b.err
	}
	if b.done {
		return nil, io.EOF
	}
	if b.mode == bodyChunked && b.left == 0 {
		if err := b.nextChunk(); err != nil {
			b.err = err
			return nil, err
		}
		if b.done {
			return nil, io.EOF
		}
	}
	if b.br.Buffered() == 0 {
		if _, err := b.br.Peek(1); err != nil {
			if err == io.EOF && b.mode == bodyUntilClose {
				b.done = true
				return nil, io.EOF
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			b.err = err
			return nil, err
		}
	}
	n := b.br.Buffered()
	if b.mode != bodyUntilClose {
		n = int(min(int64(n), b.left))
	}
	s, _ := b.br.Peek(n)
	return s, nil
}

// advance consumes n bytes returned by peek.
func (b *body) advance(n int) {
	b.br.Discard(n)
	b.readBytes += int64(n)
	if b.mode == bodyUntilClose {
		return
	}
	b.left -= int64(n)
	if b.left > 0 {
		return
	}
	switch b.mode {
	case bodyLength:
		b.finish()
	case bodyChunked:
		b.crlf = true
	}
}

func (b *body) finish() {
	b.done = true
	if b.onDone != nil {
		b.onDone()
	}
}

// nextChunk reads the CRLF ending the previous chunk and the next chunk-size line; at the
// last chunk it reads the trailer section and marks the body done.
func (b *body) nextChunk() error {
	if b.crlf {
		var err error
		if b.line, _, err = readLine(b.br, b.line[:0], 2); err != nil || len(b.line) != 0 {
			return unexpected(err, "chunk data not followed by CRLF")
		}
		b.crlf = false
	}
	var err error
	b.line, _, err = readLine(b.br, b.line[:0], 1024)
	if err != nil {
		return unexpected(err, "")
	}
	size, ok := parseChunkSize(b.line)
	if !ok {
		return protocolError("chunk size line %q is malformed", b.line)
	}
	if size > 0 {
		b.left = size
		return nil
	}
	for budget, fields := maxHeaderBytes, 0; ; fields++ {
		var n int
		b.line, n, err = readLine(b.br, b.line[:0], budget)
		if err != nil {
			return unexpected(err, "")
		}
		budget -= n
		if len(b.line) == 0 {
			break
		}
		b.addTrailer(b.line, fields)
	}
	if b.resp != nil {
		b.resp.finishTrailer()
	}
	b.finish()
	return nil
}

// addTrailer keeps one trailer line for the response. Lines that are not well-formed fields,
// fields past maxHeaders and the fields that frame a message are dropped (RFC 9110 §6.5.1:
// a recipient may discard trailer fields it cannot use).
func (b *body) addTrailer(line []byte, fields int) {
	if b.resp == nil || fields >= maxHeaders {
		return
	}
	name, value, err := splitHeader(line)
	if err != nil {
		return
	}
	for _, framing := range [...]string{"content-length", "transfer-encoding", "host", "trailer"} {
		if equalFold(name, framing) {
			return
		}
	}
	b.resp.addTrailer(name, value)
}

func unexpected(err error, what string) error {
	if err == nil {
		return protocolError("%s", what)
	}
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// parseChunkSize reads the hexadecimal size before any chunk extension.
func parseChunkSize(line []byte) (int64, bool) {
	var n int64
	digits := 0
	i := 0
	for ; i < len(line); i++ {
		c := line[i]
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			goto rest
		}
		if digits == 15 {
			return 0, false
		}
		n = n<<4 | int64(d)
		digits++
	}
rest:
	if digits == 0 {
		return 0, false
	}
	for ; i < len(line); i++ {
		if c := line[i]; c != ' ' && c != '\t' {
			if c != ';' {
				return 0, false
			}
			break
		}
	}
	return n, true
}

// Read implements io.Reader.
func (b *body) Read(p []byte) (int, error) {
	s, err := b.peek()
	if err != nil {
		return 0, err
	}
	n := copy(p, s)
	b.advance(n)
	return n, nil
}

// WriteTo implements io.WriterTo: it writes buffered body bytes straight from the
// connection's read buffer.
func (b *body) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		s, err := b.peek()
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
		n, err := w.Write(s)
		total += int64(n)
		b.advance(n)
		if err != nil {
			return total, err
		}
	}
}
