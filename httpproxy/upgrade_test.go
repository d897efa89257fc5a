package httpproxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/net/http2"

	"github.com/legateproxy/legate/internal/nettest"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// wsEcho is a WebSocket upstream: it greets each client with "hello", then echoes every
// message until the client closes (gorilla answers the close handshake).
func wsEcho(t testing.TB) *httptest.Server {
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !websocket.IsWebSocketUpgrade(r) {
			http.Error(w, "websocket only", http.StatusNotFound)
			return
		}
		c, err := up.Upgrade(w, r, http.Header{"X-Upstream": {"ws"}})
		if err != nil {
			return
		}
		defer c.Close()
		if c.WriteMessage(websocket.TextMessage, []byte("hello")) != nil {
			return
		}
		for {
			typ, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			if c.WriteMessage(typ, msg) != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// serveTCP runs handle for each connection to a new 127.0.0.1 listener, with a deadline of
// wait on the connection, closed when handle returns; it returns the listener's address.
func serveTCP(t testing.TB, handle func(c net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nettest.Serve(t, ln, func(c net.Conn) {
		defer c.Close()
		c.SetDeadline(time.Now().Add(wait))
		handle(c)
	})
	return ln.Addr().String()
}

// tcpEcho is a TCP upstream that echoes bytes and half-closes when its peer does.
func tcpEcho(t testing.TB) string {
	return serveTCP(t, func(c net.Conn) {
		io.Copy(c, c)
		c.(*net.TCPConn).CloseWrite()
	})
}

// upgradeHCM routes "/" to cluster web with route action fields action, and has the
// connection manager fields extra (upgrade_configs, access_log, …).
func upgradeHCM(action, extra string) string {
	return fmt.Sprintf(`stat_prefix: ingress
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: {connect_matcher: {}}
      route: {cluster: web, upgrade_configs: [{upgrade_type: CONNECT, connect_config: {}}]}
    - match: {prefix: "/"}
      route: {cluster: web %s}
%s
`, action, extra)
}

// dialWS opens a WebSocket through the proxy.
func dialWS(t *testing.T, addr, path string) (*websocket.Conn, *http.Response) {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: wait}
	c, resp, err := d.Dial("ws://"+addr+path, nil)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("Dial(%s) = %v (status %d)", path, err, status)
	}
	t.Cleanup(func() { c.Close() })
	c.SetReadDeadline(time.Now().Add(wait))
	return c, resp
}

// readWS reads one message and checks it.
func readWS(t *testing.T, c *websocket.Conn, wantType int, want string) {
	t.Helper()
	typ, msg, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("ReadMessage() = %v; want %q", err, want)
	}
	if typ != wantType || string(msg) != want {
		t.Fatalf("ReadMessage() = %d %q; want %d %q", typ, msg, wantType, want)
	}
}

