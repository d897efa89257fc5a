package http1

import (
	"bytes"
	"errors"
	"io"
	"net/textproto"
)

// pieceSource is a Source over a fixed input that arrives step bytes per Fill, so that
// lines and bodies span reads as they do on a socket.
type pieceSource struct {
	in   []byte
	buf  []byte
	step int
}

func (s *pieceSource) Buffered() []byte { return s.buf }
func (s *pieceSource) Discard(n int)    { s.buf = s.buf[n:] }
func (s *pieceSource) Fill() error {
	if len(s.in) == 0 {
		return io.EOF
	}
	n := min(s.step, len(s.in))
	// A fresh slice each time: bytes handed out by Buffered stay valid, as the contract asks.
	s.buf = append(append([]byte(nil), s.buf...), s.in[:n]...)
	s.in = s.in[n:]
	return nil
}

// rest is everything not consumed.
func (s *pieceSource) rest() []byte { return append(append([]byte(nil), s.buf...), s.in...) }

// message is one message as a peer reads it with this package: what the differential test
// compares with net/http.
type message struct {
	Method, Target, Host string // requests
	Status, Minor        int
	Header               map[string][]string // canonical names; framing fields left out
	Body                 string
	Close                bool
	Framing              Framing
	Trailer              []string
	Rest                 string // bytes after the message
}

// readBody reads a body with the given framing from src.
func readBody(src *pieceSource, f Framing, m *message) error {
	var b Body
	b.Reset(f)
	var body bytes.Buffer
	for {
		left, err := b.Ready(src, func(line []byte) { m.Trailer = append(m.Trailer, string(line)) })
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if len(src.Buffered()) == 0 {
			if err := src.Fill(); err == io.EOF && b.Closed() {
				break
			} else if err == io.EOF {
				return io.ErrUnexpectedEOF
			}
		}
		n := int(min(int64(len(src.Buffered())), left))
		body.Write(src.Buffered()[:n])
		src.Discard(n)
		b.Consumed(n)
	}
	m.Body = body.String()
	return nil
}

// readRequest reads one request from in as the downstream codec does: the head found with
// HeadEnd (after skipping empty lines), parsed with ParseRequestHead, then the body.
func readRequest(in []byte, step int) (message, error) {
	src := &pieceSource{in: in, step: step}
	var m message
	scanned := 0
	for {
		b := src.Buffered()
		if scanned == 0 {
			for len(b) > 0 && (b[0] == '\r' || b[0] == '\n') {
				src.Discard(1)
				b = src.Buffered()
			}
		}
		end, err := HeadEnd(b, scanned)
		if err != nil {
			return m, err
		}
		if end >= 0 {
			src.Discard(end)
			m.Header = map[string][]string{}
			rh, err := ParseRequestHead(string(b[:end-2]), 100, false, func(name, value string, _ Known) {
				k := textproto.CanonicalMIMEHeaderKey(name)
				m.Header[k] = append(m.Header[k], value)
			})
			if err != nil {
				return m, err
			}
			m.Method, m.Target, m.Host, m.Minor, m.Close, m.Framing = rh.Method, rh.Target, rh.Host, rh.Minor, rh.Close, rh.Framing
			break
		}
		scanned = len(b)
		if err := src.Fill(); err != nil {
			return m, err
		}
	}
	if err := readBody(src, m.Framing, &m); err != nil {
		return m, err
	}
	m.Rest = string(src.rest())
	return m, nil
}

var errNoLine = errors.New("no line")

// cutResponseLine cuts one line ending in LF or CRLF, as the upstream codec reads response
// heads.
func cutResponseLine(src *pieceSource) ([]byte, error) {
	for {
		b := src.Buffered()
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line := bytes.TrimSuffix(b[:i], []byte("\r"))
			src.Discard(i + 1)
			return line, nil
		}
		if err := src.Fill(); err != nil {
			return nil, errNoLine
		}
	}
}

// readResponse reads one response (interim ones included) from in as the upstream codec
// does: status line, field lines split with SplitField, framing from Fields.Response.
func readResponse(in []byte, step int, head bool) (message, error) {
	src := &pieceSource{in: in, step: step}
	m := message{Header: map[string][]string{}}
	line, err := cutResponseLine(src)
	if err != nil {
		return m, err
	}
	if m.Status, m.Minor, err = ParseStatusLine(line); err != nil {
		return m, err
	}
	var f Fields
	f.Reset()
	for n := 0; ; n++ {
		line, err := cutResponseLine(src)
		if err != nil {
			return m, err
		}
		if len(line) == 0 {
			break
		}
		if n == 100 {
			return m, ErrTooManyFields
		}
		name, value, err := SplitField(line)
		if err != nil {
			return m, err
		}
		switch {
		case EqualFold(name, "content-length"):
			if err := f.ContentLengthBytes(value); err != nil {
				return m, err
			}
		case EqualFold(name, "transfer-encoding"):
			f.TransferEncodingBytes(value)
		case EqualFold(name, "connection"):
			f.ConnectionBytes(value)
		}
		k := textproto.CanonicalMIMEHeaderKey(string(name))
		m.Header[k] = append(m.Header[k], string(value))
	}
	m.Framing = f.Response(m.Status, m.Minor, head)
	m.Close = m.Framing.Close
	if err := readBody(src, m.Framing, &m); err != nil {
		return m, err
	}
	m.Rest = string(src.rest())
	return m, nil
}
