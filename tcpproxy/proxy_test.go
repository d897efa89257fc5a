package tcpproxy

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"

	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/nettest"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/pool"
	"github.com/legateproxy/legate/stats"
)

// env is a cluster manager, its pool registry and the store.
type env struct {
	store *stats.Store
	cm    *cluster.Manager
	pools *pool.Registry
}

// newEnv builds static clusters "name=addr,addr;..." with the extra YAML for each cluster.
func newEnv(t *testing.T, extra string, clusters map[string][]string) *env {
	t.Helper()
	return newEnvTLS(t, extra, clusters, nil)
}

// newEnvTLS is newEnv whose pools connect with the TLS configuration upstreamTLS gives (nil:
// plain TCP).
func newEnvTLS(t *testing.T, extra string, clusters map[string][]string, upstreamTLS func(*config.Cluster, *host.Host) *tls.Config) *env {
	t.Helper()
	store, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var cfgs []*config.Cluster
	for name, addrs := range clusters {
		var b strings.Builder
		fmt.Fprintf(&b, "name: %s\ntype: STATIC\nconnect_timeout: 1s\n%s\nload_assignment:\n  cluster_name: %s\n  endpoints:\n  - lb_endpoints:\n", name, extra, name)
		for _, a := range addrs {
			h, p, _ := net.SplitHostPort(a)
			fmt.Fprintf(&b, "    - endpoint: {address: {socket_address: {address: %s, port_value: %s}}}\n", h, p)
		}
		js, err := yaml.YAMLToJSON([]byte(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		var pb clusterv3.Cluster
		if err := protojson.Unmarshal(js, &pb); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.ClusterFromProto(&pb, config.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		cfgs = append(cfgs, cfg)
	}
	cm, err := cluster.NewManager(cluster.ManagerConfig{Stats: store})
	if err != nil {
		t.Fatal(err)
	}
	if err := cm.AddStatic(cfgs); err != nil {
		t.Fatal(err)
	}
	pools, err := pool.NewRegistry(pool.RegistryConfig{Clusters: cm, Stats: store, TLS: upstreamTLS})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pools.Close)
	return &env{store: store, cm: cm, pools: pools}
}

// serveLocal accepts connections on 127.0.0.1 and serves each with p; it returns the address.
func serveLocal(t *testing.T, p *Proxy) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nettest.Serve(t, ln, p.Serve)
	return ln.Addr().String()
}

// upstream is a test server: echo copies back until EOF then half-closes; name writes its
// name and closes.
type upstream struct {
	ln    net.Listener
	wg    sync.WaitGroup
	conns chan net.Conn
}

func newUpstream(t *testing.T, serve func(c net.Conn)) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{ln: ln, conns: make(chan net.Conn, 100)}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.conns <- c
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				defer c.Close()
				serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for {
			select {
			case c := <-u.conns:
				c.Close()
				continue
			default:
			}
			break
		}
		u.wg.Wait()
	})
	return u
}

func (u *upstream) addr() string { return u.ln.Addr().String() }

func echo(c net.Conn) {
	io.Copy(c, c)
	c.(*net.TCPConn).CloseWrite()
	io.Copy(io.Discard, c)
}

// tcpProxyFromYAML decodes a TcpProxy.
func tcpProxyFromYAML(t *testing.T, yml string) *tcpproxyv3.TcpProxy {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(yml))
	if err != nil {
		t.Fatal(err)
	}
	var pb tcpproxyv3.TcpProxy
	if err := protojson.Unmarshal(js, &pb); err != nil {
		t.Fatal(err)
	}
	return &pb
}

func newProxy(t *testing.T, e *env, yml string, rnd func() uint64) *Proxy {
	t.Helper()
	return newProxyWith(t, e, yml, Config{Rand: rnd})
}

// newProxyWith builds a proxy from tcp_proxy YAML over e's pools; cfg holds the other Config
// fields.
func newProxyWith(t *testing.T, e *env, yml string, cfg Config) *Proxy {
	t.Helper()
	var err error
	if cfg.Proxy, err = config.TCPProxyFromProto(tcpProxyFromYAML(t, yml)); err != nil {
		t.Fatal(err)
	}
	cfg.Pools = e.pools
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// holdConn opens a connection to addr and waits until its first byte has gone through the
// proxy and back, so the connection is established upstream; it stays open.
func holdConn(t *testing.T, addr string) {
	t.Helper()
	held := dial(t, addr)
	io.WriteString(held, "x")
	held.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(held, make([]byte, 1)); err != nil {
		t.Fatalf("held connection: %v", err)
	}
}

// readAll reads until EOF with a deadline.
func readAll(t *testing.T, c net.Conn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading from the proxy: %v", err)
	}
	return string(b)
}

