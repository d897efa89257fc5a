package httpproxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/legateproxy/legate/internal/nettest"
	"github.com/legateproxy/legate/listener"
	"golang.org/x/net/http2"
)

// A plain HTTP/1 connection waits for its next request, and serves it, inside one raw read
// of its socket (serverConn.waitRaw). These tests run real clients through it: the requests
// it serves inside, the ones it must serve outside (bodies, upgrades, the h2c preface), and
// the deadlines and drains that end its wait.

// pathUpstream answers each request with its method, path and body ("GET /a ") in the body;
// a request for /hold signals held and waits for release (or for the test's end).
func pathUpstream(t *testing.T) (addr string, held chan string, release chan struct{}) {
	held, release = make(chan string, 4), make(chan struct{})
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.HasPrefix(r.URL.Path, "/hold") {
			held <- r.URL.Path
			select {
			case <-release:
			case <-done:
			}
		}
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, body)
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return srv.Listener.Addr().String(), held, release
}

// pathEnv is a proxy in front of pathUpstream, with extra connection manager YAML.
func pathEnv(t *testing.T, extra string, o envOptions) (e *env, held chan string, release chan struct{}) {
	addr, held, release := pathUpstream(t)
	o.clusters = []string{staticCluster("web", "", addr)}
	o.hcm = simpleHCM("web", "") + extra
	return newEnv(t, o), held, release
}

// expect reads one response and checks its status and body.
func (rc *rawConn) expect(status int, body string) {
	rc.t.Helper()
	resp, got := rc.response()
	if resp.StatusCode != status || got != body {
		rc.t.Fatalf("response = %d %q; want %d %q", resp.StatusCode, got, status, body)
	}
}

func get(path string) string { return "GET " + path + " HTTP/1.1\r\nHost: a\r\n\r\n" }

// TestKeepAliveMakesNoEmptyReads: keep-alive requests from a real client, GETs and POSTs whose
// small body comes with the head, are each read with one read of the socket, made once the
// request is there; without the raw wait every request cost a read that found the socket
// empty before the connection waited for it.
func TestKeepAliveMakesNoEmptyReads(t *testing.T) {
	e, _, _ := pathEnv(t, "", envOptions{})
	c := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}, Timeout: wait}
	t.Cleanup(c.CloseIdleConnections)
	const n = 200
	before := emptyReads.Value()
	for i := range n {
		path := fmt.Sprintf("/%d", i)
		resp, body := e.get(c, path)
		if resp.StatusCode != 200 || body != "GET "+path+" " {
			t.Fatalf("request %d = %d %q", i, resp.StatusCode, body)
		}
		resp, body = e.send(c, http.MethodPost, path, strings.NewReader("hello"))
		if resp.StatusCode != 200 || body != "POST "+path+" hello" {
			t.Fatalf("POST %d = %d %q", i, resp.StatusCode, body)
		}
	}
	if got := e.stat("http.ingress.downstream_cx_total"); got != 1 {
		t.Fatalf("downstream_cx_total = %d; want the one keep-alive connection", got)
	}
	// The connection's first wait reads once before waiting (a raw read cannot wait first);
	// a few more are tolerated for stray wake-ups on a loaded machine.
	got := emptyReads.Value() - before
	t.Logf("%d reads found the socket empty for %d requests", got, 2*n)
	if got > n/10 {
		t.Errorf("%d reads found the socket empty for %d requests; want about one", got, 2*n)
	}
}

// TestPipelinedInOneWrite: two and three requests written at once are answered in order.
func TestPipelinedInOneWrite(t *testing.T) {
	e, _, _ := pathEnv(t, "", envOptions{})
	rc := dialRaw(t, e.addr)
	rc.write(get("/first"))
	rc.expect(200, "GET /first ")
	rc.write(get("/a") + get("/b"))
	rc.expect(200, "GET /a ")
	rc.expect(200, "GET /b ")
	rc.write(get("/c") + get("/d") + get("/e"))
	for _, p := range []string{"/c", "/d", "/e"} {
		rc.expect(200, "GET "+p+" ")
	}
}

// TestPipelinedWhileServed: a request written while the one before it is being served (the
// upstream holds it until the second is sent) is read once the first is answered: its
// bytes came after the socket was drained, inside the same raw read.
func TestPipelinedWhileServed(t *testing.T) {
	e, held, release := pathEnv(t, "", envOptions{})
	rc := dialRaw(t, e.addr)
	rc.write(get("/first")) // the connection's first request is read outside the raw wait
	rc.expect(200, "GET /first ")
	for round := range 3 {
		hold := fmt.Sprintf("/hold%d", round)
		rc.write(get(hold))
		if got := <-held; got != hold {
			t.Fatalf("upstream holds %q; want %q", got, hold)
		}
		rc.write(get("/next"))
		release <- struct{}{}
		rc.expect(200, "GET "+hold+" ")
		rc.expect(200, "GET /next ")
	}
}

