package httpproxy

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestSlowReaderBackPressuresUpstream: a client that stops reading (an HTTP/2 client that
// stops granting window after 8 MiB) makes the proxy stop its upstream once about the cluster's
// per_connection_buffer_limit_bytes of the response wait in the proxy: the upstream, which
// streams 32 MiB, gets to write little more than that limit past what the client read: the
// HTTP/2 stream's window (x/net's default let 4 MiB through), or for HTTP/1.1 the 4 KiB the
// connection reads ahead, the rest waiting in the kernel: the upstream socket's send buffer
// and the proxy's receive buffer, which the test sizes on both ends (SO_SNDBUF, and SO_RCVBUF
// through upstream_bind_config) and reads back (getsockopt) for the bound. Left to Linux's
// autotuning, the proxy's receive buffer grew past a guess of it under load (409,600 bytes
// written past the client's 8 MiB against a bound of 393,216).
func TestSlowReaderBackPressuresUpstream(t *testing.T) {
	const limit = 64 << 10
	const read = 8 << 20 // what the client reads before it stops
	// Fixed before connect, so that autotuning leaves it as it is.
	bind := fmt.Sprintf("upstream_bind_config:\n  source_address: {address: 127.0.0.1, port_value: 0}\n"+
		"  socket_options: [{level: %d, name: %d, int_value: %d, state: STATE_PREBIND}]\n", syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10)
	for _, tc := range []struct {
		name, extra string
		kernel      bool // the bound counts the kernel's buffers: no flow control of its own
	}{
		{"HTTP/2 upstream", "http2_protocol_options: {}", false},
		{"HTTP/1.1 upstream", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var written atomic.Int64
			stop := make(chan struct{})
			up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", fmt.Sprint(32<<20))
				chunk := make([]byte, 16<<10)
				for written.Load() < 32<<20 {
					n, err := w.Write(chunk)
					written.Add(int64(n))
					if err != nil {
						return
					}
					select {
					case <-stop:
						return
					default:
					}
				}
			}))
			up.Config.Protocols = new(http.Protocols)
			up.Config.Protocols.SetHTTP1(true)
			up.Config.Protocols.SetUnencryptedHTTP2(true)
			accepted := make(chan net.Conn, 1)
			up.Listener = smallSendBuffers{up.Listener, accepted}
			up.Start()
			t.Cleanup(up.Close)
			t.Cleanup(func() { close(stop) })
			e := newEnv(t, envOptions{
				clusters: []string{staticCluster("web", fmt.Sprintf("per_connection_buffer_limit_bytes: %d\n%s\n%s", limit, tc.extra, bind), up.Listener.Addr().String())},
				hcm:      webHCM,
			})
			f := newStreamFlood(t, e.addr) // window 0: no DATA is ever taken
			f.open(t, 1)
			waitUntil(t, "the response head", func() bool { return f.resp.Load() == 1 })
			// The client reads the first 8 MiB at full speed (long enough for Linux to grow
			// socket buffers it sizes itself), then nothing.
			if err := f.fr.WriteWindowUpdate(0, read); err != nil {
				t.Fatal(err)
			}
			if err := f.fr.WriteWindowUpdate(1, read); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, "the upstream to send what the client reads", func() bool { return written.Load() >= read+limit/2 })
			// What the upstream may write: what the client read, the limit, 64 KiB of slack
			// (the 4 KiB read ahead, a 16 KiB chunk under way, frames) and, without flow
			// control, the buffers the kernel gives the two sockets (their getsockopt values:
			// each is twice what was asked, the kernel's room for its bookkeeping; the data
			// they hold is less).
			bound := int64(read + limit + 64<<10)
			if tc.kernel {
				var c net.Conn
				select {
				case c = <-accepted:
				default:
					t.Fatal("the upstream accepted no connection")
				}
				snd := sockopt(t, c, syscall.SO_SNDBUF)
				rcv := proxyEndSockopt(t, c, syscall.SO_RCVBUF)
				bound += int64(snd + rcv)
				t.Logf("kernel buffers: upstream SO_SNDBUF %d, proxy SO_RCVBUF %d", snd, rcv)
			}
			// Back-pressure shows as the upstream's writes stopping: watch them for a while.
			settled := written.Load()
			for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end) && settled <= bound; {
				time.Sleep(20 * time.Millisecond)
				settled = written.Load()
			}
			if settled > bound {
				t.Fatalf("the upstream wrote %d bytes to a client that reads nothing; want at most %d", settled, bound)
			}
			t.Logf("upstream wrote %d bytes past what the client read (limit %d)", settled-read, limit)
		})
	}
}

// smallSendBuffers gives the upstream's accepted sockets a small kernel send buffer, so that
// what the upstream writes is, but for it, what the proxy holds; it hands the first to
// accepted.
type smallSendBuffers struct {
	net.Listener
	accepted chan<- net.Conn
}

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(8 << 10)
		select {
		case l.accepted <- c:
		default:
		}
	}
	return c, err
}

// sockopt reads a SOL_SOCKET option of c's socket.
func sockopt(t *testing.T, c net.Conn, name int) int {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	if err := rc.Control(func(fd uintptr) { v, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, name) }); err != nil || gerr != nil {
		t.Fatalf("getsockopt(%d): %v %v", name, err, gerr)
	}
	return v
}

// proxyEndSockopt reads a SOL_SOCKET option of the other end of c, a connection the proxy
// (in this process) dialed to the test: the socket among this process's descriptors whose
// address is c's peer and whose peer is c.
func proxyEndSockopt(t *testing.T, c net.Conn, name int) int {
	t.Helper()
	local, peer := c.RemoteAddr().String(), c.LocalAddr().String()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range fds {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		sa, err := syscall.Getsockname(fd)
		if err != nil || sockaddrString(sa) != local {
			continue
		}
		if pa, err := syscall.Getpeername(fd); err != nil || sockaddrString(pa) != peer {
			continue
		}
		v, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, name)
		if err != nil {
			t.Fatalf("getsockopt(%d) on the proxy's end: %v", name, err)
		}
		return v
	}
	t.Fatalf("no socket of this process is %s's peer", peer)
	return 0
}

// sockaddrString is an IPv4 socket address as net.Addr.String writes it ("" for others).
func sockaddrString(sa syscall.Sockaddr) string {
	if a, ok := sa.(*syscall.SockaddrInet4); ok {
		return net.JoinHostPort(net.IP(a.Addr[:]).String(), strconv.Itoa(a.Port))
	}
	return ""
}

// waitUntil polls cond until it holds, failing after wait.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
