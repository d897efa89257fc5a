package tcpproxy

import (
	"io"
	"net"
	"net/http"
	"testing"

	"golang.org/x/net/http2"

	"github.com/legateproxy/legate/internal/nettest"
)

// propagatingHandler answers a tunnel's request with 200 and x-tunnel: <method>, echoes its
// payload and ends with the trailer x-done: yes; an HTTP/1.1 CONNECT is answered raw on the
// hijacked connection (no trailers: its payload is not a body).
var propagatingHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect && r.ProtoMajor == 1 {
		hijackEcho(w, "HTTP/1.1 200 Connection established\r\nX-Tunnel: CONNECT\r\n\r\n")
		return
	}
	if r.ProtoMajor == 1 {
		http.NewResponseController(w).EnableFullDuplex()
	}
	w.Header().Set("X-Tunnel", r.Method)
	w.Header().Set("Trailer", "X-Done")
	nettest.EchoBody(w, r)
	w.Header().Set("X-Done", "yes")
})

func propagatingH1Server(t *testing.T) string { return serveHTTP1(t, propagatingHandler) }

func propagatingH2Server(t *testing.T) string {
	t.Helper()
	srv := &http2.Server{}
	up := newUpstream(t, func(c net.Conn) { srv.ServeConn(c, &http2.ServeConnOpts{Handler: propagatingHandler}) })
	return up.addr()
}

// TestTunnelPropagatesResponseHeaders: with propagate_response_headers and _trailers, the
// tunnel's answer (status and headers, then the trailers at the end of its body) goes into
// the downstream connection's filter state, where the TCP proxy's access log reads it
// (%FILTER_STATE(...:FIELD:...)%, and the typed HeaderMap); without them nothing is there.
func TestTunnelPropagatesResponseHeaders(t *testing.T) {
	const format = "%FILTER_STATE(envoy.tcp_proxy.propagate_response_headers:FIELD::status)% " +
		"%FILTER_STATE(envoy.tcp_proxy.propagate_response_headers:FIELD:x-tunnel)% " +
		"%FILTER_STATE(envoy.tcp_proxy.propagate_response_trailers:FIELD:x-done)%\n"
	propagate := ", propagate_response_headers: true, propagate_response_trailers: true"
	tests := []struct {
		name, cluster, tunnel string
		server                func(*testing.T) string
		want                  string
	}{
		{"HTTP/1.1 CONNECT", "", propagate, propagatingH1Server, "200 CONNECT -"},
		{"HTTP/1.1 POST", "", ", use_post: true" + propagate, propagatingH1Server, "200 POST yes"},
		{"HTTP/2 CONNECT", h2Cluster, propagate, propagatingH2Server, "200 CONNECT yes"},
		{"HTTP/2 POST", h2Cluster, ", use_post: true" + propagate, propagatingH2Server, "200 POST yes"},
		{"not propagated", h2Cluster, "", propagatingH2Server, "- - -"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.cluster, map[string][]string{"proxy": {tc.server(t)}})
			logs := newLogFiles(t)
			p := newLoggingProxy(t, e, `{stat_prefix: tun, cluster: proxy, tunneling_config: {hostname: "svc:443"`+tc.tunnel+`},
access_log: [`+fileLog(logs.path("a.log"), format, "")+`]}`, AccessLogDeps{Files: logs.Manager})
			roundTripEcho(t, serveLocal(t, p), "through the tunnel")
			if got := logs.lines(t, "a.log", 1)[0]; got != tc.want {
				t.Errorf("access log line = %q; want %q", got, tc.want)
			}
		})
	}
}

// TestTunnelPropagatedHeadersTyped: the typed serialization of the propagated headers is
// Envoy's HeaderMap as JSON, ":status" first, and a refused tunnel's answer is propagated
// too, so the log says why it failed.
func TestTunnelPropagatedHeadersTyped(t *testing.T) {
	up := newUpstream(t, func(c net.Conn) {
		buf := make([]byte, 4096)
		c.Read(buf) // the CONNECT head
		io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nX-Reason: policy\r\nContent-Length: 0\r\n\r\n")
	})
	e := newEnv(t, "", map[string][]string{"proxy": {up.addr()}})
	logs := newLogFiles(t)
	p := newLoggingProxy(t, e, `{stat_prefix: tun, cluster: proxy, tunneling_config: {hostname: "svc:443", propagate_response_headers: true},
access_log: [`+fileLog(logs.path("a.log"), "%FILTER_STATE(envoy.tcp_proxy.propagate_response_headers)% %FILTER_STATE(envoy.tcp_proxy.propagate_response_headers:PLAIN)%\n", "")+`]}`, AccessLogDeps{Files: logs.Manager})
	c := dial(t, serveLocal(t, p))
	if got := readAll(t, c); got != "" {
		t.Fatalf("refused tunnel sent %q downstream; want nothing", got)
	}
	want := `{"headers":[{"key":":status","value":"403"},{"key":"content-length","value":"0"},{"key":"x-reason","value":"policy"}]} -`
	if got := logs.lines(t, "a.log", 1)[0]; got != want {
		t.Errorf("access log line = %q; want %q", got, want)
	}
}
