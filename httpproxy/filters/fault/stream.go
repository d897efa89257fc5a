package fault

import (
	"net/http"
	"time"
)

// stream is a faulted request's part of the filter: it holds the request's plan, paces its
// response body under a response rate limit, and ends the fault with the stream.
type stream struct {
	f    *Filter
	plan plan
	kbps uint64

	start time.Time // when the first response bytes came
	sent  uint64    // response body bytes so far
}

func (s *stream) RequestBody([]byte)               {}
func (s *stream) RequestTrailers(http.Header)      {}
func (s *stream) ResponseHeaders(int, http.Header) {}
func (s *stream) ResponseTrailers(http.Header)     {}

// ResponseBody holds each chunk back until the rate limit lets it go: the body as a whole
// takes its size over kbps KiB/s.
func (s *stream) ResponseBody(p []byte) {
	if s.kbps == 0 {
		return
	}
	now := s.f.ctx.Clock()()
	if s.start.IsZero() {
		s.start = now
	}
	s.sent += uint64(len(p))
	due := s.start.Add(time.Duration(float64(s.sent) / float64(s.kbps*1024) * float64(time.Second)))
	if wait := due.Sub(now); wait > 0 {
		s.f.sleep(wait)
	}
}

// End ends the fault.
func (s *stream) End() { s.f.stats.ActiveFaults.Dec() }