// TestHeadTrickled: a head sent one byte per write, first and later on a connection, is
// read whole and served.
func TestHeadTrickled(t *testing.T) {
	e, _, _ := pathEnv(t, "", envOptions{})
	rc := dialRaw(t, e.addr)
	for _, p := range []string{"/one", "/two", "/three"} {
		req := "GET " + p + " HTTP/1.1\r\nHost: a\r\nX-Long: " + strings.Repeat("v", 3000) + "\r\n\r\n"
		for i := range len(req) {
			rc.write(req[i : i+1])
		}
		rc.expect(200, "GET "+p+" ")
	}
}

// TestHeadTooLargeInRawWait: a head over max_request_headers_kb read inside the raw wait, its
// buffer grown there up to the limit, gets Envoy's 431 and the connection closes.
func TestHeadTooLargeInRawWait(t *testing.T) {
	e, _, _ := pathEnv(t, "max_request_headers_kb: 8\n", envOptions{})
	rc := dialRaw(t, e.addr)
	rc.write(get("/first"))
	rc.expect(200, "GET /first ")
	rc.write("GET /big HTTP/1.1\r\nHost: a\r\nX-Big: " + strings.Repeat("b", 9<<10) + "\r\n\r\n")
	if resp, _ := rc.response(); resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || !resp.Close {
		t.Fatalf("oversized head = %d (close %v); want 431 and the connection closed", resp.StatusCode, resp.Close)
	}
	if !rc.closed() {
		t.Error("the connection stayed open after the 431")
	}
}

// TestBodiesInAndOutsideRawWait: requests with a body are served between requests without
// one: inside the raw read when the body came whole with the head, outside it (where the
// socket may be read) when it is chunked or follows the head.
func TestBodiesInAndOutsideRawWait(t *testing.T) {
	e, _, _ := pathEnv(t, "", envOptions{})
	rc := dialRaw(t, e.addr)
	rc.write(get("/first"))
	rc.expect(200, "GET /first ")
	rc.write("POST /len HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello")
	rc.expect(200, "POST /len hello")
	rc.write(get("/between"))
	rc.expect(200, "GET /between ")
	rc.write("POST /chunked HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
	rc.write("3\r\nabc\r\n")
	rc.write("0\r\n\r\n")
	rc.expect(200, "POST /chunked abc")
	rc.write("POST /late HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\n")
	rc.write("late")
	rc.write(get("/after")) // pipelined behind a body
	rc.expect(200, "POST /late late")
	rc.expect(200, "GET /after ")
}

// TestIdleTimeoutEndsRawWait: idle_timeout closes a connection that waits inside the raw
// read after requests were served there, counted in downstream_cx_idle_timeout.
func TestIdleTimeoutEndsRawWait(t *testing.T) {
	e, _, _ := pathEnv(t, "common_http_protocol_options: {idle_timeout: 0.3s}\n", envOptions{})
	rc := dialRaw(t, e.addr)
	for _, p := range []string{"/one", "/two"} {
		rc.write(get(p))
		rc.expect(200, "GET "+p+" ")
	}
	start := time.Now()
	if !rc.closed() {
		t.Fatal("the idle connection stayed open")
	}
	if got := time.Since(start); got < 250*time.Millisecond {
		t.Errorf("closed after %v; want the 0.3 s idle timeout", got)
	}
	waitStat(t, e, "http.ingress.downstream_cx_idle_timeout", 1)
}

// TestDrainEndsRawWait: a drain closes a connection that waits inside the raw read, and the
// connection counts in downstream_cx_drain_close.
func TestDrainEndsRawWait(t *testing.T) {
	e, _, _ := pathEnv(t, "", envOptions{drainTime: time.Minute, drainNow: true})
	rc := dialRaw(t, e.addr)
	for _, p := range []string{"/one", "/two"} {
		rc.write(get(p))
		rc.expect(200, "GET "+p+" ")
	}
	e.lm.DrainListeners(listener.DrainRequest{Graceful: true, SkipExit: true}, nil)
	if !rc.closed() {
		t.Fatal("the idle connection stayed open after the drain")
	}
	waitStat(t, e, "http.ingress.downstream_cx_drain_close", 1)
}

// TestPrefaceSplitGoesToHTTP2: a prior-knowledge HTTP/2 preface whose head comes in two
// writes (its second part read inside the raw wait) still hands the connection to the
// HTTP/2 server.
func TestPrefaceSplitGoesToHTTP2(t *testing.T) {
	e, _, _ := pathEnv(t, "", envOptions{})
	c, err := net.DialTimeout("tcp", e.addr, wait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(wait))
	io.WriteString(c, http2.ClientPreface[:8])
	// The first part is read before the rest is sent: the server's SETTINGS cannot come
	// before the whole preface, so wait for the proxy to count the received bytes.
	pollUntil(t, func() bool { return e.stat("http.ingress.downstream_cx_rx_bytes_total") >= 8 },
		func() string { return "the proxy did not read the first part of the preface" })
	tr := &http2.Transport{AllowHTTP: true}
	cc, err := tr.NewClientConn(&skipConn{Conn: c, skip: 8})
	if err != nil {
		t.Fatal(err)
	}
	code, body, err := h2Get(cc, e.addr)
	if err != nil || code != 200 || body != "GET / " {
		t.Fatalf("HTTP/2 request = %d %q, %v; want 200", code, body, err)
	}
	if got := e.stat("http.ingress.downstream_cx_http2_total"); got != 1 {
		t.Errorf("downstream_cx_http2_total = %d; want 1", got)
	}
}

// skipConn drops the first skip bytes written (already sent by hand).
type skipConn struct {
	net.Conn
	skip int
}

func (c *skipConn) Write(p []byte) (int, error) {
	if c.skip == 0 {
		return c.Conn.Write(p)
	}
	n := min(c.skip, len(p))
	c.skip -= n
	m, err := c.Conn.Write(p[n:])
	return n + m, err
}

// TestUpgradeAfterKeepAlive: a WebSocket upgrade on a connection that served a request (the
// upgrade's head read inside the raw wait; the tunnel reads the socket outside it) works.
func TestUpgradeAfterKeepAlive(t *testing.T) {
	upstream := wsEcho(t)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", upstream.Listener.Addr().String())},
		hcm:      upgradeHCM("", "upgrade_configs: [{upgrade_type: WebSocket}]\n"),
	})
	rc := dialRaw(t, e.addr)
	rc.write(get("/plain"))
	if resp, _ := rc.response(); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("first request = %d; want the upstream's 404 (WebSocket only)", resp.StatusCode)
	}
	rc.write("GET /chat HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade = %v, %v; want 101", resp, err)
	}
	// The echo server's greeting, an unmasked text frame "hello".
	frame := make([]byte, 7)
	if _, err := io.ReadFull(rc.br, frame); err != nil || string(frame[2:]) != "hello" {
		t.Fatalf("first frame = %q, %v; want the greeting", frame, err)
	}
	// A masked text frame "ping" (mask 0: the payload as is) comes back.
	rc.write("\x81\x84\x00\x00\x00\x00ping")
	echo := make([]byte, 6)
	if _, err := io.ReadFull(rc.br, echo); err != nil || string(echo[2:]) != "ping" {
		t.Fatalf("echo = %q, %v; want ping", echo, err)
	}
}

