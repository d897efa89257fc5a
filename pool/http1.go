package pool

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/http1"
)

// maxHeaders bounds the trailer fields kept from a response (Envoy's default
// max_headers_count).
const maxHeaders = 100

// headLimits bound a response head: its number of fields (max_headers_count) and the bytes
// of its status line and fields (max_response_headers_kb). chunkedLength is the cluster's
// allow_chunked_length: a head with both Transfer-Encoding and Content-Length is read as
// chunked rather than refused.
type headLimits struct {
	fields, bytes int
	chunkedLength bool
}

// defaultHeadLimits are Envoy's defaults.
var defaultHeadLimits = headLimits{fields: maxHeaders, bytes: 60 << 10}

// ErrProtocol is wrapped by every error about a malformed upstream response (Envoy's
// upstream_cx_protocol_error).
var ErrProtocol = errors.New("upstream protocol error")

func protocolError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...)
}

// ErrRequestLine is returned for a request whose method, path or host cannot be written in
// an HTTP/1 request head without changing its meaning (a space or control character would
// end the request line early or inject another one). Nothing is written for it.
var ErrRequestLine = errors.New("request cannot be written as HTTP/1")

// writeRequestHead writes the request line and headers with the framing headers the codec
// chooses, ending with the empty line. Nothing is flushed. It is the last line of defence
// against request-line injection from an HTTP/2 downstream: a method that is not a token, or
// a path or host that could split the line, is refused before a byte is written. o is the
// cluster's HTTP/1 codec options: header_key_format spells the names (unless the request's
// own names are Spelled), send_fully_qualified_url makes the target absolute. checked, when
// not nil, is the connection's copy of the last host it found valid (hostValid). size is
// headSize(req, authority), which the caller computes once for this and checkAtSend.
func writeRequestHead(bw *bufio.Writer, req *Request, authority string, size int, o *config.HTTP1Options, checked *[]byte) error {
	path, host := req.Path, req.Host
	if path == "" {
		path = "/"
	}
	if host == "" {
		host = authority
	}
	if !http1.ValidToken(req.Method) || !http1.ValidTarget(path) || !hostValid(host, checked) {
		return fmt.Errorf("%w: method %q, path %q, host %q", ErrRequestLine, req.Method, path, host)
	}
	absolute := o.SendFullyQualifiedURL && req.Method != "CONNECT"
	nc := namer{c: o.StatelessCase()}
	if req.Spelled {
		nc = namer{spelled: true, c: req.OthersCase}
	}
	hostName, given := "host", false
	if req.Spelled && req.HostName != "" {
		hostName, given = req.HostName, true
	}
	if size <= bw.Available() {
		// Assembled in the buffer and written at once: a write per field was about a
		// third of the head's cost.
		buf := appendRequestLine(bw.AvailableBuffer(), req, path, host, absolute)
		if !given && nc.c != config.HeaderCaseProper {
			// The name as namer spells it here, without its calls: about 70 instructions.
			buf = append(buf, "host: "...)
			buf = append(buf, host...)
			buf = append(buf, "\r\n"...)
		} else {
			buf = nc.appendField(buf, hostName, host, given)
		}
		if nc.c != config.HeaderCaseProper && !nc.spelled {
			buf = appendLowerFields(buf, req.Header)
		} else {
			for i := range req.Header {
				if f := &req.Header[i]; !isFramingHeader(f.Name) {
					buf = nc.appendField(buf, f.Name, f.Value, true)
				}
			}
		}
		bw.Write(append(nc.appendFraming(buf, req), "\r\n"...))
		return nil
	}
	// A head longer than the buffer goes through it piece by piece.
	if bw.Available() >= len(req.Method)+len(path)+len("  HTTP/1.1\r\n") && !absolute {
		bw.Write(appendRequestLine(bw.AvailableBuffer(), req, path, host, false))
	} else {
		bw.WriteString(req.Method)
		bw.WriteByte(' ')
		if absolute {
			bw.WriteString(req.scheme())
			bw.WriteString("://")
			bw.WriteString(host)
		}
		bw.WriteString(path)
		bw.WriteString(" HTTP/1.1\r\n")
	}
	nc.field(bw, hostName, host, given)
	for i := range req.Header {
		if f := &req.Header[i]; !isFramingHeader(f.Name) {
			nc.field(bw, f.Name, f.Value, true)
		}
	}
	switch {
	case req.Body != nil && req.ContentLength < 0:
		nc.field(bw, "transfer-encoding", "chunked", false)
	case sendsLength(req):
		nc.name(bw, "content-length", false)
		bw.Write(strconv.AppendInt(bw.AvailableBuffer(), req.ContentLength, 10))
		bw.WriteString("\r\n")
	}
	bw.WriteString("\r\n")
	return nil
}

