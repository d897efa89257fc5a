package hystrix

import (
	"context"
	"io"
)

// client is one connected dashboard. Flush offers it each flush's frame
// block; Stream drains them.
type client struct {
	frames chan []byte // blocks are shared between clients and never modified
}

// Stream registers a dashboard client and writes every later flush's frames
// to w, calling flush (if not nil) after each block so the bytes leave at
// once. It returns nil when ctx is done or the sink is closed, and the write
// error if w fails; either way the client is unregistered before Stream
// returns. When the last client leaves, the rolling windows are cleared, as
// Envoy does: a new dashboard starts from zeros.
//
// Stream runs on the caller's goroutine and starts none.
func (s *Sink) Stream(ctx context.Context, w io.Writer, flush func() error) error {
	c := &client{frames: make(chan []byte, ClientBuffer)}
	if !s.register(c) {
		return ErrClosed
	}
	defer s.unregister(c)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.done:
			return nil
		case b := <-c.frames:
			if _, err := w.Write(b); err != nil {
				return err
			}
			if flush != nil {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
}

func (s *Sink) register(c *client) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.clients[c] = struct{}{}
	return true
}

func (s *Sink) unregister(c *client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.clients, c)
	if len(s.clients) == 0 {
		clear(s.windows)
	}
}

// Clients is the number of connected dashboard clients.
func (s *Sink) Clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.clients)
}

// Close ends every Stream and makes later ones return ErrClosed at once; the
// server calls it when it shuts the admin down so no stream outlives it.
// Calling it more than once is harmless.
func (s *Sink) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
}
