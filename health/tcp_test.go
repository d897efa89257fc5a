package health

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
)

// tcpServer accepts connections on 127.0.0.1 and hands each to serve; Close waits for them.
type tcpServer struct {
	l     net.Listener
	wg    sync.WaitGroup
	conns atomic.Int32
}

func startTCP(t testing.TB, serve func(c net.Conn)) *tcpServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &tcpServer{l: l}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				serve(c)
			}()
		}
	}()
	t.Cleanup(func() { l.Close(); s.wg.Wait() })
	return s
}

func (s *tcpServer) host(t testing.TB) *host.Host { return newHost(t, s.l.Addr().String(), 0) }

// pingPong answers every "PING" with "PO" and "NG" in two writes, until the peer closes.
func pingPong(c net.Conn) {
	buf := make([]byte, 4)
	for {
		if _, err := io.ReadFull(c, buf); err != nil || !bytes.Equal(buf, []byte("PING")) {
			return
		}
		c.Write([]byte("PO"))
		c.Write([]byte("NG"))
	}
}

func tcpSpec(send string, receive ...string) *config.HealthCheck {
	return spec(func(s *config.HealthCheck) {
		s.TCP = &config.TCPHealthCheck{}
		if send != "" {
			s.TCP.Send = []byte(send)
		}
		for _, r := range receive {
			s.TCP.Receive = append(s.TCP.Receive, []byte(r))
		}
	})
}

func TestTCPChecks(t *testing.T) {
	silent := func(c net.Conn) { io.Copy(io.Discard, c) }
	closer := func(c net.Conn) {}
	banner := func(c net.Conn) { c.Write([]byte("220 ready\r\n")); io.Copy(io.Discard, c) }
	for _, tc := range []struct {
		name    string
		serve   func(net.Conn)
		spec    *config.HealthCheck
		timeout time.Duration
		want    Outcome
		failure FailureType
	}{
		{"connect only", closer, tcpSpec(""), wait, Succeeded, 0},
		{"connect only ignores send", closer, tcpSpec("PING"), wait, Succeeded, 0},
		{"ping pong", pingPong, tcpSpec("PING", "PONG"), wait, Succeeded, 0},
		{"segments in order", pingPong, tcpSpec("PING", "PO", "NG"), wait, Succeeded, 0},
		{"banner without send", banner, tcpSpec("", "220"), wait, Succeeded, 0},
		{"closed before match", closer, tcpSpec("PING", "PONG"), wait, Failed, Network},
		{"no answer until cancelled", silent, tcpSpec("PING", "PONG"), 50 * time.Millisecond, Failed, Network},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startTCP(t, tc.serve)
			opts := Options{ClusterName: "web"}
			p, err := newProber(tc.spec, &opts)
			if err != nil {
				t.Fatal(err)
			}
			sess := p.Session(srv.host(t))
			defer sess.Close()
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			r := sess.Check(ctx)
			if r.Outcome != tc.want || (tc.want == Failed && r.Failure != tc.failure) {
				t.Errorf("Check = %+v; want outcome %v failure %v", r, tc.want, tc.failure)
			}
		})
	}
}

func TestTCPRefused(t *testing.T) {
	addr := closedAddr(t)
	for _, s := range []*config.HealthCheck{tcpSpec(""), tcpSpec("PING", "PONG")} {
		if r := probeOnce(t, s, Options{}, newHost(t, addr, 0)); r.Outcome != Failed || r.Failure != Network {
			t.Errorf("Check against a closed port = %+v; want a network failure", r)
		}
	}
}

func TestTCPReuse(t *testing.T) {
	for _, tc := range []struct {
		name      string
		reuse     bool
		serve     func(net.Conn)
		wantConns int32
	}{
		{"kept", true, pingPong, 1},
		{"not kept", false, pingPong, 3},
		// The server answers once and closes: the kept connection is found dead at the next
		// check, which reconnects instead of failing.
		{"dead kept connection", true, func(c net.Conn) {
			buf := make([]byte, 4)
			io.ReadFull(c, buf)
			c.Write([]byte("PONG"))
		}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startTCP(t, tc.serve)
			s := tcpSpec("PING", "PONG")
			s.ReuseConnection = tc.reuse
			opts := Options{ClusterName: "web"}
			p, _ := newProber(s, &opts)
			sess := p.Session(srv.host(t))
			for i := range 3 {
				if r := sess.Check(context.Background()); r.Outcome != Succeeded {
					t.Fatalf("check %d = %+v", i, r)
				}
			}
			sess.Close()
			if got := srv.conns.Load(); got != tc.wantConns {
				t.Errorf("connections = %d; want %d", got, tc.wantConns)
			}
		})
	}
}

// closedAddr returns an address of 127.0.0.1 where nothing listens.
func closedAddr(*testing.T) string {
	// Port 1 refuses: unprivileged processes cannot bind it. A closed ephemeral port could be
	// taken by another test, or let the kernel connect a socket to itself.
	return "127.0.0.1:1"
}