// TestWebSocketThroughProxy runs a real WebSocket client and server through a listener with
// upgrade_configs websocket: the upstream's 101 reaches the client, messages cross both ways,
// the close handshake completes, and the upgrade, cluster connection and access log are
// accounted as Envoy accounts them.
func TestWebSocketThroughProxy(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "access.log")
	upstream := wsEcho(t)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", upstream.Listener.Addr().String())},
		hcm: upgradeHCM("", "upgrade_configs: [{upgrade_type: WebSocket}]\naccess_log:"+
			fileLogYAML(logPath, "%RESPONSE_CODE% %RESPONSE_CODE_DETAILS% %RESPONSE_FLAGS% rx=%BYTES_RECEIVED% tx=%BYTES_SENT% %UPSTREAM_HOST%\n", "")),
	})
	c, resp := dialWS(t, e.addr, "/chat")
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("X-Upstream") != "ws" {
		t.Fatalf("handshake = %d %v; want 101 with the upstream's headers", resp.StatusCode, resp.Header)
	}
	if got := e.stat("http.ingress.downstream_cx_upgrades_active"); got != 1 {
		t.Errorf("downstream_cx_upgrades_active = %d during the session; want 1", got)
	}
	readWS(t, c, websocket.TextMessage, "hello")
	for i, m := range []string{"one", strings.Repeat("x", 100000), "three"} {
		typ := websocket.TextMessage
		if i == 1 {
			typ = websocket.BinaryMessage
		}
		if err := c.WriteMessage(typ, []byte(m)); err != nil {
			t.Fatal(err)
		}
		readWS(t, c, typ, m)
	}
	if err := c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye")); err != nil {
		t.Fatal(err)
	}
	_, _, err := c.ReadMessage()
	if !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
		t.Fatalf("ReadMessage() after close = %v; want the server's close frame (1000)", err)
	}
	c.Close()
	waitStat(t, e, "cluster.web.upstream_cx_destroy", 1)
	pollUntil(t, func() bool { return e.stat("http.ingress.downstream_cx_upgrades_active") == 0 },
		func() string { return "downstream_cx_upgrades_active stays above 0 after the session" })
	for name, want := range map[string]uint64{
		"http.ingress.downstream_cx_upgrades_total": 1,
		"http.ingress.downstream_rq_1xx":            1,
		"cluster.web.upstream_cx_total":             1,
		"cluster.web.upstream_cx_active":            0,
		"cluster.web.upstream_rq_total":             1,
		"cluster.web.upstream_rq_101":               1,
	} {
		if got := e.stat(name); got != want {
			t.Errorf("%s = %d; want %d", name, got, want)
		}
	}
	line := oneLogLine(t, e, logPath)
	var code int
	var details, flags string
	var rx, tx int
	var host string
	if _, err := fmt.Sscanf(line, "%d %s %s rx=%d tx=%d %s", &code, &details, &flags, &rx, &tx, &host); err != nil {
		t.Fatalf("access log line %q: %v", line, err)
	}
	if code != 101 || details != "via_upstream" || flags != "-" || host != upstream.Listener.Addr().String() {
		t.Errorf("access log = %q; want 101 via_upstream - ... %s", line, upstream.Listener.Addr())
	}
	if rx < 100000 || tx < 100000 {
		t.Errorf("access log bytes rx=%d tx=%d; want both over the 100000-byte message", rx, tx)
	}
}

// oneLogLine waits for the access log at path to hold one line (the stream logs once it
// ends, after the client has seen its end) and returns it.
func oneLogLine(t *testing.T, e *env, path string) string {
	t.Helper()
	var lines []string
	pollUntil(t, func() bool { lines = e.readLog(t, path); return len(lines) == 1 },
		func() string { return fmt.Sprintf("access log = %q; want one line", lines) })
	return lines[0]
}

// dialProxy connects to addr; the connection closes when the test ends and fails its reads
// and writes after wait.
func dialProxy(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(wait))
	return nc
}

// rawRequest sends a request head on a new connection and reads the response head.
func rawRequest(t *testing.T, addr, head string) (*http.Response, *bufio.Reader, net.Conn) {
	t.Helper()
	nc := dialProxy(t, addr)
	if _, err := io.WriteString(nc, head); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	method, _, _ := strings.Cut(head, " ")
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading the response to %q: %v", head, err)
	}
	return resp, br, nc
}

// headerRecorder is an upstream that records the headers of each request it answers (200).
type headerRecorder struct {
	*httptest.Server
	got chan http.Header
}

func newHeaderRecorder(t *testing.T) *headerRecorder {
	r := &headerRecorder{got: make(chan http.Header, 8)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.got <- req.Header.Clone()
		io.WriteString(w, "plain")
	}))
	t.Cleanup(r.Close)
	return r
}