// TestRawWaitKeepsConnBytes: until a read of the connection came back short, bytes may wait
// in the connection itself (a listener filter's peeked bytes), so the connection is read
// through and the socket is not read directly past them.
func TestRawWaitKeepsConnBytes(t *testing.T) {
	server, _ := tcpPair(t)
	raw, err := server.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	const peeked = "GET /peeked HTTP/1.1\r\n\r\n"
	var rd reader
	rd.init(&pipeConn{Conn: server, r: strings.NewReader(peeked)}, raw, 4096, boundHCMStats())
	if rd.rawReady() {
		t.Fatal("the socket is read directly before the connection's own bytes")
	}
	if err := rd.fill(); err != nil {
		t.Fatalf("fill = %v", err)
	}
	if got := string(rd.Buffered()); got != peeked {
		t.Errorf("read = %q; want the connection's own bytes %q", got, peeked)
	}
	if !rd.rawReady() {
		t.Error("a short read of the connection did not let the socket be read directly")
	}
}

// tcpPair returns the two ends of a TCP connection on 127.0.0.1.
func tcpPair(t *testing.T) (server *net.TCPConn, client net.Conn) {
	c, s := nettest.TCPPair(t)
	return s, c
}

// TestPauseInsideRawWait: a request paused by a filter (on_demand) while it is served inside
// the raw read still has its client read meanwhile, on a duplicate of the socket: a request
// pipelined behind it is answered after it, and a client that closes ends the pause at once.
func TestPauseInsideRawWait(t *testing.T) {
	// start sends a request answered without a pause (no scope), then one that pauses.
	start := func(t *testing.T) (*env, *heldScopes, *routev3.RouteConfiguration, *rawConn, heldLoad) {
		e, f, routes := pauseEnv(t)
		rc := dialRaw(t, e.addr)
		rc.write("GET /unscoped HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, _ := rc.response(); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("unscoped request = %d; want 404", resp.StatusCode)
		}
		rc.write("GET /p HTTP/1.1\r\nHost: x\r\nX-Foo-Key: l\r\n\r\n")
		return e, f, routes, rc, recvLoad(t, f)
	}
	t.Run("pipelined", func(t *testing.T) {
		_, f, routes, rc, l := start(t)
		rc.write("GET /q HTTP/1.1\r\nHost: x\r\nX-Foo-Key: l\r\n\r\n")
		f.answer(l, routes)
		rc.expect(200, "GET 0:")
		rc.expect(200, "GET 0:")
	})
	t.Run("client gone", func(t *testing.T) {
		e, f, _, rc, _ := start(t)
		rc.c.Close()
		select {
		case key := <-f.cancels:
			if key != "l" {
				t.Errorf("withdrawn key = %q; want l", key)
			}
		case <-time.After(wait):
			t.Fatal("the pause did not end when the client left")
		}
		waitStat(t, e, "http.ingress.downstream_cx_destroy_remote_active_rq", 1)
	})
}
