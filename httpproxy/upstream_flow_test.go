package httpproxy

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestSlowReaderBackPressuresUpstream: a client that stops reading (an HTTP/2 client that
// stops granting window after 8 MiB) makes the proxy stop its upstream once about the cluster's
// per_connection_buffer_limit_bytes of the response wait in the proxy: the upstream, which
// streams 32 MiB, gets to write little more than that limit past what the client read: the
// HTTP/2 stream's window (x/net's default let 4 MiB through), or for HTTP/1.1 the 4 KiB the
// connection reads ahead, the rest waiting in the upstream socket's kernel receive buffer.
func TestSlowReaderBackPressuresUpstream(t *testing.T) {
	const limit = 64 << 10
	const read = 8 << 20 // what the client reads before it stops
	for _, tc := range []struct {
		name, extra string
		bound       int64 // what the upstream may write (the kernel doubles a socket buffer for its bookkeeping)
	}{
		{"HTTP/2 upstream", "http2_protocol_options: {}", read + limit + 64<<10},
		{"HTTP/1.1 upstream", "", read + limit + 2*kernelReceiveBuffer(t) + 64<<10},
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
			up.Listener = smallSendBuffers{up.Listener}
			up.Start()
			t.Cleanup(up.Close)
			t.Cleanup(func() { close(stop) })
			e := newEnv(t, envOptions{
				clusters: []string{staticCluster("web", fmt.Sprintf("per_connection_buffer_limit_bytes: %d\n%s", limit, tc.extra), up.Listener.Addr().String())},
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
			// Back-pressure shows as the upstream's writes stopping: watch them for a while.
			settled := written.Load()
			for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end) && settled <= tc.bound; {
				time.Sleep(20 * time.Millisecond)
				settled = written.Load()
			}
			if settled > tc.bound {
				t.Fatalf("the upstream wrote %d bytes to a client that reads nothing; want at most %d", settled, tc.bound)
			}
			t.Logf("upstream wrote %d bytes past what the client read (limit %d)", settled-read, limit)
		})
	}
}

// kernelReceiveBuffer is the size Linux gives a new TCP socket's receive buffer
// (net.ipv4.tcp_rmem's default), 128 KiB when it cannot be read.
func kernelReceiveBuffer(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_rmem")
	if f := strings.Fields(string(b)); err == nil && len(f) == 3 {
		if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			return n
		}
	}
	t.Logf("tcp_rmem unknown (%v); assuming 128 KiB", err)
	return 128 << 10
}

// smallSendBuffers gives the upstream's accepted sockets a small kernel send buffer, so that
// what the upstream writes is, but for it, what the proxy holds.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(8 << 10)
	}
	return c, err
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
