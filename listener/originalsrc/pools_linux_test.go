package originalsrc_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/http2"

	"github.com/legateproxy/legate/internal/nettest"
)

// osrcHTTP is a listener with original_src whose connection manager routes every request to
// the cluster "up".
const osrcHTTP = `
name: osrc_http
address: {socket_address: {address: ` + legateAddr + `, port_value: 0}}
listener_filters:
- name: envoy.filters.listener.original_src
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.listener.original_src.v3.OriginalSrc, mark: ` + mark + `}
filter_chains:
- filters:
  - name: envoy.filters.network.http_connection_manager
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: osrc
      route_config: {virtual_hosts: [{name: all, domains: ["*"], routes: [{match: {prefix: /}, route: {cluster: up}}]}]}
      http_filters: [{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
`

// peers counts the connections an upstream accepted by peer address.
type peers struct {
	mu   sync.Mutex
	seen map[string]int
}

func (p *peers) add(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen == nil {
		p.seen = map[string]int{}
	}
	p.seen[addr]++
}

// count returns the number of connections accepted.
func (p *peers) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, k := range p.seen {
		n += k
	}
	return n
}

// checkPeers checks that each source's requests reached the upstream from that source's
// address, on one upstream connection per source that its later downstream connections
// reuse; seen[i] is the upstream's peer for a request of srcs[i].
func checkPeers(t *testing.T, srcs, seen []string, accepted int) {
	t.Helper()
	bySource := map[string]string{}
	for i, src := range srcs {
		host, _ := splitAddr(t, seen[i])
		if host != src {
			t.Fatalf("request %d from %s: upstream's peer = %s; want the client's address", i, src, seen[i])
		}
		if first, ok := bySource[src]; ok && first != seen[i] {
			t.Errorf("request %d from %s came on upstream connection %s; want %s, the pooled connection of that source", i, src, seen[i], first)
		}
		bySource[src] = seen[i]
	}
	if accepted != len(bySource) {
		t.Errorf("upstream connections = %d; want %d, one per client source", accepted, len(bySource))
	}
}

// testHTTP: an HTTP connection manager's upstream connections bind to the client's address,
// and the pool keeps them per client: each client's requests, from any of its downstream
// connections, reuse its own upstream connection, never another client's.
func testHTTP(t *testing.T) {
	var accepted peers
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.RemoteAddr+"\n")
	}))
	ln, err := net.Listen("tcp", legateAddr+":0")
	if err != nil {
		t.Fatal(err)
	}
	up.Listener.Close()
	up.Listener = ln
	up.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			accepted.add(c.RemoteAddr().String())
		}
	}
	up.Start()
	t.Cleanup(up.Close)
	l := newLegate(t, up.Listener.Addr().String(), "")
	if err := l.add(t, osrcHTTP); err != nil {
		t.Fatal(err)
	}
	addr := l.run(t, "osrc_http")
	// Two requests on each downstream connection; the third comes from the first client again
	// on a new downstream connection while the first is still open.
	srcs := []string{clientAddr, otherAddr, clientAddr}
	var order, seen []string
	for _, src := range srcs {
		c := dialAs(t, src, addr)
		br := bufio.NewReader(c)
		for range 2 {
			order = append(order, src)
			seen = append(seen, strings.TrimSuffix(nettest.Get(t, c, br, "up"), "\n"))
		}
	}
	checkPeers(t, order, seen, accepted.count())
}

// testTunnel: the TCP proxy's tunnels over a cluster's pooled HTTP/2 connections bind to
// their client's address, and a client's tunnels share its connection, never another's.
func testTunnel(t *testing.T) {
	var accepted peers
	ln, err := net.Listen("tcp", legateAddr+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http2.Server{}
	connect := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, r.RemoteAddr+"\n") // the tunnel's payload, then its end
	})
	nettest.Serve(t, ln, func(c net.Conn) {
		accepted.add(c.RemoteAddr().String())
		srv.ServeConn(c, &http2.ServeConnOpts{Handler: connect})
	})
	l := newLegate(t, ln.Addr().String(), `typed_extension_protocol_options: {envoy.extensions.upstreams.http.v3.HttpProtocolOptions: {"@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions, explicit_http_config: {http2_protocol_options: {}}}}`)
	if err := l.add(t, fmt.Sprintf(`
name: osrc_tunnel
address: {socket_address: {address: %s, port_value: 0}}
listener_filters:
- name: envoy.filters.listener.original_src
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.listener.original_src.v3.OriginalSrc, mark: %s}
filter_chains:
- filters:
  - name: envoy.filters.network.tcp_proxy
    typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: tun, cluster: up, tunneling_config: {hostname: "svc:443"}}
`, legateAddr, mark)); err != nil {
		t.Fatal(err)
	}
	addr := l.run(t, "osrc_tunnel")
	srcs := []string{clientAddr, otherAddr, clientAddr}
	var seen []string
	for _, src := range srcs {
		c := dialAs(t, src, addr) // kept open: the next tunnel opens beside it
		seen = append(seen, readLine(t, bufio.NewReader(c)))
	}
	checkPeers(t, srcs, seen, accepted.count())
}
