package udpproxy

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	udpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/clock/clocktest"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/stats"
)

// wait bounds waits for what should happen at once.
const wait = 10 * time.Second

func decode(t *testing.T, y string, m proto.Message) {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if err := protojson.Unmarshal(js, m); err != nil {
		t.Fatal(err)
	}
}

// udpEcho is a UDP server on 127.0.0.1 that sends each datagram back prefixed with its
// name; it returns its address.
func udpEcho(t *testing.T, name string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 65536)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(append([]byte(name+":"), buf[:n]...), from)
		}
	}()
	t.Cleanup(func() {
		pc.Close()
		wg.Wait()
	})
	return pc.LocalAddr().String()
}

// env is a cluster manager with static cluster "up" and a listener manager serving one UDP
// listener with the udp_proxy config given.
type env struct {
	store *stats.Store
	cm    *cluster.Manager
	clk   *clocktest.Fake
	addr  string // the UDP listener's address
}

func newEnv(t *testing.T, clusterExtra, proxy string, hosts ...string) *env {
	t.Helper()
	store, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "{name: up, type: STATIC, connect_timeout: 1s, %s load_assignment: {cluster_name: up, endpoints: [{lb_endpoints: [", clusterExtra)
	for i, h := range hosts {
		host, port, _ := net.SplitHostPort(h)
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "{endpoint: {address: {socket_address: {address: %s, port_value: %s}}}}", host, port)
	}
	b.WriteString("]}]}}")
	var cpb clusterv3.Cluster
	decode(t, b.String(), &cpb)
	ccfg, err := config.ClusterFromProto(&cpb, config.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := cluster.NewManager(cluster.ManagerConfig{Stats: store})
	if err != nil {
		t.Fatal(err)
	}
	if err := cm.AddStatic([]*config.Cluster{ccfg}); err != nil {
		t.Fatal(err)
	}
	var lpb listenerv3.Listener
	decode(t, `{name: udp, address: {socket_address: {protocol: UDP, address: 127.0.0.1, port_value: 0}},
listener_filters: [{name: envoy.filters.udp_listener.udp_proxy, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.udp.udp_proxy.v3.UdpProxyConfig, `+proxy+`}}]}`, &lpb)
	ext, err := registry.Of(Register)
	if err != nil {
		t.Fatal(err)
	}
	l, err := config.ListenerFromProto(&lpb, config.Limits{Extensions: ext})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktest.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	files := accesslog.NewManager(accesslog.FileOptions{MinFlushSize: 1, Clock: clk}) // every line written at once
	lm, err := listener.NewManager(listener.ManagerConfig{Stats: store, Clock: clk, Extensions: ext,
		Services: listener.Services{config.UDPProxyFilter: NewService(Deps{Clusters: cm, Clock: clk, Files: files})}})
	if err != nil {
		t.Fatal(err)
	}
	if err := lm.AddStatic([]*config.Listener{l}); err != nil {
		t.Fatal(err)
	}
	if err := lm.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		lm.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		files.Close()
	})
	return &env{store: store, cm: cm, clk: clk, addr: lm.Addrs()["udp"][0].String()}
}

// stat reads a counter or gauge by name.
func (e *env) stat(name string) uint64 {
	var v uint64
	e.store.Each(stats.KindSet(stats.KindCounter, stats.KindGauge), func(st *stats.Stat) bool {
		if st.Name() == name {
			v += st.Value()
		}
		return true
	})
	return v
}

// client is a UDP socket talking to the proxy.
func client(t *testing.T, addr string) *net.UDPConn {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.UDPConn)
}

// exchange sends msg and returns the answer.
func exchange(t *testing.T, c *net.UDPConn, msg string) string {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 65536)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("reading the answer to %q: %v", msg, err)
	}
	return string(buf[:n])
}

