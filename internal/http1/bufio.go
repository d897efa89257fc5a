package http1

import (
	"bufio"
	"fmt"
)

// errLineTooLong is a line of chunked framing that does not fit in a BufioSource's buffer.
var errLineTooLong = fmt.Errorf("%w: line longer than the read buffer", ErrBadChunk)

// BufioSource reads a body from a bufio.Reader. A line of chunked framing (a chunk-size line,
// or one trailer field) must fit in the reader's buffer; a longer one is ErrBadChunk.
type BufioSource struct{ R *bufio.Reader }

// Buffered implements Source.
func (s *BufioSource) Buffered() []byte {
	b, _ := s.R.Peek(s.R.Buffered())
	return b
}

// Discard implements Source.
func (s *BufioSource) Discard(n int) { s.R.Discard(n) }

// Fill implements Source.
func (s *BufioSource) Fill() error {
	_, err := s.R.Peek(s.R.Buffered() + 1)
	if err == bufio.ErrBufferFull {
		return errLineTooLong
	}
	return err
}
