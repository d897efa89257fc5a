package httpproxy

import (
	"bytes"
	"io"
	"net/http"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/pool"
)

// bodyStage is what one filter.BodyRewriter reads: the body before it and, at its end, the
// trailers (filter.Body).
type bodyStage struct {
	r        io.Reader
	trailers func() http.Header
	eof      bool
}

func (b *bodyStage) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *bodyStage) Trailers() http.Header {
	if !b.eof {
		return nil
	}
	return b.trailers()
}

// chainRewriters reads src through rws, in order, and keeps the rewriters' closers for
// closeRewriters. trailers gives the body's trailers once src has ended.
func (s *stream) chainRewriters(src io.Reader, rws []filter.BodyRewriter, trailers func() http.Header) io.Reader {
	for _, rw := range rws {
		src = rw(&bodyStage{r: src, trailers: trailers})
		if c, ok := src.(io.Closer); ok {
			s.rwClosers = append(s.rwClosers, c)
		}
	}
	return src
}

// closeRewriters closes the rewriters' readers once nothing reads them any more (the
// upstream exchanges are over and their leases revoked).
func (s *stream) closeRewriters() {
	for i, c := range s.rwClosers {
		c.Close()
		s.rwClosers[i] = nil
	}
	s.rwClosers = s.rwClosers[:0]
}

// rewriteRequest puts the request body the filters asked to rewrite
// (filter.Exchange.RewriteRequestBody) through their rewriters. The body streams without its
// length; one already read whole (a buffering filter, BufferBody) is rewritten whole and keeps
// one. The filters' streams see the rewritten body.
func (s *stream) rewriteRequest(rws []filter.BodyRewriter) {
	delete(s.changeHeader(), hdrContentLength)
	if s.bodyBuffered {
		s.rewriteBuffered(rws)
		return
	}
	s.contentLength = -1
	if s.body == &s.reqObserved { // the filters' streams observe what the rewriters make
		s.reqObserved.r = s.chainRewriters(s.reqObserved.r, rws, s.requestTrailers)
		return
	}
	s.body = s.chainRewriters(s.body, rws, s.requestTrailers)
}

// rewriteBuffered rewrites a request body held whole in bodyBuf into a new buffer, which
// becomes the body (replayed to each attempt). A rewriter's failure fails the body as a
// streamed one would, when the router reads it.
func (s *stream) rewriteBuffered(rws []filter.BodyRewriter) {
	out, err := io.ReadAll(s.chainRewriters(bytes.NewReader(s.bodyBuf), rws, s.requestTrailers))
	if err != nil {
		s.bodyBuffered = false
		s.body, s.contentLength = failedBody{err}, -1
		return
	}
	s.bodyBuf = out
	s.contentLength = int64(len(out))
}

// failedBody is a body whose read fails.
type failedBody struct{ err error }

func (b failedBody) Read([]byte) (int, error) { return 0, b.err }

// requestTrailers is the request's trailer map, which the upstream request carries: HTTP/2's
// (nil when the client declared none), the HTTP/1 chunked trailer section's otherwise.
func (s *stream) requestTrailers() http.Header {
	if s.h2req != nil {
		return s.h2req.Trailer
	}
	return s.trailers
}

// mayRewriteResponse reports whether a response with this status may be rewritten: it can
// carry a body, and is not a tunnel.
func (s *stream) mayRewriteResponse(status int) bool {
	return !s.head && status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified &&
		!s.tunnel && s.upgrade == ""
}

// rewriteResponse reads body, the response's (up the upstream's, nil for a local reply),
// through the rewriters the filters asked for, the last filter's first. The response's
// trailers are collected into respTrailers at the body's end, for the rewriters to change
// and emitTrailers to send.
func (s *stream) rewriteResponse(body io.Reader, up *pool.Response, observe bool) io.Reader {
	rws := s.respRW
	// The rewriters apply from the router's side out: the reverse of the filters' order.
	rev := make([]filter.BodyRewriter, len(rws))
	for i, rw := range rws {
		rev[len(rws)-1-i] = rw
	}
	collected := false
	trailers := func() http.Header {
		if !collected {
			collected = true
			var fields []pool.RawField
			if up != nil {
				fields = up.Trailer // complete once the body has ended
			}
			s.collectTrailers(fields)
		}
		return s.respTrailers
	}
	out := s.chainRewriters(body, rev, trailers)
	if observe && len(s.fstreams) > 0 { // the filters' streams see the response as it is sent
		out = &observedBody{r: out, s: s, response: true}
	}
	return out
}

// writeRewritten sends a local reply's body through the response's rewriters, then the
// trailers they leave.
func (s *stream) writeRewritten(body []byte) {
	r := s.rewriteResponse(bytes.NewReader(body), nil, true)
	var buf [4096]byte
	for {
		n, err := r.Read(buf[:])
		if n > 0 {
			var werr error
			if s.h2w != nil {
				_, werr = s.h2w.Write(buf[:n])
			} else {
				_, werr = s.hw.Write(buf[:n])
			}
			s.bytesOut += int64(n)
			if werr != nil {
				err = werr
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			s.closeConn, s.aborted = true, true
			return
		}
	}
	s.emitTrailers()
}

// holdResponse reads the response body (headBody) through the rewriters whole before the head
// is sent (filter.Exchange.HoldResponseHeaders), so that they may still change its headers;
// it returns the rewritten body's length. The body is then written from heldBody; a failed
// read is kept in heldErr for the caller to reset the response once its head is out.
func (s *stream) holdResponse() int64 {
	r := s.rewriteResponse(s.headBody, s.headUp, false)
	buf := bytes.NewBuffer(s.heldBody[:0])
	_, s.heldErr = buf.ReadFrom(r)
	s.heldBody, s.held, s.respRW = buf.Bytes(), true, nil
	return int64(len(s.heldBody))
}

// heldSource is the upstream body as a held head reads it (holdResponse): observed for its
// upstream errors, empty when the response has none.
func (s *stream) heldSource(resp *pool.Response) io.Reader {
	body := resp.Body
	if body == nil {
		body = http.NoBody
	}
	s.respObserved = observedBody{r: body, s: s, response: true, quiet: true}
	return &s.respObserved
}