// TestUpgradeRefused checks Envoy's decisions for upgrade requests: without an enabled
// upgrade config (the connection manager's, or the route's overriding it) the request gets
// 403 with upgrade_failed and never reaches the upstream; an h2c upgrade is stripped and the
// request served as plain HTTP/1.1.
func TestUpgradeRefused(t *testing.T) {
	tests := []struct {
		name       string
		action     string // route action fields
		hcm        string // connection manager fields
		head       string
		wantStatus int
	}{
		{name: "no upgrade configs", head: "GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", wantStatus: 403},
		{name: "other type configured", hcm: "upgrade_configs: [{upgrade_type: spdy/3}]",
			head: "GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n", wantStatus: 403},
		{name: "disabled by the connection manager", hcm: "upgrade_configs: [{upgrade_type: websocket, enabled: false}]",
			head: "GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n", wantStatus: 403},
		{name: "disabled by the route", action: ", upgrade_configs: [{upgrade_type: websocket, enabled: false}]", hcm: "upgrade_configs: [{upgrade_type: websocket}]",
			head: "GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n", wantStatus: 403},
		{name: "CONNECT without config", head: "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", wantStatus: 403},
		{name: "h2c stripped", head: "GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n", wantStatus: 200},
		{name: "upgrade without connection token", head: "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n", wantStatus: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newHeaderRecorder(t)
			hcm := upgradeHCM(tt.action, tt.hcm)
			if strings.HasPrefix(tt.head, "CONNECT") {
				hcm = simpleHCM("web", "")
			}
			e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", rec.Listener.Addr().String())}, hcm: hcm})
			resp, _, _ := rawRequest(t, e.addr, tt.head)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d; want %d", resp.StatusCode, tt.wantStatus)
			}
			if tt.wantStatus == http.StatusForbidden {
				if got := e.stat("http.ingress.downstream_rq_ws_on_non_ws_route"); got != 1 {
					t.Errorf("downstream_rq_ws_on_non_ws_route = %d; want 1", got)
				}
				if got := e.stat("cluster.web.upstream_cx_total"); got != 0 {
					t.Errorf("upstream_cx_total = %d; want 0: a refused upgrade must not reach the upstream", got)
				}
				return
			}
			h := <-rec.got
			for _, k := range []string{"Upgrade", "Http2-Settings"} {
				if v, ok := h[k]; ok {
					t.Errorf("upstream saw %s: %q; want it stripped", k, v)
				}
			}
			if got := e.stat("http.ingress.downstream_cx_upgrades_total"); got != 0 {
				t.Errorf("downstream_cx_upgrades_total = %d; want 0", got)
			}
		})
	}
}

// TestUpgradeRefusedDetails checks the access log of a refused upgrade: 403 upgrade_failed.
func TestUpgradeRefusedDetails(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "access.log")
	rec := newHeaderRecorder(t)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", rec.Listener.Addr().String())},
		hcm:      upgradeHCM("", "access_log:"+fileLogYAML(logPath, "%RESPONSE_CODE% %RESPONSE_CODE_DETAILS%\n", "")),
	})
	rawRequest(t, e.addr, "GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n")
	if line := oneLogLine(t, e, logPath); line != "403 upgrade_failed" {
		t.Errorf("access log = %q; want %q", line, "403 upgrade_failed")
	}
}

// TestUpgradeEnabledByRouteOnly checks that a route's upgrade_configs enable an upgrade the
// connection manager does not list.
func TestUpgradeEnabledByRouteOnly(t *testing.T) {
	upstream := wsEcho(t)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", upstream.Listener.Addr().String())},
		hcm:      upgradeHCM(", upgrade_configs: [{upgrade_type: websocket}]", ""),
	})
	c, _ := dialWS(t, e.addr, "/")
	readWS(t, c, websocket.TextMessage, "hello")
}

// TestUpgradeAnsweredWithoutSwitching checks that an upstream that does not switch
// protocols has its answer forwarded as a normal response.
func TestUpgradeAnsweredWithoutSwitching(t *testing.T) {
	rec := newHeaderRecorder(t)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", rec.Listener.Addr().String())},
		hcm:      upgradeHCM("", "upgrade_configs: [{upgrade_type: websocket}]"),
	})
	resp, br, _ := rawRequest(t, e.addr, "GET /x HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n")
	body, err := io.ReadAll(io.LimitReader(br, resp.ContentLength))
	if resp.StatusCode != http.StatusOK || err != nil || string(body) != "plain" {
		t.Fatalf("response = %d %q (%v); want 200 \"plain\"", resp.StatusCode, body, err)
	}
	h := <-rec.got
	if h.Get("Upgrade") != "websocket" || !strings.EqualFold(h.Get("Connection"), "upgrade") {
		t.Errorf("upstream headers %v; want Upgrade: websocket and Connection: upgrade forwarded", h)
	}
	if got := e.stat("cluster.web.upstream_rq_200"); got != 1 {
		t.Errorf("upstream_rq_200 = %d; want 1", got)
	}
}