// waitFor polls cond (state another goroutine changes) for up to wait.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestEcho sends datagrams through the proxy to a UDP echo: answers come back to the
// sender, the sender's datagrams share one session, and the stats count them as Envoy does.
func TestEcho(t *testing.T) {
	e := newEnv(t, "", "stat_prefix: dns, cluster: up", udpEcho(t, "a"))
	c := client(t, e.addr)
	for _, msg := range []string{"one", "two", "three"} {
		if got := exchange(t, c, msg); got != "a:"+msg {
			t.Fatalf("answer = %q; want %q", got, "a:"+msg)
		}
	}
	waitFor(t, "the third answer counted", func() bool { return e.stat("udp.dns.downstream_sess_tx_datagrams") == 3 })
	for name, want := range map[string]uint64{
		"udp.dns.downstream_sess_total":         1,
		"udp.dns.downstream_sess_rx_datagrams":  3,
		"udp.dns.downstream_sess_rx_bytes":      11,
		"udp.dns.downstream_sess_tx_bytes":      17,
		"cluster.up.udp.sess_tx_datagrams":      3,
		"cluster.up.udp.sess_rx_datagrams":      3,
		"cluster.up.upstream_cx_tx_bytes_total": 11,
	} {
		if got := e.stat(name); got != want {
			t.Errorf("%s = %d; want %d", name, got, want)
		}
	}
	if got := e.stat("udp.dns.downstream_sess_active"); got != 1 {
		t.Errorf("downstream_sess_active = %d; want 1", got)
	}
}

// TestIdleTimeout checks that a session ends after idle_timeout on the proxy's clock and
// that traffic keeps it alive; the next datagram makes a new session.
func TestIdleTimeout(t *testing.T) {
	e := newEnv(t, "", "stat_prefix: s, cluster: up, idle_timeout: 10s", udpEcho(t, "a"))
	c := client(t, e.addr)
	exchange(t, c, "x")
	e.clk.Advance(6 * time.Second)
	exchange(t, c, "y") // seen 6s in: the session lives until 16s
	e.clk.Advance(6 * time.Second)
	if got := e.stat("udp.s.idle_timeout"); got != 0 {
		t.Fatalf("idle_timeout = %d at 12s with traffic at 6s; want 0", got)
	}
	e.clk.Advance(5 * time.Second)
	waitFor(t, "the session to expire", func() bool { return e.stat("udp.s.idle_timeout") == 1 })
	if got := e.stat("udp.s.downstream_sess_active"); got != 0 {
		t.Errorf("downstream_sess_active = %d after the timeout; want 0", got)
	}
	if got := exchange(t, c, "z"); got != "a:z" {
		t.Fatalf("answer after expiry = %q; want a:z", got)
	}
	if got := e.stat("udp.s.downstream_sess_total"); got != 2 {
		t.Errorf("downstream_sess_total = %d; want 2 (a new session after expiry)", got)
	}
}

// TestManyClients runs concurrent clients: each gets its own session and only its own
// answers; round robin spreads the sessions over both hosts.
func TestManyClients(t *testing.T) {
	e := newEnv(t, "", "stat_prefix: m, cluster: up", udpEcho(t, "a"), udpEcho(t, "b"))
	const clients = 20
	var wg sync.WaitGroup
	hosts := make(chan string, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := client(t, e.addr)
			first := ""
			for j := range 5 {
				msg := fmt.Sprintf("c%d-%d", i, j)
				got := exchange(t, c, msg)
				h, body, _ := strings.Cut(got, ":")
				if body != msg || (first != "" && h != first) {
					t.Errorf("client %d: answer %q to %q; want %s:%s from one host", i, got, msg, first, msg)
					return
				}
				first = h
			}
			hosts <- first
		}()
	}
	wg.Wait()
	close(hosts)
	seen := map[string]int{}
	for h := range hosts {
		seen[h]++
	}
	if seen["a"] == 0 || seen["b"] == 0 {
		t.Errorf("sessions per host = %v; want both hosts used", seen)
	}
	if got := e.stat("udp.m.downstream_sess_total"); got != clients {
		t.Errorf("downstream_sess_total = %d; want %d", got, clients)
	}
}

