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
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// sizedUpstream answers every request with X-Got (the request body's length) and a body of
// the n bytes the query's n= asks for (a repeating pattern).
func sizedUpstream(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ := io.Copy(io.Discard, r.Body)
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("X-Got", strconv.FormatInt(got, 10))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.Write(pattern(n))
	}))
	t.Cleanup(s.Close)
	return s
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

// splitConn writes what it is given three bytes at a time, so that the proxy finds TLS
// records cut across its reads.
type splitConn struct{ net.Conn }

func (c splitConn) Write(p []byte) (int, error) {
	for i := 0; i < len(p); i += 3 {
		if _, err := c.Conn.Write(p[i:min(i+3, len(p))]); err != nil {
			return i, err
		}
	}
	return len(p), nil
}

// dialTLS connects a crypto/tls client to the proxy: its socket's receive buffer is small
// (a large response fills the proxy's socket and its writes wait), and with split every
// write reaches the proxy cut into pieces.
func dialTLS(t *testing.T, e *env, ca *tlstest.Cert, split bool) *tls.Conn {
	t.Helper()
	raw, err := net.DialTimeout("tcp", e.addr, wait)
	if err != nil {
		t.Fatal(err)
	}
	raw.(*net.TCPConn).SetReadBuffer(64 << 10)
	var nc net.Conn = raw
	if split {
		nc = splitConn{raw}
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	tc := tls.Client(nc, &tls.Config{RootCAs: roots, ServerName: "proxy.example.com", NextProtos: []string{"http/1.1"}})
	t.Cleanup(func() { tc.Close() })
	tc.SetDeadline(time.Now().Add(2 * wait))
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	return tc
}

// TestTLSRecordsCutAndSmall sends requests over TLS whose records are one byte of the head
// each, and whose bytes reach the proxy three at a time (records cut across its reads), and
// asks for a 4 MB response that the client's small receive buffer makes the proxy's
// socket writes wait for: every byte arrives in order, the connection carries the next
// request, and when the client ends it with close_notify the proxy answers with its own
// (the client reads a clean end, not a truncation).
func TestTLSRecordsCutAndSmall(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "test ca"})
	up := sizedUpstream(t)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm:      webHCM,
		tls:      mtlsSocket(t, ca),
	})
	for _, split := range []bool{false, true} {
		t.Run(fmt.Sprintf("split=%v", split), func(t *testing.T) {
			tc := dialTLS(t, e, ca, split)
			br := bufio.NewReader(tc)
			for i, n := range []int{4 << 20, 10, 100 << 10} {
				body := pattern(37 + i)
				req := fmt.Sprintf("POST /?n=%d HTTP/1.1\r\nHost: proxy.example.com\r\nContent-Length: %d\r\n\r\n%s", n, len(body), body)
				for j := range len(req) { // one TLS record per byte
					if _, err := tc.Write([]byte{req[j]}); err != nil {
						t.Fatal(err)
					}
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || !bytes.Equal(got, pattern(n)) {
					t.Fatalf("request %d: %d body bytes (%v); want the %d of the pattern", i, len(got), err, n)
				}
				if h := resp.Header.Get("X-Got"); h != strconv.Itoa(len(body)) {
					t.Fatalf("request %d: the upstream got %s body bytes; want %d", i, h, len(body))
				}
			}
			if err := tc.CloseWrite(); err != nil { // close_notify
				t.Fatal(err)
			}
			if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
				t.Fatalf("after close_notify the proxy sent %d bytes, %v; want its close_notify (io.EOF)", n, err)
			}
		})
	}
}

// TestTLSIdleTimeoutClosesCleanly checks the idle timeout of an HTTPS connection: the wait
// for the next request (a raw read) ends at the socket's deadline, and the proxy closes with
// close_notify.
func TestTLSIdleTimeoutClosesCleanly(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "test ca"})
	up := sizedUpstream(t)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm:      webHCM + "common_http_protocol_options: {idle_timeout: 0.2s}\n",
		tls:      mtlsSocket(t, ca),
	})
	tc := dialTLS(t, e, ca, false)
	br := bufio.NewReader(tc)
	fmt.Fprintf(tc, "GET /?n=5 HTTP/1.1\r\nHost: proxy.example.com\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(resp.Body); string(got) != "abcde" {
		t.Fatalf("body %q; want abcde", got)
	}
	resp.Body.Close()
	// The client's deadline (twice wait) is far beyond the idle timeout.
	if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("idle connection: read %d bytes, %v; want the proxy's close_notify (io.EOF)", n, err)
	}
}

// TestRawSocketWaitsAndFails checks the raw reads and writes under a TLS connection against
// a real peer: a read of an empty socket waits, until the read deadline; a write larger
// than the socket buffers waits for the peer, until the write deadline, and once the peer
// reads, all of it arrives in order; the peer's close reads as io.EOF, and a write after
// the peer's reset fails with a *net.OpError.
func TestRawSocketWaitsAndFails(t *testing.T) {
	a, b := tcpPair(t)
	a.SetWriteBuffer(64 << 10)
	b.(*net.TCPConn).SetReadBuffer(64 << 10)
	s := newRawSocket(a, a)
	if _, ok := s.(*tlsSocket); !ok {
		t.Fatalf("newRawSocket(%T) = %T; want the raw socket", a, s)
	}

	s.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := s.Read(make([]byte, 10)); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read of an empty socket: %d, %v; want the deadline", n, err)
	}
	s.SetReadDeadline(time.Time{})
	b.Write([]byte("hello"))
	buf := make([]byte, 10)
	if n, err := s.Read(buf); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read %q, %v; want hello", buf[:n], err)
	}

	big := pattern(4 << 20) // far more than the two socket buffers hold
	s.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	n, err := s.Write(big)
	if n >= len(big) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write to a peer that does not read: %d of %d, %v; want the deadline", n, len(big), err)
	}
	s.SetWriteDeadline(time.Time{})
	got := make(chan []byte)
	go func() {
		b.SetReadDeadline(time.Now().Add(2 * wait))
		all, _ := io.ReadAll(io.LimitReader(b, int64(len(big))))
		got <- all
	}()
	if m, err := s.Write(big[n:]); err != nil || n+m != len(big) {
		t.Fatalf("write of the rest: %d, %v", m, err)
	}
	if all := <-got; !bytes.Equal(all, big) {
		t.Fatalf("the peer read %d bytes, not the %d written in order", len(all), len(big))
	}

	b.Close()
	if n, err := s.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("read after the peer's close: %d, %v; want io.EOF", n, err)
	}
	var oe *net.OpError
	for err = nil; err == nil; { // the first writes may be taken before the peer's reset comes back
		_, err = s.Write(big[:1024])
	}
	if !errors.As(err, &oe) || oe.Op != "write" {
		t.Fatalf("write after the peer's close: %v (%T); want a *net.OpError of write", err, err)
	}
}
