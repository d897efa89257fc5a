package http1

import (
	"errors"
	"io"
	"math"
	"strconv"
)

// ErrBadChunk is wrapped by errors about malformed chunked framing.
var ErrBadChunk = errors.New("malformed chunked body")

// Limits of chunked framing: a chunk-size line with its extensions, and the whole trailer
// section (Envoy's default max_headers_kb is 60).
const (
	MaxChunkLine    = 4096
	MaxTrailerBytes = 60 << 10
)

// Source is the buffered connection a body is read from: the downstream codec's reader, or
// a bufio.Reader upstream (see BufioSource). Bytes that Buffered returned stay valid until
// the next Fill.
type Source interface {
	// Buffered returns the bytes read and not yet consumed.
	Buffered() []byte
	// Discard consumes the first n buffered bytes.
	Discard(n int)
	// Fill reads at least one more byte into the buffer, or fails (io.EOF when the peer
	// closed, another error when the buffer cannot take more).
	Fill() error
}

// Body tracks one message body as it is read: how many bytes may be read next, and the
// chunked framing between them. The caller moves the bytes (from the Source's buffer, or
// straight from its connection), so the decoder copies nothing. Its zero value is a body
// with no bytes; it belongs to the goroutine reading the body.
type Body struct {
	mode Mode
	left int64 // bytes left in the body (Length) or in the current chunk (Chunked)
	crlf bool  // the CRLF after a chunk's data is still to be read
	done bool
}

// Reset prepares b for a body with the given framing.
func (b *Body) Reset(f Framing) {
	*b = Body{mode: f.Mode}
	switch f.Mode {
	case None:
		b.done = true
	case Length:
		b.left = f.Length
		b.done = f.Length <= 0
	}
}

// Done reports whether the body was read to its end.
func (b *Body) Done() bool { return b.done }

// Framed reports whether chunked framing must be read before the next body byte.
func (b *Body) Framed() bool { return b.mode == Chunked && !b.done && b.left == 0 }

// Mode returns the body's framing mode.
func (b *Body) Mode() Mode { return b.mode }

// Ready reads chunked framing from src until body bytes are next, and returns how many may
// be read before the framing must be consulted again (math.MaxInt64 for a body read until
// close). At the end of the body it returns io.EOF; on the last chunk it hands each trailer
// line (without its CRLF, valid only during the call) to trailer, which may be nil. Errors:
// ErrBadChunk, io.ErrUnexpectedEOF, or the Source's.
func (b *Body) Ready(src Source, trailer func(line []byte)) (int64, error) {
	switch {
	case b.done:
		return 0, io.EOF
	case b.mode == UntilClose:
		return math.MaxInt64, nil
	case b.left > 0:
		return b.left, nil
	case b.mode != Chunked:
		return 0, io.EOF
	}
	if err := b.nextChunk(src, trailer); err != nil {
		return 0, err
	}
	if b.done {
		return 0, io.EOF
	}
	return b.left, nil
}

// Consumed records that n of the bytes Ready allowed were read.
func (b *Body) Consumed(n int) {
	if b.mode == UntilClose || n == 0 {
		return
	}
	b.left -= int64(n)
	if b.left > 0 {
		return
	}
	if b.mode == Chunked {
		b.crlf = true
	} else {
		b.done = true
	}
}

// Closed records that the connection ended: the end of a body read until close. It reports
// whether that is a clean end.
func (b *Body) Closed() bool {
	if b.mode == UntilClose {
		b.done = true
	}
	return b.done
}

// nextChunk reads the CRLF ending the previous chunk's data and the next chunk-size line; at
// the last chunk it reads the trailer section and marks the body done.
func (b *Body) nextChunk(src Source, trailer func([]byte)) error {
	if b.crlf {
		l, err := readLine(src, 2)
		if err != nil {
			return err
		}
		if len(l) != 0 {
			return ErrBadChunk
		}
		b.crlf = false
	}
	l, err := readLine(src, MaxChunkLine)
	if err != nil {
		return err
	}
	size, ok := ParseChunkSize(l)
	if !ok {
		return ErrBadChunk
	}
	if size > 0 {
		b.left = size
		return nil
	}
	for budget := MaxTrailerBytes; ; {
		l, err := readLine(src, budget)
		if err != nil {
			return err
		}
		if len(l) == 0 {
			b.done = true
			return nil
		}
		budget = max(budget-len(l)-2, 0)
		if trailer != nil {
			trailer(l)
		}
	}
}

// readLine consumes the next CRLF-terminated line from src and returns it without the CRLF.
// A line longer than limit, or a bare CR or LF, is ErrBadChunk.
func readLine(src Source, limit int) ([]byte, error) {
	scanned := 0
	for {
		buf := src.Buffered()
		for i := scanned; i < len(buf); i++ {
			switch c := buf[i]; {
			case c == '\n':
				if i == 0 || buf[i-1] != '\r' || i-1 > limit {
					return nil, ErrBadChunk
				}
				src.Discard(i + 1)
				return buf[: i-1 : i-1], nil
			case c == '\r' && i+1 < len(buf) && buf[i+1] != '\n':
				return nil, ErrBadChunk
			}
		}
		scanned = max(len(buf)-1, 0) // a CR at the end is looked at again with its LF
		if len(buf) > limit+1 {
			return nil, ErrBadChunk
		}
		if err := src.Fill(); err != nil {
			if err == io.EOF {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

// ParseChunkSize reads the hexadecimal size that starts a chunk-size line; what follows it
// must be whitespace or chunk extensions (";..."), which are ignored. Sizes up to 15 hex
// digits are accepted, so a size always fits an int64.
func ParseChunkSize(line []byte) (int64, bool) {
	var n int64
	i := 0
	for ; i < len(line); i++ {
		c := line[i]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return n, i > 0 && extensions(line[i:])
		}
		if i == 15 {
			return 0, false
		}
		n = n<<4 | int64(d)
	}
	return n, i > 0
}

// extensions reports whether rest, after a chunk size, is optional whitespace and then
// nothing or chunk extensions without control characters.
func extensions(rest []byte) bool {
	rest = TrimOWS(rest)
	if len(rest) == 0 {
		return true
	}
	return rest[0] == ';' && ValidValue(rest)
}

// AppendChunkSize appends a chunk-size line for n data bytes (the chunk's data and a CRLF
// follow).
func AppendChunkSize(dst []byte, n int) []byte {
	dst = strconv.AppendUint(dst, uint64(n), 16)
	return append(dst, '\r', '\n')
}

// CRLF ends a chunk's data, a field line and a head.
const CRLF = "\r\n"

// LastChunk starts the end of a chunked body: the trailer section's field lines, each ending
// in CRLF, and a final CRLF follow.
const LastChunk = "0\r\n"

// AppendLastChunk appends the end of a chunked body with the given trailer field lines (each
// ending in CRLF, or none).
func AppendLastChunk(dst, trailer []byte) []byte {
	dst = append(dst, LastChunk...)
	dst = append(dst, trailer...)
	return append(dst, CRLF...)
}
