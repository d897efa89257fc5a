package httpproxy

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/pool"
)

// Envoy's replies to a request body the client could not deliver.
const (
	bodyBadRequest           = "Bad Request" // Envoy's codec errors answer the status text
	bodyStreamTimeout        = "stream timeout"
	detailsHTTP1CodecError   = "http1.codec_error"
	detailsHTTP2Messaging    = "http2.violation.of.messaging.rule"
	detailsStreamIdleTimeout = "stream_idle_timeout"
	detailsHTTP2RemoteReset  = "http2.remote_reset"
)

// bodyFaultKind is why the downstream request body could not be read.
type bodyFaultKind uint8

const (
	faultNone      bodyFaultKind = iota
	faultMalformed               // the body broke its framing (a bad chunk, a length mismatch)
	faultGone                    // the client closed or reset its connection or stream
	faultTimeout                 // stream_idle_timeout or request_timeout passed while waiting for it
)

// bodyFault tells whether err, an upstream attempt's failure, comes from the downstream: its
// request body could not be read, or (HTTP/2) the client reset the stream or left, which
// ends the upstream exchange whatever it was doing. The pool wraps body failures with
// pool.ErrRequestBody; an HTTP/1 body also keeps its own error, which settles it whatever
// the pool made of it.
func (s *stream) bodyFault(err error) bodyFaultKind {
	switch {
	case s.idle.fired.Load():
		// Before the HTTP/2 stream's context: the timer's own reset of a stalled write
		// (streamIdle.expire) cancels it too.
		return faultTimeout
	case s.h2req != nil && s.h2req.Context().Err() != nil:
		return faultGone
	case s.sc != nil && s.hbody.err != nil && !s.bodyWoken && !s.bodyStopped.Load():
		err = s.hbody.err
	case !errors.Is(err, pool.ErrRequestBody):
		return faultNone
	}
	var ne net.Error
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return faultTimeout
	case s.sc != nil && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || errors.As(err, &ne)):
		return faultGone // the socket ended or failed mid-body
	}
	return faultMalformed
}

// requestBodyFailed handles an upstream attempt, or a streaming response, ended by the
// downstream (bodyFault), as Envoy's connection manager does. Nothing is charged to the
// upstream host. A malformed body is a downstream protocol error: 400 (DPE) and the
// connection closes. A client that went away is not answered (clientLeft). A body that stopped
// arriving gets request_timeout's 408, or stream_idle_timeout's (SI); a complete request whose
// response stopped coming gets stream_idle_timeout's 504 (SI). Once the response has
// started, only the flags and details are set: the caller resets the response.
func (s *stream) requestBodyFailed(err error) {
	st := s.h.stats
	switch s.bodyFault(err) {
	case faultGone:
		s.clientLeft()
	case faultTimeout:
		if s.rqBody.fired {
			s.localReply(http.StatusRequestTimeout, nil, nil) // request_timeout's reply
			return
		}
		st.DownstreamRqIdleTimeout.Inc()
		s.flags |= accesslog.StreamIdleTimeout
		s.details = detailsStreamIdleTimeout
		if s.idle.reqDone.Load() {
			// Envoy answers a complete request whose response did not come in time with
			// 504; the connection stays usable.
			s.localReply(http.StatusGatewayTimeout, []byte(bodyStreamTimeout), nil)
			return
		}
		s.closeConn = true
		s.localReply(http.StatusRequestTimeout, []byte(bodyStreamTimeout), nil)
	default:
		s.flags |= accesslog.DownstreamProtocolError
		s.details = detailsHTTP2Messaging
		if s.sc != nil {
			s.details = detailsHTTP1CodecError
			st.DownstreamCxProtocolError.Inc()
		}
		s.closeConn = true // the rest of the body cannot be framed
		s.localReply(http.StatusBadRequest, []byte(bodyBadRequest), nil)
	}
}

// clientLeft marks a stream whose client went away: it is not answered. An HTTP/2 client that
// reset its stream, rather than closing its connection, is flagged DR as Envoy flags a
// downstream remote reset; the connection counts the stream (h2conn.streamCut).
func (s *stream) clientLeft() {
	c, ok := s.drain.(*h2conn)
	if !ok || c.peerGone.Load() {
		s.downstreamGone()
		return
	}
	s.gone = true
	s.flags |= accesslog.DownstreamRemoteReset
	s.details = detailsHTTP2RemoteReset
}