// TestWebSocketIdleTimeout checks that a tunnel without traffic for the route's idle_timeout
// is closed and counted as a stream idle timeout.
func TestWebSocketIdleTimeout(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "access.log")
	upstream := wsEcho(t)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", upstream.Listener.Addr().String())},
		hcm: upgradeHCM(", idle_timeout: 0.2s", "upgrade_configs: [{upgrade_type: websocket}]\naccess_log:"+
			fileLogYAML(logPath, "%RESPONSE_CODE% %RESPONSE_FLAGS%\n", "")),
	})
	c, _ := dialWS(t, e.addr, "/")
	readWS(t, c, websocket.TextMessage, "hello")
	start := time.Now()
	if _, _, err := c.ReadMessage(); err == nil {
		t.Fatal("ReadMessage() = nil error; want the connection closed by the idle timeout")
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("closed after %v; want the 200ms idle timeout", d)
	}
	waitStat(t, e, "http.ingress.downstream_rq_idle_timeout", 1)
	if line := oneLogLine(t, e, logPath); line != "101 SI" {
		t.Errorf("access log = %q; want %q", line, "101 SI")
	}
}

// TestConnectTerminatedHTTP1 sends an HTTP/1.1 CONNECT to a connect_matcher route with
// connect_config: Legate answers 200, bytes reach a TCP echo and come back, and the client's
// half-close travels to the upstream and back.
func TestConnectTerminatedHTTP1(t *testing.T) {
	echoAddr := tcpEcho(t)
	e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", echoAddr)}, hcm: upgradeHCM("", "")})
	resp, br, nc := rawRequest(t, e.addr, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\nearly ")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT status = %d; want 200", resp.StatusCode)
	}
	if te, cl := resp.Header.Get("Transfer-Encoding"), resp.Header.Get("Content-Length"); te != "" || cl != "" {
		t.Errorf("CONNECT response framing: transfer-encoding %q, content-length %q; want none", te, cl)
	}
	if _, err := io.WriteString(nc, "bytes"); err != nil {
		t.Fatal(err)
	}
	nc.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(br)
	if err != nil || string(got) != "early bytes" {
		t.Fatalf("tunnel read %q (%v); want %q then EOF", got, err, "early bytes")
	}
	waitStat(t, e, "cluster.web.upstream_cx_destroy", 1)
	if got := e.stat("http.ingress.downstream_cx_upgrades_total"); got != 1 {
		t.Errorf("downstream_cx_upgrades_total = %d; want 1", got)
	}
}

// TestConnectTerminatedHTTP2 sends an HTTP/2 CONNECT (x/net/http2 client, prior knowledge)
// and exchanges bytes with a TCP echo through the stream.
func TestConnectTerminatedHTTP2(t *testing.T) {
	echoAddr := tcpEcho(t)
	e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", echoAddr)}, hcm: upgradeHCM("", "")})
	h2 := &http2.Transport{AllowHTTP: true}
	conn, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := h2.NewClientConn(conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	pr, pw := io.Pipe()
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Host: "example.com:443"}, Host: "example.com:443", Header: http.Header{}, Body: pr}
	resp, err := cc.RoundTrip(req)
	if err != nil {
		t.Fatalf("CONNECT: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT status = %d; want 200", resp.StatusCode)
	}
	buf := make([]byte, 5)
	for _, m := range []string{"first", "again"} {
		if _, err := io.WriteString(pw, m); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != m {
			t.Fatalf("tunnel read %q (%v); want %q", buf, err, m)
		}
	}
	pw.Close() // END_STREAM: the upstream is half-closed, the echo closes, the stream ends
	if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) != 0 {
		t.Fatalf("after END_STREAM read %q (%v); want EOF", rest, err)
	}
	waitStat(t, e, "cluster.web.upstream_cx_destroy", 1)
}

// TestConnectAllowPost checks connect_config.allow_post: a POST on the route is tunnelled to
// the host as raw bytes (its body upstream, the upstream's bytes as the response body).
func TestConnectAllowPost(t *testing.T) {
	echoAddr := tcpEcho(t)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", echoAddr)},
		hcm:      upgradeHCM(", upgrade_configs: [{upgrade_type: CONNECT, connect_config: {allow_post: true}}]", ""),
	})
	resp, _, _ := rawRequest(t, e.addr, "POST /tunnel HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\nhello world")
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || err != nil || string(body) != "hello world" {
		t.Fatalf("POST = %d %q (%v); want 200 and the body echoed until the tunnel closes", resp.StatusCode, body, err)
	}
	if got := e.stat("cluster.web.upstream_cx_total"); got != 1 {
		t.Errorf("upstream_cx_total = %d; want 1", got)
	}
}