// appendLowerFields appends fields, but the framing ones, as "name: value" lines with their
// names in lower case, the upstream head of nearly every request: a name Legate knows is
// its lower-case spelling with ": " (config.KnownLowerField, inlined), copied at once, and
// never a framing name (TestFramingNamesAreNotKnown). In
// writeRequestHead's own loop, with its other cases and live values spilled around each
// copy, a field was about 135 instructions.
func appendLowerFields(buf []byte, fields []Field) []byte {
	for i := range fields {
		f := &fields[i]
		if l, known := config.KnownLowerField(f.Name); known {
			buf = append(buf, l...)
		} else if isFramingHeader(f.Name) {
			continue
		} else {
			buf = append(config.AppendName(buf, f.Name, config.HeaderCaseLower), ": "...)
		}
		buf = append(buf, f.Value...)
		buf = append(buf, "\r\n"...)
	}
	return buf
}

// hostValid reports whether host may be written as the request's Host
// (http1.ValidAuthority). checked, when not nil, holds a copy of the last host found valid
// on the connection: the same host again, as on most requests but a connection's first, is
// found valid by one comparison rather than checked again a byte at a time (about 110
// instructions for "127.0.0.1:8080"). It is a copy, not the string: a host points into a
// downstream buffer that later requests overwrite.
func hostValid(host string, checked *[]byte) bool {
	if checked != nil && string(*checked) == host {
		return true
	}
	if !http1.ValidAuthority(host) {
		return false
	}
	if checked != nil {
		*checked = append((*checked)[:0], host...)
	}
	return true
}

// headSize bounds the length of req's head from above; authority is the host's address.
func headSize(req *Request, authority string) int {
	host := req.Host
	if host == "" {
		host = authority
	}
	// The request line (an absolute target's scheme and host included, a path of "/" for an
	// empty one), the host field (with its recorded name), a framing field of at most 40
	// bytes and the empty line.
	n := len(req.Method) + len(req.scheme()) + len(req.Path) + 2*len(host) + max(len(req.HostName), 4) + 64
	for i := range req.Header {
		n += len(req.Header[i].Name) + len(req.Header[i].Value) + len(": \r\n")
	}
	return n
}

// appendRequestLine appends req's request line; absolute makes the target absolute.
func appendRequestLine(buf []byte, req *Request, path, host string, absolute bool) []byte {
	buf = append(buf, req.Method...)
	buf = append(buf, ' ')
	if absolute {
		buf = append(buf, req.scheme()...)
		buf = append(buf, "://"...)
		buf = append(buf, host...)
	}
	buf = append(buf, path...)
	return append(buf, " HTTP/1.1\r\n"...)
}

// sendsLength reports whether req's head carries Content-Length.
func sendsLength(req *Request) bool {
	return req.ContentLength > 0 || (req.ContentLength == 0 && methodExpectsBody(req.Method))
}

// namer writes header names in the case an HTTP/1 codec is configured for.
type namer struct {
	spelled bool // the names the request carries were spelled by the downstream's formatter
	c       config.HeaderCase
}

