package pool

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// post runs one POST of body through the pool and returns the status and response body.
func post(m *Manager, path string, body io.Reader, length int64) (int, string, error) {
	var resp Response
	req := Request{Method: "POST", Path: path, Body: body, ContentLength: length}
	h := m.cluster.Snapshot().PrioritySet.Sets()[0].Hosts()[0]
	if err := m.RoundTrip(context.Background(), h, &req, &resp); err != nil {
		return 0, "", err
	}
	defer resp.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// echoBody answers with the request body, read whole first (net/http's HTTP/1.1 server ends
// the body once the response goes out).
var echoBody = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Write(b)
})

// upstreamManager serves h over proto ("HTTP/1.1", or "HTTP/2" with prior knowledge) and
// returns the pools of a cluster of that one upstream, speaking proto to it.
func upstreamManager(t *testing.T, proto string, h http.Handler) (*Manager, *connCounter) {
	t.Helper()
	srv, cc := newCountedServer(t, h)
	extra := ""
	if proto == "HTTP/2" {
		extra = "http2_protocol_options: {}"
		srv.Config.Protocols = new(http.Protocols)
		srv.Config.Protocols.SetUnencryptedHTTP2(true)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	cm, store := newClusterManager(t, staticCluster(extra, srv.Listener.Addr().String()))
	return newManager(t, cm, store, nil), cc
}

// tooLarge answers 413 after reading 4 KB of the request body.
var tooLarge = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	io.CopyN(io.Discard, r.Body, 4<<10)
	http.Error(w, "too large", http.StatusRequestEntityTooLarge)
})

// TestPostAfterIdleClose: an upstream with a keep-alive timeout (net/http's IdleTimeout)
// closes the idle connection; the next POST goes to a new connection and succeeds.
func TestPostAfterIdleClose(t *testing.T) {
	srv, cc := newCountedServer(t, echoBody)
	srv.Config.IdleTimeout = 50 * time.Millisecond
	srv.Start()
	defer srv.Close()
	cm, store := newClusterManager(t, staticCluster("", srv.Listener.Addr().String()))
	m := newManager(t, cm, store, nil)
	for i := range 3 {
		code, body, err := post(m, "/", strings.NewReader("hello"), 5)
		if err != nil || code != 200 || body != "hello" {
			t.Fatalf("POST %d = %d %q, %v; want 200 \"hello\"", i, code, body, err)
		}
		cc.waitClosed(t, 1) // the upstream's idle timeout
	}
}

// TestStaleConnectionRetriedWithBody: the upstream closes a kept-alive connection when the
// next request arrives on it, without answering (its idle close raced the request). The
// request, body included, is sent again on a new connection.
func TestStaleConnectionRetriedWithBody(t *testing.T) {
	tests := []struct {
		name   string
		length int64 // -1: chunked
		size   int
	}{
		{name: "content-length", length: 100 << 10, size: 100 << 10},
		{name: "chunked", length: -1, size: 100 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			type requestsKey struct{}
			srv, _ := newCountedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Context().Value(requestsKey{}).(*atomic.Int32).Add(1) > 1 {
					c, _, err := http.NewResponseController(w).Hijack()
					if err == nil {
						c.Close()
					}
					return
				}
				echoBody(w, r)
			}))
			srv.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
				return context.WithValue(ctx, requestsKey{}, new(atomic.Int32))
			}
			srv.Start()
			defer srv.Close()
			cm, store := newClusterManager(t, staticCluster("", srv.Listener.Addr().String()))
			m := newManager(t, cm, store, nil)
			body := bytes.Repeat([]byte("0123456789abcdef"), tt.size/16)
			for i := range 3 {
				code, got, err := post(m, "/", bytes.NewReader(body), tt.length)
				if err != nil || code != 200 || got != string(body) {
					t.Fatalf("POST %d = %d (%d bytes), %v; want 200 with the %d bytes sent", i, code, len(got), err, len(body))
				}
			}
			if got := m.st.UpstreamCxTotal.Value(); got != 3 {
				t.Errorf("upstream_cx_total = %d; want 3 (a retry for each reused connection)", got)
			}
		})
	}
}

