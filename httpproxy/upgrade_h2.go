package httpproxy

import (
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/net/http2"

	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/pool"
)

// errNotH2 is a TLS upstream connection of an HTTP/2 cluster that did not negotiate h2.
var errNotH2 = errors.New("upstream did not negotiate h2 for the upgrade")

// upgradeOverH2 forwards an accepted upgrade to a cluster that speaks HTTP/2, as Envoy does:
// a WebSocket (or other Upgrade) becomes an extended CONNECT (RFC 8441, :protocol set to the
// upgrade type), a CONNECT stays a CONNECT, on an HTTP/2 connection of its own over up. A 2xx
// opens the tunnel (101 to an HTTP/1.1 client that asked for an Upgrade); the upstream must
// offer SETTINGS_ENABLE_CONNECT_PROTOCOL for an extended CONNECT, else the attempt fails.
func (s *stream) upgradeOverH2(up *pool.TCPConn, m *route.Match, cs *cluster.Stats, deadline time.Time) {
	if tc, ok := up.Conn.(*tls.Conn); ok && tc.ConnectionState().NegotiatedProtocol != "h2" {
		s.failReply(failProtocol, errNotH2, m)
		return
	}
	up.SetDeadline(deadline) // the route's timeout bounds the wait for the answer
	cc, err := (&http2.Transport{}).NewClientConn(up)
	if err != nil {
		s.failReply(failProtocol, err, m)
		return
	}
	defer cc.Close()
	pr, pw := io.Pipe()
	defer pr.Close()
	req, err := s.extendedConnect(m, pr)
	if err != nil {
		s.details = "upgrade_failed{invalid_target}"
		s.localReply(http.StatusBadRequest, nil, nil)
		return
	}
	upStart := s.h.sh.deps.Now()
	resp, err := cc.RoundTrip(req)
	if err == nil {
		defer resp.Body.Close()
	}
	if !s.takeAnswer(resp, err, true, up, m, cs, upStart) {
		return
	}
	s.answerTunnel(s.switchStatus(nil), m)
	s.splice(tunnelEnd{
		r: resp.Body, w: pw,
		closeWrite: func() { pw.Close() }, // END_STREAM upstream
		abort: func() {
			pw.CloseWithError(io.ErrClosedPipe)
			cc.Close()
			up.Close()
		},
	}, m)
}

// extendedConnect builds the HTTP/2 request of an upgrade: the route's rewrites and header
// mutations apply, the Upgrade type goes in :protocol, and body streams the client's bytes.
func (s *stream) extendedConnect(m *route.Match, body io.ReadCloser) (*http.Request, error) {
	hd := s.upstreamRequest(m).header()
	path, authority := s.outPath, s.outAuthority
	s.fillEntryBasics()
	m.FinalizeRequestHeaders(hd, &s.entry)
	h := make(http.Header, len(hd)+1)
	for k, vs := range hd {
		if k != hdrHost && k != hdrContentLength {
			h[k] = vs
		}
	}
	u := &url.URL{}
	if s.upgrade != upgradeConnect {
		var err error
		if u, err = url.ParseRequestURI(path); err != nil {
			return nil, err
		}
		h[":protocol"] = []string{s.upgrade}
	}
	u.Scheme, u.Host = s.req.Scheme, authority
	return &http.Request{Method: http.MethodConnect, URL: u, Host: authority, Header: h, Body: body, ContentLength: -1, Proto: "HTTP/2.0", ProtoMajor: 2}, nil
}