func dial(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

func TestEchoHalfClose(t *testing.T) {
	up := newUpstream(t, echo)
	e := newEnv(t, "", map[string][]string{"echo": {up.addr()}})
	p := newProxy(t, e, "{stat_prefix: t, cluster: echo}", nil)
	c := dial(t, serveLocal(t, p))
	io.WriteString(c, "hello, ")
	io.WriteString(c, "world")
	c.CloseWrite() // the upstream sees EOF, echoes everything and half-closes back
	if got := readAll(t, c); got != "hello, world" {
		t.Fatalf("echo = %q; want %q", got, "hello, world")
	}
	cst := e.cm.Get("echo").Stats()
	waitFor(t, "upstream connection closed", func() bool { return cst.UpstreamCxActive.Value() == 0 })
	st := p.Stats()
	got := []uint64{st.DownstreamCxTotal.Value(), st.DownstreamCxRxBytesTotal.Value(), st.DownstreamCxTxBytesTotal.Value(),
		cst.UpstreamCxTotal.Value(), cst.UpstreamCxTxBytesTotal.Value(), cst.UpstreamCxRxBytesTotal.Value(),
		st.DownstreamCxRxBytesBuffered.Value(), st.DownstreamCxTxBytesBuffered.Value()}
	want := []uint64{1, 12, 12, 1, 12, 12, 0, 0}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("downstream_cx_total, rx, tx, upstream_cx_total, upstream tx, rx, buffered rx, tx (-want +got):\n%s", d)
	}
}

// refusedAddr refuses connections: unprivileged processes cannot bind port 1. A closed
// ephemeral port could be taken by another test, or let the kernel connect a socket to itself.
const refusedAddr = "127.0.0.1:1"

func TestConnectionRefusals(t *testing.T) {
	dead := refusedAddr
	up := newUpstream(t, echo)
	tests := []struct {
		name      string
		extra     string
		proxy     string
		hold      bool // keep one proxied connection open first
		wantStats func(p *Proxy, c *cluster.Cluster) []uint64
		want      []uint64
	}{
		{
			name:  "no route",
			proxy: "{stat_prefix: t, cluster: missing}",
			wantStats: func(p *Proxy, c *cluster.Cluster) []uint64 {
				return []uint64{p.Stats().DownstreamCxTotal.Value(), p.Stats().DownstreamCxNoRoute.Value()}
			},
			want: []uint64{1, 1},
		},
		{
			name:  "connect attempts exceeded",
			proxy: "{stat_prefix: t, cluster: dead, max_connect_attempts: 3}",
			wantStats: func(p *Proxy, c *cluster.Cluster) []uint64 {
				st := c.Stats()
				return []uint64{st.UpstreamCxTotal.Value(), st.UpstreamCxConnectFail.Value(), st.UpstreamCxConnectAttemptsExceeded.Value()}
			},
			want: []uint64{3, 3, 1},
		},
		{
			name:  "max_connections",
			extra: "circuit_breakers: {thresholds: [{max_connections: 1}]}",
			proxy: "{stat_prefix: t, cluster: echo}",
			hold:  true,
			wantStats: func(p *Proxy, c *cluster.Cluster) []uint64 {
				st := c.Stats()
				return []uint64{st.UpstreamCxTotal.Value(), st.UpstreamCxOverflow.Value()}
			},
			want: []uint64{1, 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.extra, map[string][]string{"dead": {dead}, "echo": {up.addr()}})
			p := newProxy(t, e, tt.proxy, nil)
			addr := serveLocal(t, p)
			if tt.hold {
				holdConn(t, addr)
			}
			c := dial(t, addr)
			if got := readAll(t, c); got != "" {
				t.Errorf("refused connection read %q; want EOF", got)
			}
			name := "echo"
			if strings.Contains(tt.proxy, "dead") {
				name = "dead"
			}
			if d := cmp.Diff(tt.want, tt.wantStats(p, e.cm.Get(name))); d != "" {
				t.Errorf("stats (-want +got):\n%s", d)
			}
		})
	}
}

func TestWeightedClusters(t *testing.T) {
	named := func(name string) func(net.Conn) {
		return func(c net.Conn) { io.WriteString(c, name) }
	}
	a, b := newUpstream(t, named("a")), newUpstream(t, named("b"))
	e := newEnv(t, "", map[string][]string{"a": {a.addr()}, "b": {b.addr()}})
	var mu sync.Mutex
	draws := []uint64{0, 1, 3, 4}
	rnd := func() uint64 {
		mu.Lock()
		defer mu.Unlock()
		v := draws[0]
		draws = draws[1:]
		return v
	}
	p := newProxy(t, e, "{stat_prefix: w, weighted_clusters: {clusters: [{name: a, weight: 1}, {name: b, weight: 3}]}}", rnd)
	addr := serveLocal(t, p)
	var got []string
	for range 4 {
		got = append(got, readAll(t, dial(t, addr)))
	}
	if d := cmp.Diff([]string{"a", "b", "b", "a"}, got); d != "" {
		t.Errorf("clusters chosen (-want +got):\n%s", d)
	}
}

