package httpproxy

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legateproxy/legate/pool"
)

var errBodyRevoked = errors.New("request body no longer lent to the upstream exchange")

// bodyLease lends the request body to one HTTP/2 upstream exchange. x/net/http2's transport
// reads a request body on a goroutine of its own, which can still be in a Read, or start
// one, after the exchange has ended (an upstream that answered early, a reset). The body's
// readers live in the pooled stream (the HTTP/1 body reader, the retry buffer, the filters'
// and request_timeout's wrappers): a late Read would consume or corrupt the body of the
// next request the stream serves. So each exchange gets a lease of its own, which the stream
// revokes before it moves on; Read holds mu, so revoking waits out a Read in progress.
type bodyLease struct {
	mu    sync.Mutex
	r     io.Reader   // nil once revoked
	ended atomic.Bool // the body was read to its end (the stream may ask while it is lent)
}

func (l *bodyLease) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.r == nil {
		return 0, errBodyRevoked
	}
	n, err := l.r.Read(p)
	if err == io.EOF {
		l.ended.Store(true)
	}
	return n, err
}

// bodyEnded reports whether the HTTP/1 request body was read to its end, without touching
// the body reader while it is lent.
func (s *stream) bodyEnded() bool {
	if s.lease != nil {
		return s.lease.ended.Load()
	}
	return s.hbody.done
}

// lendBody hands s.up.Body to the attempt about to start through a lease when the exchange
// is HTTP/2. HTTP/1.1 exchanges read the body on the caller's goroutine, within RoundTrip.
func (s *stream) lendBody(mgr *pool.Manager) {
	if s.up.Body == nil || !mgr.MayUseHTTP2(&s.up) {
		return
	}
	s.lease = &bodyLease{r: s.up.Body}
	s.up.Body = s.lease
}

// revokeBody ends the current lease, if any. A Read in progress is waiting for the client's
// next body bytes: it is woken (the connection's read deadline passes, or the HTTP/2 request
// body is closed) and waited for; the body is then unusable (its error is the wake-up's, not
// the client's: bodyWoken), and the connection does not carry another request.
func (s *stream) revokeBody() {
	l := s.lease
	if l == nil {
		return
	}
	s.lease = nil
	if !l.mu.TryLock() {
		s.bodyWoken = true
		s.wakeBodyRead()
		l.mu.Lock()
		if s.sc != nil {
			s.sc.nc.SetReadDeadline(s.sc.deadline)
		}
	}
	l.r = nil
	l.mu.Unlock()
}

// wakeBodyRead makes a Read of the downstream request body that waits for the client return.
func (s *stream) wakeBodyRead() {
	switch {
	case s.sc != nil:
		s.sc.nc.SetReadDeadline(time.Unix(1, 0))
	case s.h2req != nil:
		s.h2req.Body.Close()
	}
}