// forwardProxy is a scripted upstream HTTP proxy: it answers a CONNECT request head with
// "200 Connection established" and then echoes the tunnel's bytes; the request line it got
// is sent on heads.
func forwardProxy(t *testing.T, heads chan<- string) string {
	return serveTCP(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		heads <- req.Method + " " + req.RequestURI + " host=" + req.Host
		io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
		io.Copy(c, br)
		c.(*net.TCPConn).CloseWrite()
	})
}

// TestConnectForwardedUpstream checks a CONNECT route without connect_config: the CONNECT
// goes to the upstream as a request, its 200 opens the tunnel, and bytes cross both ways.
func TestConnectForwardedUpstream(t *testing.T) {
	heads := make(chan string, 1)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", forwardProxy(t, heads))},
		hcm: `stat_prefix: ingress
upgrade_configs: [{upgrade_type: CONNECT}]
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: {connect_matcher: {}}
      route: {cluster: web}
`,
	})
	resp, br, nc := rawRequest(t, e.addr, "CONNECT backend.example:8443 HTTP/1.1\r\nHost: backend.example:8443\r\n\r\n")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT status = %d; want the upstream's 200", resp.StatusCode)
	}
	if got, want := <-heads, "CONNECT backend.example:8443 host=backend.example:8443"; got != want {
		t.Errorf("upstream got %q; want %q", got, want)
	}
	io.WriteString(nc, "through")
	nc.(*net.TCPConn).CloseWrite()
	if got, err := io.ReadAll(br); err != nil || string(got) != "through" {
		t.Fatalf("tunnel read %q (%v); want %q then EOF", got, err, "through")
	}
	if got := e.stat("cluster.web.upstream_rq_200"); got != 1 {
		t.Errorf("upstream_rq_200 = %d; want 1", got)
	}
}

// TestWebSocketOverTLS runs a WebSocket (wss) through a TLS listener: the tunnel carries
// the TLS connection's plaintext and the close handshake completes.
func TestWebSocketOverTLS(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "test ca"})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	upstream := wsEcho(t)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", upstream.Listener.Addr().String())},
		hcm:      upgradeHCM("", "upgrade_configs: [{upgrade_type: websocket}]"),
		tls:      downstreamTLSSocket(t, ca),
	})
	d := websocket.Dialer{HandshakeTimeout: wait, TLSClientConfig: &tls.Config{RootCAs: roots}}
	c, _, err := d.Dial("wss://"+e.addr+"/secure", nil)
	if err != nil {
		t.Fatalf("Dial(wss) = %v", err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(wait))
	readWS(t, c, websocket.TextMessage, "hello")
	c.WriteMessage(websocket.TextMessage, []byte("secret"))
	readWS(t, c, websocket.TextMessage, "secret")
	c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	if _, _, err := c.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
		t.Fatalf("ReadMessage() after close = %v; want the server's close frame", err)
	}
	if got := e.stat("http.ingress.downstream_cx_upgrades_total"); got != 1 {
		t.Errorf("downstream_cx_upgrades_total = %d; want 1", got)
	}
}

// TestUpgradeWithChunkedBody checks that an HTTP/1.1 upgrade request with a chunked body
// reaches the upstream still chunked, so that its parser finds the body's end, and that the
// upstream's answer comes back.
func TestUpgradeWithChunkedBody(t *testing.T) {
	bodies := make(chan string, 1)
	addr := serveTCP(t, func(c net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		b, _ := io.ReadAll(req.Body)
		bodies <- string(b)
		io.WriteString(c, "HTTP/1.1 426 Upgrade Required\r\ncontent-length: 2\r\n\r\nno")
	})
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", addr)},
		hcm:      upgradeHCM("", "upgrade_configs: [{upgrade_type: websocket}]"),
	})
	resp, _, _ := rawRequest(t, e.addr, "POST / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: websocket\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
	if resp.StatusCode != http.StatusUpgradeRequired {
		t.Fatalf("status = %d; want the upstream's 426", resp.StatusCode)
	}
	if got := <-bodies; got != "hello" {
		t.Errorf("upstream read body %q; want %q", got, "hello")
	}
}
