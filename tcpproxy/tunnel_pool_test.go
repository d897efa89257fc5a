package tcpproxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/legateproxy/legate/internal/nettest"
)

// TestTunnelsSharePooledH2Connection: HTTP/2 tunnels are streams of the cluster's pool. Two
// open at once share one upstream connection (the x/net/http2 server accepts one); with
// max_concurrent_streams 1 the second tunnel gets a connection of its own. The pool counts
// the streams (upstream_rq_total, upstream_rq_active).
func TestTunnelsSharePooledH2Connection(t *testing.T) {
	for _, tc := range []struct {
		name    string
		options string
		conns   uint64
	}{
		{"shared", "", 1},
		{"max_concurrent_streams 1", "max_concurrent_streams: 1", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { nettest.EchoBody(w, r) })
			srv := &http2.Server{}
			up := newUpstream(t, func(c net.Conn) { srv.ServeConn(c, &http2.ServeConnOpts{Handler: h}) })
			cluster := "typed_extension_protocol_options: {envoy.extensions.upstreams.http.v3.HttpProtocolOptions: " +
				"{\"@type\": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions, explicit_http_config: {http2_protocol_options: {" + tc.options + "}}}}"
			e := newEnv(t, cluster, map[string][]string{"proxy": {up.addr()}})
			p := newProxy(t, e, "{stat_prefix: tun, cluster: proxy, tunneling_config: {hostname: 'svc:443'}}", nil)
			addr := serveLocal(t, p)
			var clients []*net.TCPConn
			for _, msg := range []string{"first\n", "second\n"} {
				c := dial(t, addr)
				c.SetDeadline(time.Now().Add(10 * time.Second))
				io.WriteString(c, msg)
				if got, err := bufio.NewReader(c).ReadString('\n'); err != nil || got != msg {
					t.Fatalf("echo through tunnel = %q, %v; want %q", got, err, msg)
				}
				clients = append(clients, c) // kept open: the next tunnel opens beside it
			}
			cst := e.cm.Get("proxy").Stats()
			if got := []uint64{cst.UpstreamCxTotal.Value(), cst.UpstreamRqTotal.Value(), cst.UpstreamRqActive.Value(), uint64(len(up.conns))}; got[0] != tc.conns || got[1] != 2 || got[2] != 2 || got[3] != tc.conns {
				t.Errorf("upstream_cx_total, upstream_rq_total, upstream_rq_active, connections the server accepted = %v; want [%d 2 2 %d]", got, tc.conns, tc.conns)
			}
			for _, c := range clients {
				c.CloseWrite()
				if rest := readAll(t, c); rest != "" {
					t.Errorf("after the half-close the tunnel sent %q; want its end", rest)
				}
			}
			waitFor(t, "the tunnels' streams ended", func() bool { return cst.UpstreamRqActive.Value() == 0 })
		})
	}
}
