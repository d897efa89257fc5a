package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/legateproxy/legate/internal/nettest"
)

// Issue 20 item 3: envoy.filters.listener.original_src on a listener whose chain is the HTTP
// connection manager. The upstream connections of a client's requests bind to the client's
// address, and the pools are keyed by it, so two clients never share an upstream connection.

// httpChainTo is a listener's filter_chains (YAML, at a listener's indentation): one HTTP
// connection manager with stat_prefix prefix routing every request to cluster.
func httpChainTo(prefix, cluster string) string {
	return fmt.Sprintf(`    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: %s
          route_config:
            virtual_hosts: [{name: all, domains: ["*"], routes: [{match: {prefix: "/"}, route: {cluster: %s}}]}]
          http_filters: [{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
`, prefix, cluster)
}

// TestOriginalSrcHTTP runs the binary in a network namespace of its own, where 127.0.0.2 and
// 127.0.0.3 are two clients on the loopback: each client's requests reach the upstream from
// its own address, on one upstream connection per client that its later downstream
// connections reuse. It skips, saying why, where the machine cannot make the namespace or
// Legate may not set IP_TRANSPARENT (root, CAP_NET_ADMIN).
func TestOriginalSrcHTTP(t *testing.T) {
	if os.Getenv(envInNetns) == "" {
		if os.Geteuid() != 0 {
			t.Skip("original_src needs root (CAP_NET_ADMIN) for IP_TRANSPARENT and a network namespace of the test's own")
		}
		for _, tool := range []string{"unshare", "ip"} {
			if _, err := exec.LookPath(tool); err != nil {
				t.Skipf("%s not found: the test runs in a network namespace of its own (unshare, ip)", tool)
			}
		}
		if out, err := exec.Command("unshare", "--net", "true").CombinedOutput(); err != nil {
			t.Skipf("cannot create a network namespace (unshare --net: %v: %s)", err, out)
		}
		rerunInNetns(t)
		return
	}
	// Fixed ports: the namespace is this test's own.
	const upstreamPort, listenPort = 8080, 15001
	mustRun(t, "ip", "link", "set", "lo", "up")
	var mu sync.Mutex
	accepted := 0
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(upstreamPort))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.RemoteAddr) }),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				mu.Lock()
				accepted++
				mu.Unlock()
			}
		},
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	cfg := fmt.Sprintf(`
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:
  - name: osrc
    address: {socket_address: {address: 127.0.0.1, port_value: %d}}
    listener_filters:
    - name: envoy.filters.listener.original_src
      typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.listener.original_src.v3.OriginalSrc, mark: 123}
`+httpChainTo("osrc", "up")+`  clusters:
  - name: up
    connect_timeout: 1s
    load_assignment:
      cluster_name: up
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %d}}}}]}]
`, listenPort, upstreamPort)
	start(t, "-c", writeConfig(t, cfg))

	listen := "127.0.0.1:" + strconv.Itoa(listenPort)
	conn := map[string]string{} // the upstream connection (its peer) of each client
	for _, client := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.2"} {
		d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(client)}}
		c, err := d.Dial("tcp", listen)
		if err != nil {
			t.Fatalf("dial %s from %s: %v", listen, client, err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		for range 2 {
			peer := nettest.Get(t, c, br, "up")
			if host, _, _ := net.SplitHostPort(peer); host != client {
				t.Fatalf("request from %s: upstream's peer = %s; want the client's address", client, peer)
			}
			if first, ok := conn[client]; ok && first != peer {
				t.Errorf("request from %s came on upstream connection %s; want %s, that client's pooled connection", client, peer, first)
			}
			conn[client] = peer
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if accepted != 2 {
		t.Errorf("upstream connections = %d; want 2, one per client", accepted)
	}
}
