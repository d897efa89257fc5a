package pool

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// errAnswered stops an HTTP/1.1 request body whose response arrived first.
var errAnswered = errors.New("upstream answered before the request body was sent")

// requestBody reads a Request's body for an upstream connection. A failure reading it is the
// client's and says so (ErrRequestBody), as does a body shorter than its content-length.
// What it reads can be kept for a retry, and a retry's copy is sent before the rest.
type requestBody struct {
	r      io.Reader
	length int64 // the announced length; -1 when unknown (chunked)
	read   int64
	replay []byte  // sent first: what an earlier attempt read
	keep   *[]byte // when not nil, what is read is kept here, up to limit bytes
	limit  int
	stop   *atomic.Bool // when set, reading stops with errAnswered; may be nil
	// overflow: the body outgrew limit, so it cannot be replayed.
	overflow bool
}

func (b *requestBody) Read(p []byte) (int, error) {
	if b.stop != nil && b.stop.Load() {
		return 0, errAnswered
	}
	if len(b.replay) > 0 {
		n := copy(p, b.replay)
		b.replay = b.replay[n:]
		b.read += int64(n)
		return n, nil
	}
	n, err := b.r.Read(p)
	b.read += int64(n)
	if b.keep != nil && n > 0 {
		if len(*b.keep)+n > b.limit {
			b.keep, b.overflow = nil, true
		} else {
			*b.keep = append(*b.keep, p[:n]...)
		}
	}
	switch {
	case err == io.EOF && b.length >= 0 && b.read < b.length:
		return n, fmt.Errorf("%w: %d bytes short of content-length %d", ErrRequestBody, b.length-b.read, b.length)
	case err != nil && err != io.EOF:
		return n, fmt.Errorf("%w: %w", ErrRequestBody, err)
	}
	return n, err
}

// keptBuffers holds the buffers that keep request bodies for a retry.
var keptBuffers = sync.Pool{New: func() any { return new([]byte) }}

// putKept returns a buffer from keptBuffers; nil is ignored.
func putKept(b *[]byte) {
	if b != nil {
		*b = (*b)[:0]
		keptBuffers.Put(b)
	}
}