func TestIdleTimeout(t *testing.T) {
	up := newUpstream(t, echo)
	e := newEnv(t, "", map[string][]string{"echo": {up.addr()}})
	p := newProxy(t, e, "{stat_prefix: t, cluster: echo, idle_timeout: 0.05s}", nil)
	c := dial(t, serveLocal(t, p))
	io.WriteString(c, "ping")
	if got := readAll(t, c); got != "ping" {
		t.Fatalf("read %q before the idle close; want %q", got, "ping")
	}
	if got := p.Stats().IdleTimeout.Value(); got != 1 {
		t.Errorf("idle_timeout = %d; want 1", got)
	}
}

func TestCloseOnHostHealthFailure(t *testing.T) {
	up := newUpstream(t, echo)
	e := newEnv(t, "close_connections_on_host_health_failure: true", map[string][]string{"echo": {up.addr()}})
	p := newProxy(t, e, "{stat_prefix: t, cluster: echo}", nil)
	c := dial(t, serveLocal(t, p))
	io.WriteString(c, "x")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	h := e.cm.Get("echo").Snapshot().PrioritySet.Sets()[0].Hosts()[0]
	h.SetHealthFlag(host.FailedActiveHC)
	e.pools.Sync()
	if got := readAll(t, c); got != "" {
		t.Errorf("read %q; want EOF after the host failed", got)
	}
}

// TestThroughListener runs the proxy behind the real listener manager, configured from an
// Envoy listener with the tcp_proxy filter's typed_config.
func TestThroughListener(t *testing.T) {
	up := newUpstream(t, echo)
	e := newEnv(t, "", map[string][]string{"echo": {up.addr()}})
	addr := serveListener(t, e, Deps{Pools: e.pools}, `
name: tcp
address: {socket_address: {address: 127.0.0.1, port_value: 0}}
filter_chains:
- filters:
  - name: envoy.filters.network.tcp_proxy
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
      stat_prefix: echo_proxy
      cluster: echo
`)
	c := dial(t, addr)
	io.WriteString(c, "through the listener")
	c.CloseWrite()
	if got := readAll(t, c); got != "through the listener" {
		t.Fatalf("echo = %q; want %q", got, "through the listener")
	}
	var total uint64
	found := false
	e.store.Each(stats.KindSet(stats.KindCounter), func(st *stats.Stat) bool {
		if string(st.AppendName(nil)) == "tcp.echo_proxy.downstream_cx_total" {
			total, found = st.Value(), true
		}
		return true
	})
	if !found || total != 1 {
		t.Errorf("tcp.echo_proxy.downstream_cx_total = %d (registered %v); want 1", total, found)
	}
}

// TestFactoryTransportSockets checks which transport sockets a TCP proxy's filter chain may
// have: none, raw_buffer, or TLS with a certificate (terminated by the proxy).
func TestFactoryTransportSockets(t *testing.T) {
	e := newEnv(t, "", map[string][]string{"echo": {"127.0.0.1:1"}})
	alts, err := anypb.New(&tcpproxyv3.TcpProxy{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.TCPProxyFromProto(tcpProxyFromYAML(t, "{stat_prefix: t, cluster: echo}"))
	if err != nil {
		t.Fatal(err)
	}
	filters := []config.NetworkFilter{{Name: config.TCPProxyFilter, TypeURL: config.TCPProxyTypeURL, Config: cfg}}
	for _, tc := range []struct {
		name, socket string
		typed        *anypb.Any
		want         string
	}{
		{"tls without a certificate", "envoy.transport_sockets.tls", nil, `filter chain "c": transport_socket.typed_config.common_tls_context: no tls_certificates or tls_certificate_sds_secret_configs; a server context needs one`},
		{"unknown socket", "envoy.transport_sockets.alts", alts, `filter chain "c": transport_socket.typed_config.@type = "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy"; must be envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer or envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext`},
		{"raw buffer", "envoy.transport_sockets.raw_buffer", nil, ""},
		{"none", "", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := NewService(Deps{Pools: e.pools}).Handler(&listener.ChainContext{Chain: &config.FilterChain{Name: "c", Filters: filters, TransportSocket: tc.socket, TransportSocketConfig: tc.typed}}, cfg)
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				h.(io.Closer).Close()
			}
			if got != tc.want {
				t.Errorf("Factory() error = %q; want %q", got, tc.want)
			}
		})
	}
}

// waitFor polls cond until it holds or five seconds pass; for gauges another goroutine moves.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}