// field writes "name: value" and the line's end. given is set for a name the request
// carries, rather than one the codec adds. A field that fits the buffer is assembled in it
// and written at once: four writes a field were about a fifth of the head's cost.
func (n namer) field(bw *bufio.Writer, name, value string, given bool) {
	if bw.Available() < len(name)+len(value)+len(": \r\n") {
		n.name(bw, name, given)
		bw.WriteString(value)
		bw.WriteString("\r\n")
		return
	}
	buf := n.appendName(bw.AvailableBuffer(), name, given)
	buf = append(buf, ": "...)
	buf = append(buf, value...)
	bw.Write(append(buf, "\r\n"...))
}

// name writes a field's name and the ": " after it; the caller writes the value and the
// line's end.
func (n namer) name(bw *bufio.Writer, name string, given bool) {
	if n.spelled && given {
		bw.WriteString(name)
	} else {
		bw.Write(n.appendName(bw.AvailableBuffer(), name, given))
	}
	bw.WriteString(": ")
}

// appendName appends a field's name in the codec's case. The names the codec adds (given
// false) are passed in lower case.
func (n namer) appendName(dst []byte, name string, given bool) []byte {
	switch {
	case n.spelled && given:
		return append(dst, name...)
	case given:
		return config.AppendName(dst, name, n.c)
	}
	return config.AppendLowerName(dst, name, n.c)
}

// appendField appends "name: value" and the line's end; given is as for field.
func (n namer) appendField(buf []byte, name, value string, given bool) []byte {
	buf = append(n.appendName(buf, name, given), ": "...)
	buf = append(buf, value...)
	return append(buf, "\r\n"...)
}

// appendFraming appends the field the codec adds to frame req's body, if any.
func (n namer) appendFraming(buf []byte, req *Request) []byte {
	switch {
	case req.Body != nil && req.ContentLength < 0:
		return n.appendField(buf, "transfer-encoding", "chunked", false)
	case sendsLength(req):
		buf = append(n.appendName(buf, "content-length", false), ": "...)
		return append(strconv.AppendInt(buf, req.ContentLength, 10), "\r\n"...)
	}
	return buf
}

// isFramingHeader reports whether name is Content-Length or Transfer-Encoding, or a
// hop-by-hop header the codec owns. It is inlined: a name of another length than theirs,
// most names, is told apart without a call.
func isFramingHeader(name string) bool {
	const lengths = 1<<len("content-length") | 1<<len("transfer-encoding") | 1<<len("host")
	return uint64(1)<<uint(len(name))&lengths != 0 && isFramingName(name)
}

// isFramingName is isFramingHeader for a name of one of the framing names' lengths.
func isFramingName(name string) bool {
	switch len(name) {
	case len("content-length"):
		return http1.EqualFold(name, "content-length")
	case len("transfer-encoding"):
		return http1.EqualFold(name, "transfer-encoding")
	case len("host"):
		return http1.EqualFold(name, "host")
	}
	return false
}

// methodExpectsBody reports whether an empty body is announced with Content-Length: 0, as
// user agents do for these methods.
func methodExpectsBody(m string) bool { return m == "POST" || m == "PUT" || m == "PATCH" }