// TestHashAndPerPacket checks hash_policies (a fixed key sends every session to one host)
// and use_per_packet_load_balancing (one client's datagrams reach both hosts).
func TestHashAndPerPacket(t *testing.T) {
	a, b := udpEcho(t, "a"), udpEcho(t, "b")
	t.Run("key", func(t *testing.T) {
		e := newEnv(t, "lb_policy: RING_HASH,", "stat_prefix: h, cluster: up, hash_policies: [{key: k}]", a, b)
		first := ""
		for i := range 6 {
			h, _, _ := strings.Cut(exchange(t, client(t, e.addr), "x"), ":")
			if i > 0 && h != first {
				t.Fatalf("session %d went to %s, session 0 to %s; a fixed key picks one host", i, h, first)
			}
			first = h
		}
	})
	t.Run("per packet", func(t *testing.T) {
		e := newEnv(t, "", "stat_prefix: p, cluster: up, use_per_packet_load_balancing: true", a, b)
		c := client(t, e.addr)
		seen := map[string]bool{}
		for range 4 {
			h, _, _ := strings.Cut(exchange(t, c, "x"), ":")
			seen[h] = true
		}
		if !seen["a"] || !seen["b"] || e.stat("udp.p.downstream_sess_total") != 1 {
			t.Errorf("hosts %v in %d sessions; want both hosts in 1 session", seen, e.stat("udp.p.downstream_sess_total"))
		}
	})
}

// TestNoRouteAndAccessLog checks a missing cluster (downstream_sess_no_route) and the
// session's access log entry at its end.
func TestNoRouteAndAccessLog(t *testing.T) {
	e := newEnv(t, "", "stat_prefix: nr, matcher: {on_no_match: {action: {name: r, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.udp.udp_proxy.v3.Route, cluster: gone}}}}", udpEcho(t, "a"))
	client(t, e.addr).Write([]byte("x"))
	waitFor(t, "downstream_sess_no_route", func() bool { return e.stat("udp.nr.downstream_sess_no_route") == 1 })

	log := filepath.Join(t.TempDir(), "udp.log")
	e = newEnv(t, "", `stat_prefix: l, cluster: up, idle_timeout: 1s, access_log: [{name: envoy.access_loggers.file, typed_config: {"@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog,
path: `+log+`, log_format: {text_format: "%UPSTREAM_CLUSTER% %BYTES_RECEIVED% %BYTES_SENT% %ACCESS_LOG_TYPE%\n"}}}]`, udpEcho(t, "a"))
	exchange(t, client(t, e.addr), "hello")
	// The client can read the echo before the proxy's send returns and counts its bytes: the
	// session must not end (and log) before that count.
	waitFor(t, "the reply counted", func() bool { return e.stat("udp.l.downstream_sess_tx_bytes") == 7 })
	e.clk.Advance(time.Second)
	waitFor(t, "the session's log line", func() bool {
		b, _ := os.ReadFile(log)
		return strings.Contains(string(b), "\n")
	})
	if b, _ := os.ReadFile(log); string(b) != "up 5 7 UdpSessionEnd\n" {
		t.Errorf("access log = %q; want %q", b, "up 5 7 UdpSessionEnd\n")
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"{cluster: c}", `stat_prefix = ""`},
		{"{stat_prefix: s}", "one of cluster or matcher is required"},
		{"{stat_prefix: s, cluster: c, use_original_src_ip: true}", "use_original_src_ip: not implemented by Legate"},
		{"{stat_prefix: s, cluster: c, hash_policies: [{source_ip: true}, {key: k}]}", "at most 1"},
		{"{stat_prefix: s, cluster: c, session_filters: [{name: f}]}", "session_filters: not implemented by Legate"},
		{"{stat_prefix: s, matcher: {matcher_list: {matchers: []}}}", "matcher_list and matcher_tree are not implemented by Legate"},
	} {
		var pb udpproxyv3.UdpProxyConfig
		decode(t, tc.yaml, &pb)
		if _, err := ConfigFromProto(&pb); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ConfigFromProto(%s) = %v; want an error containing %q", tc.yaml, err, tc.want)
		}
	}
}