// TestStaleConnectionBodyOverLimit: a body larger than per_connection_buffer_limit_bytes
// cannot be replayed, so its request is not retried.
func TestStaleConnectionBodyOverLimit(t *testing.T) {
	first := true
	s := newScriptedUpstream(t, nil, func(c net.Conn, _, _ string) {
		if first {
			first = false
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			return
		}
		c.Close()
	})
	cm, store := newClusterManager(t, staticCluster("per_connection_buffer_limit_bytes: 1024", s.addr))
	m := newManager(t, cm, store, nil)
	if code, _, err := post(m, "/", nil, 0); err != nil || code != 200 {
		t.Fatalf("first POST = %d, %v; want 200", code, err)
	}
	_, _, err := post(m, "/", bytes.NewReader(make([]byte, 64<<10)), 64<<10)
	if !errors.Is(err, ErrReset) {
		t.Errorf("POST of 64 KiB on the closing connection = %v; want ErrReset", err)
	}
	if got := s.accepted.Load(); got != 1 {
		t.Errorf("upstream connections = %d; want 1 (no retry)", got)
	}
}

// TestEarlyResponse: the upstream answers 413 after reading a few KB of a 10 MB upload. The
// answer comes back, and the rest of the upload is not sent. Over HTTP/1.1 the connection,
// its request unfinished, is closed.
func TestEarlyResponse(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/2"} {
		t.Run(proto, func(t *testing.T) {
			m, cc := upstreamManager(t, proto, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/upload" {
					tooLarge(w, r)
					return
				}
				io.WriteString(w, "ok")
			}))
			for _, length := range []int64{10 << 20, -1} {
				upload := &countingReader{r: io.LimitReader(zeros{}, 10<<20)}
				code, body, err := post(m, "/upload", upload, length)
				if err != nil || code != http.StatusRequestEntityTooLarge || body != "too large\n" {
					t.Fatalf("upload (length %d) = %d %q, %v; want 413 \"too large\\n\"", length, code, body, err)
				}
				if n := upload.n.Load(); n >= 10<<20 {
					t.Errorf("upload (length %d) read %d bytes of the body; want it stopped early", length, n)
				}
				if proto == "HTTP/1.1" {
					cc.waitClosed(t, 1)
				}
			}
			if code, body, err := post(m, "/", strings.NewReader("x"), 1); err != nil || code != 200 || body != "ok" {
				t.Errorf("POST after = %d %q, %v; want 200 \"ok\"", code, body, err)
			}
		})
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// countingReader counts the bytes read from r.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// failingBody returns some bytes, then err.
type failingBody struct {
	sent bool
	err  error
}

func (b *failingBody) Read(p []byte) (int, error) {
	if !b.sent {
		b.sent = true
		return copy(p, "some bytes"), nil
	}
	return 0, b.err
}

// TestRequestBodyError: a failure reading the request body (the client went away, or sent
// less than its content-length) comes back as ErrRequestBody, over HTTP/1.1 and HTTP/2, and
// is charged to neither the host nor the upstream connection.
func TestRequestBodyError(t *testing.T) {
	bodies := []struct {
		name   string
		body   func() io.Reader
		length int64
	}{
		{name: "read error", body: func() io.Reader { return &failingBody{err: errors.New("client went away")} }, length: 100},
		{name: "read error, chunked", body: func() io.Reader { return &failingBody{err: errors.New("client went away")} }, length: -1},
		{name: "short body", body: func() io.Reader { return strings.NewReader("short") }, length: 100},
	}
	for _, proto := range []string{"HTTP/1.1", "HTTP/2"} {
		for _, tt := range bodies {
			t.Run(proto+" "+tt.name, func(t *testing.T) {
				m, _ := upstreamManager(t, proto, echoBody)
				h := onlyHost(t, m)
				_, _, err := post(m, "/", tt.body(), tt.length)
				if !errors.Is(err, ErrRequestBody) {
					t.Fatalf("POST = %v; want ErrRequestBody", err)
				}
				hs := m.cluster.Snapshot().HostStats(h)
				got := map[string]uint64{
					"upstream_cx_protocol_error": m.st.UpstreamCxProtocolError.Value(),
					"upstream_rq_rx_reset":       m.st.UpstreamRqRxReset.Value(),
					"upstream_rq_tx_reset":       m.st.UpstreamRqTxReset.Value(),
					"host rq_error":              hs.Rq().Error,
					"host rq_active":             uint64(hs.Rq().Active),
				}
				for name, v := range got {
					if v != 0 {
						t.Errorf("%s = %d; want 0", name, v)
					}
				}
				if proto == "HTTP/1.1" {
					waitFor(t, "the connection closed locally", func() bool { return m.st.UpstreamCxDestroyLocal.Value() == 1 })
				}
			})
		}
	}
}