// writeRequestBody writes req.Body after the head: exactly ContentLength bytes, or chunks
// (ending with req.Trailer when o enables trailers).
// scratch is a per-connection buffer for chunked bodies. What a read gave goes out before the
// next read, which may wait for the client: bytes held back would stall an upstream that
// answers on what it has (the head and the first bytes still leave in one write).
func writeRequestBody(bw *bufio.Writer, req *Request, scratch []byte, o *config.HTTP1Options) error {
	if req.Body == nil {
		return nil
	}
	if req.ContentLength >= 0 {
		left := req.ContentLength
		for left > 0 {
			if bw.Buffered() > 0 && (bw.Available() == 0 || left < req.ContentLength) {
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
	for first := true; ; first = false {
		if !first && bw.Buffered() > 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
		n, err := req.Body.Read(scratch)
		if n > 0 {
			bw.Write(http1.AppendChunkSize(bw.AvailableBuffer(), n))
			bw.Write(scratch[:n])
			bw.WriteString(http1.CRLF)
		}
		if err == io.EOF {
			return writeLastChunk(bw, req, o)
		}
		if err != nil {
			return err
		}
	}
}

// writeLastChunk ends a chunked request body, with its trailers when o enables them (Envoy's
// HTTP/1 codec drops them otherwise).
func writeLastChunk(bw *bufio.Writer, req *Request, o *config.HTTP1Options) error {
	bw.WriteString(http1.LastChunk)
	if o.EnableTrailers {
		nc := namer{c: o.StatelessCase()}
		for k, vs := range req.Trailer {
			if !http1.ValidToken(k) || isFramingHeader(k) {
				continue
			}
			for _, v := range vs {
				if http1.ValidValue(v) {
					nc.field(bw, k, v, true) // not spelled: written in the codec's case
				}
			}
		}
	}
	_, err := bw.WriteString(http1.CRLF)
	return err
}

// readResponseHead parses the status line and headers into resp, skipping interim (1xx)
// responses other than 101. head is set for a HEAD request.
func readResponseHead(br *bufio.Reader, resp *Response, head bool, lim headLimits) (http1.Framing, error) {
	for {
		resp.reset()
		f, err := readOneHead(br, resp, head, lim)
		if err != nil {
			return f, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == 101 {
			return f, nil
		}
	}
}

// readOneHead reads one response head (a final or an interim one) into resp.
func readOneHead(br *bufio.Reader, resp *Response, head bool, lim headLimits) (http1.Framing, error) {
	if br.Buffered() == 0 {
		if _, err := br.Peek(1); err != nil { // the response's first read
			return http1.Framing{}, err
		}
	}
	if f, ok, err := parseBufferedHead(br, resp, head, lim); ok {
		return f, err
	}
	return readHeadLines(br, resp, head, lim)
}

// parseBufferedHead parses a head the reader already holds whole, in one pass: each field
// line is split, checked and its end found at once (http1.CutField), in a copy of the
// buffered bytes in resp's storage, so that the fields point where they lie. A line at a
// time (a ReadSlice, a copy of its name and value, then the Header built from the copies)
// was about 4,200 instructions of a five-field head; a search for each line's end, then a
// split and a check of the line, about 2,600; parsing in the reader's buffer, then moving
// each field to the copy, about 250 more. ok is false, with nothing consumed and resp's
// Header empty, for a head this path leaves to readHeadLines, which reads every head line
// by line: one not yet whole in the buffer, longer than max_response_headers_kb, with a line
// that ends in a bare LF, or with a malformed line (which readHeadLines refuses).
func parseBufferedHead(br *bufio.Reader, resp *Response, head bool, lim headLimits) (f http1.Framing, ok bool, err error) {
	buf, _ := br.Peek(br.Buffered())
	buf = buf[:min(len(buf), lim.bytes)] // a head past the limit is readHeadLines' to refuse
	nl := bytes.IndexByte(buf, '\n')
	if nl <= 0 || buf[nl-1] != '\r' {
		return f, false, nil
	}
	if resp.StatusCode, resp.ProtoMinor, err = http1.ParseStatusLine(buf[:nl-1]); err != nil {
		return f, false, nil
	}
	lines := buf[nl+1:] // the field lines and the empty line ending them, then the body
	// The copy is as long as the storage's capacity allows (it holds a head as long as
	// the longest before it, mostly). A copy cut short is seen as a head not yet whole; the
	// head is then found in the buffer, copied whole, and parsed again from the copy.
	raw := resp.raw[:cap(resp.raw)]
	n := copy(raw, lines)
	var fields http1.Fields
	end, ok, err := cutFields(raw[:n], resp, &fields, lim)
	if !ok && n < len(lines) {
		if end, ok, err = cutFields(lines, resp, &fields, lim); ok && err == nil {
			raw = append(resp.raw[:0], lines[:end]...)
			end, ok, err = cutFields(raw, resp, &fields, lim)
		}
	}
	if !ok || err != nil {
		return f, ok, err
	}
	resp.raw = raw[:end]
	br.Discard(nl + 1 + end)
	f, err = headFraming(&fields, resp, head, lim)
	return f, true, err
}

// cutFields parses the field lines at the start of b, up to the empty line ending them,
// into resp.Header (pointing into b) and fields; end is the offset just past the empty
// line. ok is false, with resp.Header empty, when a line is not a whole, well-formed field
// line (parseBufferedHead's caller reads the head line by line then).
func cutFields(b []byte, resp *Response, fields *http1.Fields, lim headLimits) (end int, ok bool, err error) {
	resp.Header = resp.Header[:0]
	fields.Reset()
	i := 0
	for {
		// The empty line is told apart before CutField looks for a name in it.
		if i < len(b) && b[i] == '\r' {
			if i+1 < len(b) && b[i+1] == '\n' {
				return i + 2, true, nil // the head's end
			}
			break
		}
		nameEnd, valueStart, valueEnd, next, k, ok := http1.CutField(b[i:])
		if !ok {
			break
		}
		if len(resp.Header) == lim.fields {
			return 0, true, tooManyFields(lim)
		}
		// Each slice's capacity ends with it, so that appending to it writes nothing else.
		line := b[i:]
		name, value := line[:nameEnd:nameEnd], line[valueStart:valueEnd:valueEnd]
		if k <= http1.KnownTransferEncoding && k != http1.Unknown {
			if err = knownFraming(fields, k, value, resp.ProtoMinor); err != nil {
				return 0, true, protocolError("header line %q: %w", line[:next-2], err)
			}
		}
		// Set in place: append built the field on the stack and copied it in.
		n := len(resp.Header)
		if n < cap(resp.Header) {
			resp.Header = resp.Header[:n+1]
		} else {
			resp.Header = append(resp.Header, RawField{})
		}
		f := &resp.Header[n]
		f.Name, f.Value, f.Known = name, value, k
		i += next
	}
	resp.Header = resp.Header[:0]
	return 0, false, nil
}

// readHeadLines reads a head line by line, each line as the reader gives it, gathering those
// that span its buffer.
func readHeadLines(br *bufio.Reader, resp *Response, head bool, lim headLimits) (http1.Framing, error) {
	// The status line is parsed in place, then dropped from the storage.
	line, used, err := readLine(br, resp.raw[:0], lim.bytes)
	if err != nil {
		return http1.Framing{}, err
	}
	budget := lim.bytes - used
	if resp.StatusCode, resp.ProtoMinor, err = http1.ParseStatusLine(line); err != nil {
		return http1.Framing{}, protocolError("status line %q: %w", line, err)
	}
	resp.raw = resp.raw[:0]
	var fields http1.Fields
	fields.Reset()
	for {
		// A line the reader holds whole is split where it lies, and only its name and
		// value are copied (addField); others are gathered past len(resp.raw) first.
		s, err := br.ReadSlice('\n')
		var line []byte
		if err == nil && len(s) <= budget {
			line = trimLineEnd(s)
			budget -= len(s)
		} else {
			mark := len(resp.raw)
			var n int
			if resp.raw, n, err = finishLine(br, resp.raw, s, err, budget); err != nil {
				return http1.Framing{}, err
			}
			budget -= n
			line = resp.raw[mark:]
			resp.raw = resp.raw[:mark]
		}
		if len(line) == 0 {
			break
		}
		if len(resp.lens) == lim.fields {
			return http1.Framing{}, tooManyFields(lim)
		}
		name, value, err := http1.SplitField(line)
		if err == nil {
			err = framingField(&fields, name, value, resp.ProtoMinor)
		}
		if err != nil {
			return http1.Framing{}, protocolError("header line %q: %w", line, err)
		}
		// name and value are in the reader's buffer, which is not read again before this, or
		// alias the bytes just past len(resp.raw), which addField copies forward over
		// themselves (append handles it as a memmove).
		resp.addField(name, value)
	}
	resp.finishHeader()
	return headFraming(&fields, resp, head, lim)
}

func tooManyFields(lim headLimits) error {
	return protocolError("more than %d headers (max_headers_count)", lim.fields)
}

// headFraming returns the framing of the head whose framing fields are fields, setting
// resp.ContentLength.
func headFraming(fields *http1.Fields, resp *Response, head bool, lim headLimits) (http1.Framing, error) {
	if fields.ChunkedWithLength() && !lim.chunkedLength {
		// Envoy refuses a message with both unless allow_chunked_length (RFC 9112 §6.3 calls
		// it a possible response-splitting attempt).
		return http1.Framing{}, protocolError("both Transfer-Encoding and Content-Length")
	}
	f := fields.Response(resp.StatusCode, resp.ProtoMinor, head)
	if f.Mode == http1.Length || f.Mode == http1.None {
		resp.ContentLength = fields.Length()
	}
	return f, nil
}

// framingField hands the fields that frame a response to fields. It is inlined: a name of
// any other length than the framing names' returns without a call. readHeadLines finds the
// framing names with it, by their spelling; cutFields with the Known CutField finds for every
// field (knownFraming), and FuzzBufferedHeadMatchesLines holds the two to the same framing.
func framingField(fields *http1.Fields, name, value []byte, minor int) error {
	const lengths = 1<<len("content-length") | 1<<len("transfer-encoding") | 1<<len("connection")
	if uint64(1)<<uint(len(name))&lengths == 0 {
		return nil
	}
	return framingName(fields, name, value, minor)
}

// framingName is framingField for a name of a framing name's length.
func framingName(fields *http1.Fields, name, value []byte, minor int) error {
	// The length picks the one name to compare; the canonical spelling, which most
	// upstreams send, is one comparison (byte by byte, about 70 instructions).
	switch len(name) {
	case len("content-length"):
		if string(name) == "Content-Length" || http1.EqualFold(name, "content-length") {
			return fields.ContentLengthBytes(value)
		}
	case len("transfer-encoding"):
		if string(name) == "Transfer-Encoding" || http1.EqualFold(name, "transfer-encoding") {
			fields.TransferEncodingBytes(value)
		}
	case len("connection"):
		// keep-alive alone changes nothing in HTTP/1.1 (it persists unless closed), and
		// reading the list was about 250 instructions of a response.
		if (string(name) == "Connection" || http1.EqualFold(name, "connection")) &&
			!(minor >= 1 && string(value) == "keep-alive") {
			fields.ConnectionBytes(value)
		}
	}
	return nil
}

// knownFraming is framingName for a field whose name is one of the framing names, k
// (cutFields has http1.CutField find it for every field).
func knownFraming(fields *http1.Fields, k http1.Known, value []byte, minor int) error {
	switch k {
	case http1.KnownContentLength:
		return fields.ContentLengthBytes(value)
	case http1.KnownTransferEncoding:
		fields.TransferEncodingBytes(value)
	case http1.KnownConnection:
		// As in framingName.
		if !(minor >= 1 && string(value) == "keep-alive") {
			fields.ConnectionBytes(value)
		}
	}
	return nil
}

// readLine reads one line, CRLF or LF terminated, appending it (without the line end) to
// dst. Lines longer than the reader's buffer are accumulated up to limit bytes.
func readLine(br *bufio.Reader, dst []byte, limit int) ([]byte, int, error) {
	s, err := br.ReadSlice('\n')
	return finishLine(br, dst, s, err, limit)
}

// finishLine is readLine once the reader gave s and err for the line's first part.
func finishLine(br *bufio.Reader, dst, s []byte, err error, limit int) ([]byte, int, error) {
	start := len(dst)
	for {
		if len(dst)-start+len(s) > limit {
			return dst, 0, protocolError("response head over the limit of max_response_headers_kb")
		}
		dst = append(dst, s...)
		if err == nil {
			break
		}
		if err != bufio.ErrBufferFull {
			return dst, 0, err
		}
		s, err = br.ReadSlice('\n')
	}
	n := len(dst) - start
	line := trimLineEnd(dst[start:])
	return dst[:start+len(line)], n, nil
}

// trimLineEnd drops a line's LF or CRLF.
func trimLineEnd(line []byte) []byte {
	line = line[:len(line)-1]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line
}

// body reads one response body from a connection's bufio.Reader, with the framing of
// http1.Body. It is embedded in the connection and reset for each response, so reading a
// body allocates nothing.
type body struct {
	src       http1.BufioSource
	fr        http1.Body
	done      bool
	err       error
	readBytes int64
	resp      *Response // receives the chunked trailer section (with enable_trailers); may be nil
	trailer   func([]byte)
	fields    int // trailer fields kept
}

func (b *body) reset(br *bufio.Reader, f http1.Framing, resp *Response) {
	b.src.R, b.err, b.readBytes, b.resp, b.fields = br, nil, 0, resp, 0
	b.fr.Reset(f)
	b.done = b.fr.Done()
	if b.trailer == nil {
		b.trailer = b.addTrailer // made once per connection
	}
}

// complete reports whether the body was read to its end without error.
func (b *body) complete() bool { return b.done && b.err == nil }

// ready reports whether the body can be read without waiting for the upstream: it has
// ended, or bytes of it are buffered (the next chunk's size line may be all there is).
func (b *body) ready() bool {
	switch {
	case b.done || b.err != nil:
		return true
	case b.fr.Framed():
		return false
	}
	return b.src.R.Buffered() > 0
}

// peek returns buffered body bytes (at least one unless at the end or on error) without
// consuming them.
func (b *body) peek() ([]byte, error) {
	if b.err != nil {
		return nil, b.err
	}
	if b.done {
		return nil, io.EOF
	}
	left, err := b.fr.Ready(&b.src, b.trailer)
	switch {
	case err == io.EOF:
		b.finish()
		return nil, io.EOF
	case errors.Is(err, http1.ErrBadChunk):
		b.err = protocolError("%w", err)
		return nil, b.err
	case err != nil:
		b.err = err
		return nil, err
	}
	br := b.src.R
	if br.Buffered() == 0 {
		if _, err := br.Peek(1); err != nil {
			if err == io.EOF && b.fr.Closed() {
				b.finish()
				return nil, io.EOF
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			b.err = err
			return nil, err
		}
	}
	s, _ := br.Peek(int(min(int64(br.Buffered()), left)))
	return s, nil
}

// advance consumes n bytes returned by peek.
func (b *body) advance(n int) {
	b.src.R.Discard(n)
	b.readBytes += int64(n)
	b.fr.Consumed(n)
	if b.fr.Done() {
		b.finish()
	}
}

// finish marks the body read to its end: the trailer section, if any, is complete.
func (b *body) finish() {
	if b.done {
		return
	}
	b.done = true
	if b.resp != nil && b.fr.Mode() == http1.Chunked {
		b.resp.finishTrailer()
	}
}

// addTrailer keeps one trailer line for the response. Lines that are not well-formed fields,
// fields past maxHeaders and the fields that frame a message are dropped (RFC 9110 §6.5.1:
// a recipient may discard trailer fields it cannot use).
func (b *body) addTrailer(line []byte) {
	if b.resp == nil || b.fields >= maxHeaders {
		return
	}
	name, value, err := http1.SplitField(line)
	if err != nil {
		return
	}
	for _, framing := range [...]string{"content-length", "transfer-encoding", "host", "trailer"} {
		if http1.EqualFold(name, framing) {
			return
		}
	}
	b.fields++
	b.resp.addTrailer(name, value)
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
