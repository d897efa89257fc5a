package httpproxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
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
// reading, a little at a time, gets the whole body under the same timeout. Over plain TCP
// (the raw send path) and TLS (crypto/tls's writes).
func TestStreamIdleTimeoutClientNotReading(t *testing.T) {
	const size = 32 << 20 // far beyond what loopback socket buffers hold
	body := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.Write(body)
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
				hcm:      "stream_idle_timeout: 1s\n" + webHCM,
				tls:      tc.tls,
			})
			get := func() net.Conn {
				c, err := net.Dial("tcp", e.addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				// Not smaller: loopback TCP then crawls on its silly-window avoidance.
				c.(*net.TCPConn).SetReadBuffer(64 << 10)
				if tc.tls != nil {
					c = tls.Client(c, &tls.Config{RootCAs: roots, ServerName: "proxy.example.com", NextProtos: []string{"http/1.1"}})
				}
				c.SetDeadline(time.Now().Add(wait))
				if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
					t.Fatal(err)
				}
				return c
			}

			stalled := get()
			waitUntil(t, "the stream idle timeout", func() bool { return e.stat("http.ingress.downstream_rq_idle_timeout") == 1 })
			n, err := io.Copy(io.Discard, stalled)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the connection stayed open after the timeout (%d bytes read)", n)
			}
			if n >= size {
				t.Fatalf("read %d bytes (and %v); want the connection cut before the %d-byte body's end", n, err, size)
			}

			resp, err := http.ReadResponse(bufio.NewReaderSize(get(), 1<<10), nil) // 1 KiB reads
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("a reading client: %d bytes, %v; want the whole %d-byte body", len(got), err, size)
			}
			if n := e.stat("http.ingress.downstream_rq_idle_timeout"); n != 1 {
				t.Errorf("downstream_rq_idle_timeout = %d; want 1", n)
			}
		})
	}
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
