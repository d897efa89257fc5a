package health

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
)

// maxTCPBuffer bounds what a TCP check buffers while waiting for its receive payloads.
const maxTCPBuffer = 1 << 20

// tcpProber implements tcp_health_check. With no receive payloads a check only connects (and, as
// in Envoy, sends nothing). Otherwise it writes send and passes once every receive payload has
// arrived in order; the connection closing first is a network failure.
type tcpProber struct {
	target
	hc *config.TCPHealthCheck
}

func (p *tcpProber) Session(h *host.Host) ProbeSession {
	return &tcpSession{p: p, addr: p.address(h), tls: p.tlsConfig(h)}
}

type tcpSession struct {
	p    *tcpProber
	addr string
	tls  *tls.Config
	conn net.Conn // kept between checks when reuse_connection is set
}

func (s *tcpSession) connect(ctx context.Context) (net.Conn, error) {
	conn, err := s.p.dial(ctx, s.addr)
	if err != nil {
		return nil, err
	}
	if s.tls == nil {
		return conn, nil
	}
	tc := tls.Client(conn, s.tls)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}

func (s *tcpSession) Check(ctx context.Context) Result {
	if len(s.p.hc.Receive) == 0 {
		conn, err := s.connect(ctx)
		if err != nil {
			return failed(Network, err)
		}
		conn.Close()
		return Result{Outcome: Succeeded}
	}
	reused := s.conn != nil
	res, fresh := s.exchange(ctx)
	if res.Outcome == Failed && reused && !fresh && ctx.Err() == nil {
		// The kept connection had died between checks. Envoy would have seen the close event
		// and connected afresh for this check; do the same.
		res, _ = s.exchange(ctx)
	}
	return res
}

// exchange runs one send/receive round. fresh reports whether any byte arrived, which tells a
// stale reused connection from a host that answered and then failed.
func (s *tcpSession) exchange(ctx context.Context) (res Result, fresh bool) {
	if s.conn == nil {
		conn, err := s.connect(ctx)
		if err != nil {
			return failed(Network, err), false
		}
		s.conn = conn
	}
	conn := s.conn
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	fail := func(t FailureType, err error) (Result, bool) {
		s.dropConn()
		return failed(t, err), fresh
	}
	if len(s.p.hc.Send) > 0 {
		if _, err := conn.Write(s.p.hc.Send); err != nil {
			return fail(Network, err)
		}
	}
	var buf []byte
	chunk := make([]byte, 4096)
	for {
		n, err := conn.Read(chunk)
		if n > 0 {
			fresh = true
			buf = append(buf, chunk[:n]...)
			if matchPayloads(s.p.hc.Receive, buf) {
				if !s.p.spec.ReuseConnection {
					s.dropConn()
				}
				return Result{Outcome: Succeeded}, true
			}
			if len(buf) > maxTCPBuffer {
				return fail(Active, fmt.Errorf("%d bytes received without the receive payloads", len(buf)))
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				err = errors.Join(ctx.Err(), err)
			}
			return fail(Network, err)
		}
	}
}

func (s *tcpSession) dropConn() {
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
}

func (s *tcpSession) Close() { s.dropConn() }
