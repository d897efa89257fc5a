package httpproxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// TestStreamIdleTimeoutClientNotReading checks stream_idle_timeout against an HTTP/1.1 client
// that asks for a large response and then reads nothing: once the socket buffers are full
// the response makes no progress, and the timeout resets the stream (the connection closes
// before the body's end, counted in downstream_rq_idle_timeout) rather than leaving the
// stream, and its upstream exchange, waiting on the client forever. A client that keeps
// reading, a little at a time and for longer than the timeout, gets the whole body (of
// /paced) under the same timeout. Over plain TCP (the raw send path) and TLS (crypto/tls's
// writes).
//
// The timeout is 2 s, not 1 s: at load 20 to 35 (go test -race beside it) the reading
// client's goroutine was seen to go 0.95 s without running, its socket's queue full (ss:
// Recv-Q 554,735), and a 1 s timeout rightly cut a stream that made no progress for that long.
func TestStreamIdleTimeoutClientNotReading(t *testing.T) {
	const (
		size  = 32 << 20 // far beyond what loopback socket buffers hold
		paced = 16 << 20 // beyond them too, and read in over 1.5 timeouts (pacedReader)
		idle  = 2 * time.Second
	)
	body := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := body
		if r.URL.Path == "/paced" {
			b = body[:paced]
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Write(b)
	}))
	t.Cleanup(up.Close)
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "stall ca"})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	for _, tc := range []struct {
		name string
		tls  *corev3.TransportSocket
	}{{"plain", nil}, {"tls", mtlsSocket(t, ca)}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{
				clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
				hcm:      fmt.Sprintf("stream_idle_timeout: %v\n%s", idle, webHCM),
				tls:      tc.tls,
			})
			get := func(path string, rcvbuf int) net.Conn {
				c, err := net.Dial("tcp", e.addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				if rcvbuf > 0 {
					c.(*net.TCPConn).SetReadBuffer(rcvbuf)
				}
				if tc.tls != nil {
					c = tls.Client(c, &tls.Config{RootCAs: roots, ServerName: "proxy.example.com", NextProtos: []string{"http/1.1"}})
				}
				c.SetDeadline(time.Now().Add(wait))
				if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
					t.Fatal(err)
				}
				return c
			}

			// Not smaller: loopback TCP then crawls on its silly-window avoidance.
			stalled := get("/", 64<<10)
			waitUntil(t, "the stream idle timeout", func() bool { return e.stat("http.ingress.downstream_rq_idle_timeout") == 1 })
			n, err := io.Copy(io.Discard, stalled)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the connection stayed open after the timeout (%d bytes read)", n)
			}
			if n >= size {
				t.Fatalf("read %d bytes (and %v); want the connection cut before the %d-byte body's end", n, err, size)
			}

			// The reading client leaves its receive buffer to Linux's autotuning. A small
			// fixed one (SO_RCVBUF) made loopback TCP drop segments whenever the reader lagged
			// (the queue's memory outgrew the buffer: TcpExtTCPRcvQDrop), and each drop waits
			// a retransmission timeout, 204 ms doubling: under load three in a row left the
			// connection 1.43 s without a byte, which a 1 s timeout rightly cut.
			start := time.Now()
			slow := &pacedReader{r: get("/paced", 0), most: 1 << 10, every: 256 << 10, pause: 60 * time.Millisecond}
			resp, err := http.ReadResponse(bufio.NewReaderSize(slow, 1<<10), nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			if err != nil || !bytes.Equal(got, body[:paced]) {
				t.Fatalf("a reading client: %d bytes, %v; want the whole %d-byte body", len(got), err, paced)
			}
			if d := time.Since(start); d < idle*3/2 {
				t.Fatalf("the reading client took %v; want over 1.5 times the timeout, or the check proves nothing", d)
			}
			if n := e.stat("http.ingress.downstream_rq_idle_timeout"); n != 1 {
				t.Errorf("downstream_rq_idle_timeout = %d; want 1", n)
			}
		})
	}
}

// pacedReader is a client that reads slowly but steadily: at most most bytes a read, and a
// pause after every every bytes, so that a body takes a known least time however fast the
// machine, with no gap near the timeout. (The pauses are its reading rate, not a wait for an
// event.)
type pacedReader struct {
	r     io.Reader
	most  int
	every int
	pause time.Duration
	n     int // bytes since the last pause
}

func (p *pacedReader) Read(b []byte) (int, error) {
	if p.n >= p.every {
		time.Sleep(p.pause)
		p.n = 0
	}
	n, err := p.r.Read(b[:min(len(b), p.most)])
	p.n += n
	return n, err
}

// TestStreamIdleTimeoutH2ClientNoWindow is TestStreamIdleTimeoutClientNotReading for an
// HTTP/2 client that grants no flow-control window: the stream's response head comes, its
// body cannot, and stream_idle_timeout resets the stream (RST_STREAM, counted in
// downstream_rq_idle_timeout) instead of leaving it waiting for window forever.
func TestStreamIdleTimeoutH2ClientNoWindow(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(16<<20)) // beyond what the stream buffers
		w.Write(make([]byte, 16<<20))
	}))
	t.Cleanup(up.Close)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm:      "stream_idle_timeout: 1s\n" + webHCM,
	})
	f := newStreamFlood(t, e.addr) // initial window 0, never raised
	f.open(t, 1)
	waitUntil(t, "the response head", func() bool { return f.resp.Load() == 1 })
	waitUntil(t, "the stream idle timeout", func() bool { return e.stat("http.ingress.downstream_rq_idle_timeout") == 1 })
	waitUntil(t, "the stream's RST_STREAM", func() bool { return f.rst.Load() == 1 })
}