// stalledBody gives 16 KB, then waits in Read (a client that paused its upload) until
// interrupt is called. reading says whether a Read is in progress.
type stalledBody struct {
	sent      int
	stop      chan struct{}
	reading   atomic.Bool
	interrupt atomic.Int32
}

func (b *stalledBody) Read(p []byte) (int, error) {
	b.reading.Store(true)
	defer b.reading.Store(false)
	if b.sent < 16<<10 {
		n := min(len(p), 16<<10-b.sent)
		b.sent += n
		return n, nil
	}
	<-b.stop
	return 0, errors.New("interrupted")
}

func (b *stalledBody) interruptBody() {
	if b.interrupt.Add(1) == 1 {
		close(b.stop)
	}
}

// TestEarlyResponseInterruptsStalledBody: the upstream answers 413 while the client's upload
// is paused. The answer comes back without waiting for the client (InterruptBody ends the
// waiting read), and once the response is closed nothing reads the body any more.
func TestEarlyResponseInterruptsStalledBody(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/2"} {
		t.Run(proto, func(t *testing.T) {
			m, _ := upstreamManager(t, proto, tooLarge)
			body := &stalledBody{stop: make(chan struct{})}
			req := Request{Method: "POST", Path: "/", Body: body, ContentLength: 10 << 20, InterruptBody: body.interruptBody}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var resp Response
			if err := m.RoundTrip(ctx, onlyHost(t, m), &req, &resp); err != nil {
				t.Fatalf("RoundTrip = %v; want the 413", err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge || string(got) != "too large\n" {
				t.Errorf("response = %d %q; want 413 \"too large\\n\"", resp.StatusCode, got)
			}
			if n := body.interrupt.Load(); n != 1 {
				t.Errorf("InterruptBody calls = %d; want 1", n)
			}
			if body.reading.Load() {
				t.Error("the body is still being read after Response.Close")
			}
		})
	}
}

// TestRequestBodyBytesGoOutAsRead: body bytes are sent as they are read, not held until more
// come: an upstream answering on the first KB gets it while the client's upload is paused.
func TestRequestBodyBytesGoOutAsRead(t *testing.T) {
	srv, _ := newCountedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Full duplex: net/http would otherwise read on the unfinished body before answering.
		http.NewResponseController(w).EnableFullDuplex()
		b := make([]byte, 1000)
		io.ReadFull(r.Body, b)
		w.Write(b[:10])
	}))
	srv.Start()
	defer srv.Close()
	cm, store := newClusterManager(t, staticCluster("", srv.Listener.Addr().String()))
	m := newManager(t, cm, store, nil)
	for _, length := range []int64{1 << 20, -1} {
		body := &stalledBody{sent: 16<<10 - 1000, stop: make(chan struct{})} // 1000 bytes, then a pause
		req := Request{Method: "POST", Path: "/", Body: body, ContentLength: length, InterruptBody: body.interruptBody}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var resp Response
		err := m.RoundTrip(ctx, onlyHost(t, m), &req, &resp)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Close()
		}
		cancel()
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("POST (length %d) paused after 1000 bytes = %d, %v; want the upstream's 200", length, resp.StatusCode, err)
		}
	}
}
