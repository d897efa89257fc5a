package httpproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/legateproxy/legate/internal/nettest"
)

// sseEvents is how many events the streaming upstreams send.
const sseEvents = 4

// sseEvent is the i-th server-sent event, blank line included.
func sseEvent(i int) string { return fmt.Sprintf("data: event %d\n\n", i) }

// chunkedSSEUpstream is a net/http upstream sending sseEvents events as a chunked response,
// flushing each, and sending the next only once the test receives from next.
func chunkedSSEUpstream(t *testing.T, next <-chan struct{}) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(hdrContentType, "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for i := range sseEvents {
			if i > 0 && !awaitNext(r.Context(), next) {
				return
			}
			io.WriteString(w, sseEvent(i))
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// closeDelimitedSSEUpstream is a scripted upstream answering one request with an
// HTTP/1.0-style response (no length, no chunking: the body ends when the connection
// closes), sending the events as chunkedSSEUpstream does.
func closeDelimitedSSEUpstream(t *testing.T, minor int, next <-chan struct{}) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	nettest.Serve(t, ln, func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if line == "\r\n" {
				break
			}
		}
		fmt.Fprintf(c, "HTTP/1.%d 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n", minor)
		for i := range sseEvents {
			if i > 0 && !awaitNext(ctx, next) {
				return
			}
			if _, err := io.WriteString(c, sseEvent(i)); err != nil {
				return
			}
		}
	})
	t.Cleanup(cancel) // runs before Serve's cleanup, which waits for the handler
	return ln.Addr().String()
}

// awaitNext waits for the test's go-ahead; it reports false when ctx ends first.
func awaitNext(ctx context.Context, next <-chan struct{}) bool {
	select {
	case <-next:
		return true
	case <-ctx.Done():
		return false
	}
}

// TestHTTP1ResponseStreams: an HTTP/1.1 client reading a streamed response through Legate
// (server-sent events, chunked or delimited by the upstream's close) gets each event while
// the upstream waits before sending the next one, as Envoy forwards each chunk on arrival.
func TestHTTP1ResponseStreams(t *testing.T) {
	tests := []struct {
		name     string
		upstream func(t *testing.T, next <-chan struct{}) string
	}{
		{"chunked", chunkedSSEUpstream},
		{"close-delimited HTTP/1.0", func(t *testing.T, next <-chan struct{}) string { return closeDelimitedSSEUpstream(t, 0, next) }},
		{"close-delimited HTTP/1.1", func(t *testing.T, next <-chan struct{}) string { return closeDelimitedSSEUpstream(t, 1, next) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := make(chan struct{})
			e := newEnv(t, envOptions{
				clusters: []string{staticCluster("web", "", tt.upstream(t, next))},
				hcm:      simpleHCM("web", ""),
			})
			resp, err := e.client().Get("http://" + e.addr + "/events")
			if err != nil {
				t.Fatalf("GET /events: %v", err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status = %d; want 200", resp.StatusCode)
			}
			events := readEvents(resp.Body)
			for i := range sseEvents {
				select {
				case ev, ok := <-events:
					if !ok {
						t.Fatalf("the body ended before event %d", i)
					}
					if ev != sseEvent(i) {
						t.Fatalf("event %d = %q; want %q", i, ev, sseEvent(i))
					}
				case <-time.After(wait):
					t.Fatalf("event %d did not reach the client within %v while the upstream waited to send the next", i, wait)
				}
				if i+1 < sseEvents {
					next <- struct{}{}
				}
			}
			if ev, ok := <-events; ok {
				t.Errorf("after the last event: %q; want the end of the body", ev)
			}
		})
	}
}

// readEvents reads server-sent events (each ending with a blank line) from r on a goroutine
// and sends them, closing the channel when r ends.
func readEvents(r io.Reader) <-chan string {
	out := make(chan string, sseEvents+1)
	go func() {
		defer close(out)
		br := bufio.NewReader(r)
		var ev strings.Builder
		for {
			line, err := br.ReadString('\n')
			ev.WriteString(line)
			if err != nil {
				if ev.Len() > 0 {
					out <- ev.String()
				}
				return
			}
			if line == "\n" {
				out <- ev.String()
				ev.Reset()
			}
		}
	}()
	return out
}

// TestHTTP1ResponseFlowControl: a client that does not read holds the upstream back. The
// upstream cannot write a body far larger than the socket buffers and Legate's buffer, and
// its write times out; the client then reads what was forwarded, in order.
func TestHTTP1ResponseFlowControl(t *testing.T) {
	const size = 64 << 20
	const stall = 2 * time.Second
	blocked := make(chan int64, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(stall))
		w.WriteHeader(http.StatusOK)
		chunk := []byte(strings.Repeat("0123456789abcdef", 1024))
		var sent int64
		for sent < size {
			n, err := w.Write(chunk)
			sent += int64(n)
			if err != nil {
				break
			}
		}
		blocked <- sent
	}))
	t.Cleanup(srv.Close)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", srv.Listener.Addr().String())},
		hcm:      simpleHCM("web", ""),
	})
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /big HTTP/1.1\r\nHost: web\r\n\r\n")
	var sent int64
	select {
	case sent = <-blocked:
	case <-time.After(stall + wait):
		t.Fatal("the upstream's handler did not end")
	}
	if sent >= size {
		t.Fatalf("the upstream wrote all %d bytes to a client that read nothing; want it held back", sent)
	}
	// What was forwarded is a prefix of the body.
	c.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The upstream's response ended short of its body: Legate ends the client's response
	// without its last chunk, so the read fails after the forwarded bytes.
	got, err := io.ReadAll(resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("reading the body: %v; want %v (a truncated response)", err, io.ErrUnexpectedEOF)
	}
	if len(got) == 0 || int64(len(got)) > sent {
		t.Errorf("client got %d bytes; the upstream sent %d", len(got), sent)
	}
	for i := 0; i+16 <= len(got); i += 16 {
		if string(got[i:i+16]) != "0123456789abcdef" {
			t.Fatalf("body bytes %d..%d = %q; want the upstream's pattern", i, i+16, got[i:i+16])
		}
	}
}
