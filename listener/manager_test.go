package listener

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/stats"
)

func plainListener(name, extra string) string {
	return fmt.Sprintf(`{name: %s, address: {socket_address: {address: 127.0.0.1, port_value: 0}}, filter_chains: [{name: %s-chain, filters: [{name: test.greet}]}]%s}`, name, name, extra)
}

func TestServeAndStats(t *testing.T) {
	g := newGreeter()
	m := testManager(t, ManagerConfig{Services: g.services(), Workers: 2},
		listenerFromYAML(t, plainListener("a", "")),
		listenerFromYAML(t, plainListener("b", ", stat_prefix: public")))
	st := m.cfg.Stats
	for _, name := range []string{"a", "b"} {
		got, c, r := greet(t, addrOf(t, m, name), nil)
		if got != name+"-chain" {
			t.Fatalf("greeting = %q; want %q", got, name+"-chain")
		}
		io.WriteString(c, "ping\n")
		if line, err := r.ReadString('\n'); err != nil || line != "ok\n" {
			t.Fatalf("reply = %q, %v; want ok", line, err)
		}
		c.Close()
		<-g.served
	}
	for _, tc := range []struct {
		name string
		want uint64
	}{
		{"listener.127.0.0.1_0.downstream_cx_total", 1},
		{"listener.127.0.0.1_0.downstream_cx_active", 0},
		{"listener.127.0.0.1_0.downstream_cx_destroy", 1},
		{"listener.127.0.0.1_0.downstream_pre_cx_active", 0},
		{"listener.127.0.0.1_0.no_filter_chain_match", 0},
		{"listener.127.0.0.1_0.downstream_listener_filter_error", 0},
		{"listener.public.downstream_cx_total", 1},
		{"listener.127.0.0.1_0.worker_0.downstream_cx_active", 0},
		{"listener.127.0.0.1_0.worker_1.downstream_cx_active", 0},
		{"listener_manager.listener_added", 2},
		{"listener_manager.listener_create_success", 4}, // per worker, as in Envoy
		{"listener_manager.listener_create_failure", 0},
		{"listener_manager.total_listeners_active", 2},
		{"listener_manager.total_listeners_warming", 0},
		{"listener_manager.total_listeners_draining", 0},
		{"listener_manager.total_filter_chains_draining", 0},
		{"listener_manager.workers_started", 1},
	} {
		t.Run(tc.name, func(t *testing.T) { wantStat(t, st, tc.name, tc.want) })
	}
	w0, _ := statValue(st, "listener.127.0.0.1_0.worker_0.downstream_cx_total")
	w1, _ := statValue(st, "listener.127.0.0.1_0.worker_1.downstream_cx_total")
	if w0+w1 != 1 {
		t.Errorf("worker_0 + worker_1 downstream_cx_total = %d; want 1", w0+w1)
	}
}

func TestStatusesShowBoundAddresses(t *testing.T) {
	ls := []*config.Listener{
		listenerFromYAML(t, plainListener("v4", "")),
		listenerFromYAML(t, `{name: multi, address: {socket_address: {address: 127.0.0.1, port_value: 0}}, additional_addresses: [{address: {socket_address: {address: 127.0.0.1, port_value: 0}}}], filter_chains: [{filters: [{name: test.greet}]}]}`),
	}
	if ln, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		ln.Close()
		ls = append(ls, listenerFromYAML(t, `{name: v6, address: {socket_address: {address: "::1", port_value: 0}}, filter_chains: [{filters: [{name: test.greet}]}]}`))
	}
	m := testManager(t, ManagerConfig{Services: newGreeter().services()}, ls...)
	var got []string
	for _, s := range m.Statuses() {
		for _, a := range s.Addresses {
			if a.Port == 0 {
				t.Errorf("listener %s shows port 0; want the bound port", s.Name)
			}
			got = append(got, s.Name+"::"+a.String())
		}
	}
	var want []string
	for _, name := range []string{"v4", "multi", "v6"} {
		for _, a := range m.Addrs()[name] {
			want = append(want, name+"::"+a.String())
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Statuses() (-want +got):\n%s", diff)
	}
	if len(got) != len(ls)+1 {
		t.Errorf("got %d addresses; want %d", len(got), len(ls)+1)
	}
}

func TestBindErrorNamesListenerAndAddress(t *testing.T) {
	busy, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	st := newStore(t)
	m, _ := NewManager(ManagerConfig{Stats: st, Services: newGreeter().services(), Extensions: testExtensions(t)})
	ok := listenerFromYAML(t, plainListener("ok", ""))
	clash := listenerFromYAML(t, fmt.Sprintf(`{name: clash, address: {socket_address: {address: 127.0.0.1, port_value: %d}}, filter_chains: [{filters: [{name: test.greet}]}]}`, port))
	if err := m.AddStatic([]*config.Listener{ok, clash}); err != nil {
		t.Fatal(err)
	}
	err = m.Start()
	var be *BindError
	if !errors.As(err, &be) || be.Listener != "clash" || be.Address != fmt.Sprintf("127.0.0.1:%d", port) {
		t.Fatalf("Start() = %v; want a BindError naming clash and 127.0.0.1:%d", err, port)
	}
	if !strings.Contains(err.Error(), "clash") {
		t.Errorf("error %q does not name the listener", err)
	}
	if len(m.Addrs()) != 0 {
		t.Errorf("Addrs() = %v after a failed Start; want nothing bound", m.Addrs())
	}
	wantStat(t, st, "listener_manager.listener_create_failure", 1)
	m.Close()
}

func TestListenerConfigErrors(t *testing.T) {
	m := testManager(t, ManagerConfig{Services: newGreeter().services()})
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"unknown filter", `{name: x, address: {socket_address: {address: 127.0.0.1, port_value: 0}}, filter_chains: [{filters: [{name: envoy.filters.network.redis_proxy}]}]}`,
			`listener "x": filter_chains[0].filters[0]: name = "envoy.filters.network.redis_proxy"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.AddOrUpdate(listenerFromYAML(t, tc.yaml), "1")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("AddOrUpdate() = %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestChainWithoutFiltersClosesConnections(t *testing.T) {
	m := testManager(t, ManagerConfig{}, listenerFromYAML(t, `{name: empty, address: {socket_address: {address: 127.0.0.1, port_value: 0}}, filter_chains: [{}]}`))
	c, err := net.Dial("tcp", addrOf(t, m, "empty"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	expectClosed(t, c, c)
}

func TestTLSInspectorTimeout(t *testing.T) {
	g := newGreeter()
	m := testManager(t, ManagerConfig{Services: g.services()},
		listenerFromYAML(t, `{name: strict, address: {socket_address: {address: 127.0.0.1, port_value: 0}}, listener_filters: [{name: envoy.filters.listener.tls_inspector}], listener_filters_timeout: 0.05s, filter_chains: [{name: any, filters: [{name: test.greet}]}]}`),
		listenerFromYAML(t, `{name: lenient, stat_prefix: lenient, address: {socket_address: {address: 127.0.0.1, port_value: 0}}, listener_filters: [{name: envoy.filters.listener.tls_inspector}], listener_filters_timeout: 0.05s, continue_on_listener_filters_timeout: true, filter_chains: [{name: raw, filter_chain_match: {transport_protocol: raw_buffer}, filters: [{name: test.greet}]}]}`))
	c, err := net.Dial("tcp", addrOf(t, m, "strict"))
	if err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c, c) // the client sends nothing: closed at the timeout
	c.Close()
	wantStat(t, m.cfg.Stats, "listener.127.0.0.1_0.downstream_pre_cx_timeout", 1)
	wantStat(t, m.cfg.Stats, "listener.127.0.0.1_0.downstream_cx_total", 0)

	got, c, _ := greet(t, addrOf(t, m, "lenient"), nil)
	if got != "raw" {
		t.Errorf("after the timeout with continue_on_listener_filters_timeout: chain %q; want raw", got)
	}
	if c != nil {
		c.Close()
		<-g.served
	}
	wantStat(t, m.cfg.Stats, "listener.lenient.downstream_pre_cx_timeout", 1)
}

func TestTLSInspectorRemoteClose(t *testing.T) {
	m := testManager(t, ManagerConfig{Services: newGreeter().services()},
		listenerFromYAML(t, `{name: l, address: {socket_address: {address: 127.0.0.1, port_value: 0}}, listener_filters: [{name: envoy.filters.listener.tls_inspector}], filter_chains: [{filters: [{name: test.greet}]}]}`))
	c, err := net.Dial("tcp", addrOf(t, m, "l"))
	if err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	expectClosed(t, c, c)
	c.Close()
	wantStat(t, m.cfg.Stats, "listener.127.0.0.1_0.downstream_listener_filter_remote_close", 1)
}

// newConnOn dials the listener and returns the greeting, the client connection and the
// server-side Conn.
func newConnOn(t *testing.T, g *greeter, addr string) (string, net.Conn, *Conn) {
	t.Helper()
	name, c, _ := greet(t, addr, nil)
	if c == nil {
		t.Fatalf("connection to %s closed before its greeting", addr)
	}
	t.Cleanup(func() { c.Close() })
	select {
	case sc := <-g.started:
		return name, c, sc
	case <-time.After(wait):
		t.Fatal("handler did not start")
	}
	return "", nil, nil
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestInPlaceFilterChainUpdate(t *testing.T) {
	g := newGreeter()
	clock := newFakeClock()
	m := testManager(t, ManagerConfig{Services: g.services(), Clock: clock, DrainTime: 10 * time.Second, DrainStrategy: DrainImmediate})
	v1 := `{name: l, address: {socket_address: {address: 127.0.0.1, port_value: 0}},
	  filter_chains: [{name: keep, filter_chain_match: {source_ports: [1]}, filters: [{name: test.greet}]}, {name: old, filters: [{name: test.greet}]}]}`
	v2 := strings.Replace(v1, "name: old", "name: new", 1)
	if changed, err := m.AddOrUpdate(listenerFromYAML(t, v1), "1"); err != nil || !changed {
		t.Fatalf("AddOrUpdate(v1) = %v, %v", changed, err)
	}
	addr := addrOf(t, m, "l")
	name, oldClient, oldConn := newConnOn(t, g, addr)
	if name != "old" {
		t.Fatalf("chain = %q; want old", name)
	}
	if changed, err := m.AddOrUpdate(listenerFromYAML(t, v1), "1"); err != nil || changed {
		t.Errorf("AddOrUpdate(same config) = %v, %v; want no change", changed, err)
	}
	if changed, err := m.AddOrUpdate(listenerFromYAML(t, v2), "2"); err != nil || !changed {
		t.Fatalf("AddOrUpdate(v2) = %v, %v", changed, err)
	}
	st := m.cfg.Stats
	wantStat(t, st, "listener_manager.listener_in_place_updated", 1)
	wantStat(t, st, "listener_manager.listener_modified", 1)
	wantStat(t, st, "listener_manager.total_filter_chains_draining", 1)
	wantStat(t, st, "listener_manager.total_listeners_draining", 0)
	if addrOf(t, m, "l") != addr {
		t.Errorf("address changed on an in-place update")
	}
	if !isClosed(oldConn.DrainStarted()) || !oldConn.Draining() || !oldConn.DrainClose() {
		t.Errorf("the removed chain's connection is not draining")
	}
	expectClosed(t, oldClient, oldClient) // the greeter closes idle draining connections
	<-g.served
	name, _, newConn := newConnOn(t, g, addr)
	if name != "new" {
		t.Errorf("chain after the update = %q; want new", name)
	}
	if isClosed(newConn.DrainStarted()) || newConn.Draining() || newConn.DrainClose() {
		t.Errorf("a connection on the new chain is draining")
	}
	clock.Advance(10 * time.Second)
	wantStat(t, st, "listener_manager.total_filter_chains_draining", 0)
}

func TestFullUpdateDrainsOldVersion(t *testing.T) {
	g := newGreeter()
	clock := newFakeClock()
	m := testManager(t, ManagerConfig{Services: g.services(), Clock: clock, DrainTime: 10 * time.Second, DrainStrategy: DrainGradual})
	v1 := plainListener("l", "")
	if _, err := m.AddOrUpdate(listenerFromYAML(t, v1), "1"); err != nil {
		t.Fatal(err)
	}
	addr := addrOf(t, m, "l")
	_, oldClient, oldConn := newConnOn(t, g, addr)
	// The old connection is busy when the update comes: it keeps being served while draining.
	io.WriteString(oldClient, "slow\n")
	<-g.waiting
	v2 := plainListener("l", ", per_connection_buffer_limit_bytes: 4096")
	if _, err := m.AddOrUpdate(listenerFromYAML(t, v2), "2"); err != nil {
		t.Fatal(err)
	}
	st := m.cfg.Stats
	wantStat(t, st, "listener_manager.listener_modified", 1)
	wantStat(t, st, "listener_manager.listener_in_place_updated", 0)
	wantStat(t, st, "listener_manager.listener_create_success", 2) // the addition and the update, one worker
	wantStat(t, st, "listener_manager.total_listeners_draining", 1)
	if addrOf(t, m, "l") != addr {
		t.Fatalf("the socket changed although the address did not")
	}
	_, _, newConn := newConnOn(t, g, addr)
	if got := newConn.BufferLimit(); got != 4096 {
		t.Errorf("new connection BufferLimit() = %d; want 4096", got)
	}
	if got := oldConn.BufferLimit(); got != config.DefaultPerConnectionBufferLimit {
		t.Errorf("old connection BufferLimit() = %d; want the default", got)
	}
	g.release <- struct{}{}
	// With the gradual strategy at the start of the drain it is not told to close after its
	// reply, so it stays open until the drain time ends.
	if line, err := bufioReader(oldClient).ReadString('\n'); err != nil || line != "ok\n" {
		t.Fatalf("old connection reply = %q, %v", line, err)
	}
	clock.Advance(10 * time.Second)
	expectClosed(t, oldClient, oldClient)
	<-g.served
	wantStat(t, st, "listener_manager.total_listeners_draining", 0)
	wantStat(t, st, "listener.127.0.0.1_0.downstream_cx_active", 1)
}

func TestUpdateWithNewAddressRebinds(t *testing.T) {
	g := newGreeter()
	clock := newFakeClock()
	m := testManager(t, ManagerConfig{Services: g.services(), Clock: clock, DrainTime: time.Second})
	if _, err := m.AddOrUpdate(listenerFromYAML(t, plainListener("l", "")), "1"); err != nil {
		t.Fatal(err)
	}
	old := addrOf(t, m, "l")
	v2 := strings.Replace(plainListener("l", ""), "127.0.0.1", "127.0.0.2", 1)
	if _, err := m.AddOrUpdate(listenerFromYAML(t, v2), "2"); err != nil {
		t.Fatal(err)
	}
	now := addrOf(t, m, "l")
	if !strings.HasPrefix(now, "127.0.0.2:") {
		t.Fatalf("address after the update = %s; want 127.0.0.2", now)
	}
	if c, err := net.Dial("tcp", old); err == nil {
		c.Close()
		t.Errorf("the old address still accepts")
	}
	if name, c, _ := greet(t, now, nil); name != "l-chain" {
		t.Errorf("greeting on the new address = %q", name)
	} else {
		c.Close()
		<-g.served
	}
}

func TestRemoveListener(t *testing.T) {
	g := newGreeter()
	clock := newFakeClock()
	m := testManager(t, ManagerConfig{Services: g.services(), Clock: clock, DrainTime: 5 * time.Second},
		listenerFromYAML(t, plainListener("static", "")))
	if _, err := m.AddOrUpdate(listenerFromYAML(t, plainListener("dyn", ", stat_prefix: dyn")), "1"); err != nil {
		t.Fatal(err)
	}
	addr := addrOf(t, m, "dyn")
	_, client, conn := newConnOn(t, g, addr)
	if ok, err := m.Remove("static"); ok || err == nil {
		t.Errorf("Remove(static) = %v, %v; want an error", ok, err)
	}
	if _, err := m.AddOrUpdate(listenerFromYAML(t, plainListener("static", ", stat_prefix: x")), "2"); err == nil {
		t.Errorf("AddOrUpdate over a static listener succeeded")
	}
	if ok, err := m.Remove("dyn"); !ok || err != nil {
		t.Fatalf("Remove(dyn) = %v, %v", ok, err)
	}
	if ok, _ := m.Remove("dyn"); ok {
		t.Errorf("Remove(dyn) twice = true")
	}
	if !isClosed(conn.DrainStarted()) || !conn.Draining() {
		t.Errorf("the removed listener's connection is not draining")
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("a removed listener still accepts")
	}
	st := m.cfg.Stats
	wantStat(t, st, "listener_manager.listener_removed", 1)
	wantStat(t, st, "listener_manager.total_listeners_active", 1)
	wantStat(t, st, "listener_manager.total_listeners_draining", 1)
	clock.Advance(5 * time.Second)
	expectClosed(t, client, client)
	<-g.served
	wantStat(t, st, "listener_manager.total_listeners_draining", 0)
	if _, ok := statValue(st, "listener.dyn.downstream_cx_total"); ok {
		t.Errorf("the removed listener's stats are still listed")
	}
}

func TestStopListeners(t *testing.T) {
	in := `{name: in, traffic_direction: INBOUND, address: {socket_address: {address: 127.0.0.1, port_value: 0}}, filter_chains: [{filters: [{name: test.greet}]}]}`
	out := `{name: out, traffic_direction: OUTBOUND, address: {socket_address: {address: 127.0.0.1, port_value: 0}}, filter_chains: [{filters: [{name: test.greet}]}]}`
	t.Run("inboundonly", func(t *testing.T) {
		m := testManager(t, ManagerConfig{Services: newGreeter().services()}, listenerFromYAML(t, in), listenerFromYAML(t, out))
		inAddr, outAddr := addrOf(t, m, "in"), addrOf(t, m, "out")
		m.DrainListeners(DrainRequest{InboundOnly: true}, func() { t.Error("exit called without graceful") })
		wantStat(t, m.cfg.Stats, "listener_manager.listener_stopped", 1)
		if c, err := net.Dial("tcp", inAddr); err == nil {
			c.Close()
			t.Errorf("the inbound listener still accepts")
		}
		if c, err := net.Dial("tcp", outAddr); err != nil {
			t.Errorf("the outbound listener refuses: %v", err)
		} else {
			c.Close()
		}
		if _, err := m.AddOrUpdate(listenerFromYAML(t, strings.Replace(in, "name: in", "name: in2", 1)), "1"); !errors.Is(err, ErrDirectionStopped) {
			t.Errorf("adding an inbound listener = %v; want ErrDirectionStopped", err)
		}
		if _, err := m.AddOrUpdate(listenerFromYAML(t, strings.Replace(out, "name: out", "name: out2", 1)), "1"); err != nil {
			t.Errorf("adding an outbound listener = %v; want success", err)
		}
	})
	t.Run("all", func(t *testing.T) {
		m := testManager(t, ManagerConfig{Services: newGreeter().services()}, listenerFromYAML(t, in), listenerFromYAML(t, out))
		m.DrainListeners(DrainRequest{}, nil)
		wantStat(t, m.cfg.Stats, "listener_manager.listener_stopped", 2)
		if _, err := m.AddOrUpdate(listenerFromYAML(t, strings.Replace(out, "name: out", "name: out2", 1)), "1"); !errors.Is(err, ErrDirectionStopped) {
			t.Errorf("adding an outbound listener = %v; want ErrDirectionStopped", err)
		}
		if got := len(m.Statuses()); got != 2 {
			t.Errorf("stopped listeners listed: %d; want 2 (they stay in /listeners)", got)
		}
	})
}

// TestGracefulDrain: idle connections close when the drain starts, an in-flight request
// finishes and its connection closes after the reply, and at the end of the drain time the
// listeners stop and exit is called (unless skip_exit).
func TestGracefulDrain(t *testing.T) {
	for _, skipExit := range []bool{false, true} {
		t.Run(fmt.Sprintf("skip_exit=%v", skipExit), func(t *testing.T) {
			g := newGreeter()
			clock := newFakeClock()
			m := testManager(t, ManagerConfig{Services: g.services(), Clock: clock, DrainTime: 30 * time.Second, DrainStrategy: DrainImmediate},
				listenerFromYAML(t, plainListener("l", "")))
			addr := addrOf(t, m, "l")
			_, idle, _ := newConnOn(t, g, addr)
			_, busy, _ := newConnOn(t, g, addr)
			io.WriteString(busy, "slow\n")
			<-g.waiting
			var exits atomic.Int32
			req := DrainRequest{Graceful: true, SkipExit: skipExit}
			m.DrainListeners(req, func() { exits.Add(1) })
			m.DrainListeners(req, func() { exits.Add(1) }) // already draining: nothing more
			if !m.DrainManager().Draining(DrainAll) {
				t.Fatalf("Draining(All) = false after a graceful drain started")
			}
			expectClosed(t, idle, idle)
			<-g.served
			g.release <- struct{}{}
			r := bufioReader(busy)
			if line, err := r.ReadString('\n'); err != nil || line != "ok\n" {
				t.Fatalf("in-flight reply = %q, %v; want ok", line, err)
			}
			expectClosed(t, busy, r)
			<-g.served
			clock.Advance(30 * time.Second)
			c, err := net.Dial("tcp", addr)
			if skipExit {
				if err != nil {
					t.Errorf("after a skip_exit drain the listener refuses: %v", err)
				} else {
					c.Close()
				}
				if exits.Load() != 0 {
					t.Errorf("exit called %d times with skip_exit", exits.Load())
				}
				return
			}
			if err == nil {
				c.Close()
				t.Errorf("the listener accepts after the graceful drain")
			}
			if got := exits.Load(); got != 1 {
				t.Errorf("exit called %d times; want 1", got)
			}
			wantStat(t, m.cfg.Stats, "listener_manager.listener_stopped", 1)
		})
	}
}

func TestDrainInboundOnlyLeavesOutbound(t *testing.T) {
	g := newGreeter()
	m := testManager(t, ManagerConfig{Services: g.services(), Clock: newFakeClock(), DrainTime: time.Minute, DrainStrategy: DrainImmediate},
		listenerFromYAML(t, `{name: in, traffic_direction: INBOUND, address: {socket_address: {address: 127.0.0.1, port_value: 0}}, filter_chains: [{filters: [{name: test.greet}]}]}`),
		listenerFromYAML(t, `{name: out, stat_prefix: out, traffic_direction: OUTBOUND, address: {socket_address: {address: 127.0.0.1, port_value: 0}}, filter_chains: [{filters: [{name: test.greet}]}]}`),
		listenerFromYAML(t, `{name: modify-only, stat_prefix: mo, drain_type: MODIFY_ONLY, traffic_direction: INBOUND, address: {socket_address: {address: 127.0.0.1, port_value: 0}}, filter_chains: [{filters: [{name: test.greet}]}]}`))
	_, _, in := newConnOn(t, g, addrOf(t, m, "in"))
	_, _, out := newConnOn(t, g, addrOf(t, m, "out"))
	_, _, mo := newConnOn(t, g, addrOf(t, m, "modify-only"))
	m.DrainListeners(DrainRequest{Graceful: true, InboundOnly: true}, nil)
	if !in.DrainClose() {
		t.Errorf("inbound DrainClose() = false; want true")
	}
	if out.DrainClose() || isClosed(out.DrainStarted()) || out.Draining() {
		t.Errorf("outbound connection drains during an inbound-only drain")
	}
	if mo.DrainClose() {
		t.Errorf("MODIFY_ONLY listener drains on a server drain")
	}
	if m.DrainManager().Draining(DrainAll) || !m.DrainManager().Draining(DrainInboundOnly) {
		t.Errorf("Draining(All), Draining(InboundOnly) = %v, %v; want false, true",
			m.DrainManager().Draining(DrainAll), m.DrainManager().Draining(DrainInboundOnly))
	}
	m.DrainListeners(DrainRequest{Graceful: true}, nil) // widens to every listener
	if !out.DrainClose() {
		t.Errorf("outbound DrainClose() = false after an all-listener drain")
	}
	// A listener added while draining starts out draining.
	if _, err := m.AddOrUpdate(listenerFromYAML(t, `{name: late, stat_prefix: late, address: {socket_address: {address: 127.0.0.1, port_value: 0}}, filter_chains: [{filters: [{name: test.greet}]}]}`), "1"); err != nil {
		t.Fatal(err)
	}
	_, _, late := newConnOn(t, g, addrOf(t, m, "late"))
	if !late.DrainClose() {
		t.Errorf("a listener added during a drain does not drain")
	}
}

func TestHealthCheckFailedDrainsDefaultListeners(t *testing.T) {
	g := newGreeter()
	var failed atomic.Bool
	m := testManager(t, ManagerConfig{Services: g.services(), HealthCheckFailed: failed.Load},
		listenerFromYAML(t, plainListener("d", "")),
		listenerFromYAML(t, plainListener("mo", ", stat_prefix: mo, drain_type: MODIFY_ONLY")))
	_, _, d := newConnOn(t, g, addrOf(t, m, "d"))
	_, _, mo := newConnOn(t, g, addrOf(t, m, "mo"))
	if d.DrainClose() {
		t.Errorf("DrainClose() = true while healthy")
	}
	failed.Store(true)
	if !d.DrainClose() {
		t.Errorf("DEFAULT listener DrainClose() = false while health checks fail")
	}
	if mo.DrainClose() {
		t.Errorf("MODIFY_ONLY listener DrainClose() = true while health checks fail")
	}
}

func TestGradualDrainProbability(t *testing.T) {
	clock := newFakeClock()
	var next uint64
	d := NewDrainManager(DrainConfig{Time: 100 * time.Second, Strategy: DrainGradual, Clock: clock, Rand: func() uint64 {
		v := next * uint64(time.Second) // 0 s, 1 s, ... 99 s: uniform over the drain time
		next = (next + 1) % 100
		return v
	}})
	start := clock.Now()
	for _, tc := range []struct {
		at   time.Duration
		want int // of 100 decisions
	}{{0, 0}, {25 * time.Second, 25}, {50 * time.Second, 50}, {99 * time.Second, 99}, {100 * time.Second, 100}, {time.Hour, 100}} {
		t.Run(tc.at.String(), func(t *testing.T) {
			clock.Advance(start.Add(tc.at).Sub(clock.Now())) // the cases run in increasing time
			got := 0
			for i := 0; i < 100; i++ {
				if d.closeNow(start) {
					got++
				}
			}
			if got != tc.want {
				t.Errorf("closes at %v: %d of 100; want %d", tc.at, got, tc.want)
			}
		})
	}
	imm := NewDrainManager(DrainConfig{Time: time.Hour, Strategy: DrainImmediate, Clock: clock})
	if !imm.closeNow(clock.Now()) {
		t.Errorf("immediate closeNow() at the start = false")
	}
}

func TestDrainSequenceCompletion(t *testing.T) {
	clock := newFakeClock()
	d := NewDrainManager(DrainConfig{Time: 5 * time.Second, Clock: clock})
	var done atomic.Int32
	d.StartDrainSequence(DrainInboundOnly, func() { done.Add(1) })
	clock.Advance(4 * time.Second)
	if done.Load() != 0 {
		t.Fatalf("drain completed before the drain time")
	}
	clock.Advance(time.Second)
	if done.Load() != 1 {
		t.Fatalf("drain not completed at the drain time")
	}
	d.StartDrainSequence(DrainAll, func() { done.Add(1) })
	d.Close()
	clock.Advance(time.Minute)
	if done.Load() != 1 {
		t.Errorf("a drain completed after Close")
	}
}

func TestConfigDump(t *testing.T) {
	clock := newFakeClock()
	m := testManager(t, ManagerConfig{Services: newGreeter().services(), Clock: clock, DrainTime: time.Minute},
		listenerFromYAML(t, plainListener("s1", "")), listenerFromYAML(t, plainListener("s2", ", stat_prefix: s2")))
	if _, err := m.AddOrUpdate(listenerFromYAML(t, plainListener("d", ", stat_prefix: d")), "v1"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.AddOrUpdate(listenerFromYAML(t, plainListener("d", ", stat_prefix: d2")), "v2"); err != nil {
		t.Fatal(err)
	}
	dump := m.ConfigDump(func(string) bool { return true }).(interface{ String() string }).String()
	for _, want := range []string{`name:"s1"`, `name:"s2"`, `version_info:"v2"`, `version_info:"v1"`, "draining_state", "active_state"} {
		if !strings.Contains(strings.ReplaceAll(dump, " ", ""), strings.ReplaceAll(want, " ", "")) {
			t.Errorf("config dump lacks %s:\n%s", want, dump)
		}
	}
	only := m.ConfigDump(func(n string) bool { return n == "s2" }).(interface{ String() string }).String()
	if strings.Contains(only, `"s1"`) || strings.Contains(only, `"d"`) {
		t.Errorf("name match not applied:\n%s", only)
	}
}

func TestUnnamedListenerGetsUUID(t *testing.T) {
	m := testManager(t, ManagerConfig{Services: newGreeter().services()},
		listenerFromYAML(t, `{address: {socket_address: {address: 127.0.0.1, port_value: 0}}, filter_chains: [{filters: [{name: test.greet}]}]}`))
	name := m.Statuses()[0].Name
	if len(name) != 36 || name[14] != '4' {
		t.Errorf("generated name %q is not a version 4 UUID", name)
	}
}

// TestConnCopyReplaysPeekedBytes: io.Copy through WriteTo and ReadFrom carries the bytes the
// TLS inspector peeked, then the rest of the stream.
func TestConnCopyReplaysPeekedBytes(t *testing.T) {
	reg := serving("echo", func(*ChainContext, any) (FilterChainHandler, error) {
		return HandlerFunc(func(c *Conn) {
			defer c.Close()
			io.Copy(c, c) // ReadFrom(c) on the socket, reading through c.WriteTo
		}), nil
	})
	m := testManager(t, ManagerConfig{Services: reg},
		listenerFromYAML(t, `{name: l, address: {socket_address: {address: 127.0.0.1, port_value: 0}}, listener_filters: [{name: envoy.filters.listener.tls_inspector}], filter_chains: [{filters: [{name: echo}]}]}`))
	c, err := net.Dial("tcp", addrOf(t, m, "l"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	io.WriteString(c, "first bytes, ")
	io.WriteString(c, "then more")
	c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "first bytes, then more" {
		t.Errorf("echo = %q, %v; want %q", got, err, "first bytes, then more")
	}
}

func TestPipeListener(t *testing.T) {
	g := newGreeter()
	path := t.TempDir() + "/legate.sock"
	m := testManager(t, ManagerConfig{Services: g.services()},
		listenerFromYAML(t, `{name: pipe, address: {pipe: {path: "`+path+`"}}, filter_chains: [{name: unix, filters: [{name: test.greet}]}]}`))
	if got := m.Statuses()[0].Addresses[0].String(); got != path {
		t.Errorf("status address = %q; want %q", got, path)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	line, err := bufioReader(c).ReadString('\n')
	if err != nil || line != "unix\n" {
		t.Errorf("greeting = %q, %v; want unix", line, err)
	}
	c.Close()
	<-g.served
	wantStat(t, m.cfg.Stats, "listener."+path+".downstream_cx_total", 1)
}

// TestUnknownListenerFilter: a listener filter no extension implements refuses the listener,
// found by its typed_config's type when it has one (the name is then free text).
func TestUnknownListenerFilter(t *testing.T) {
	const base = `{name: l, address: {socket_address: {address: 127.0.0.1, port_value: 0}}, filter_chains: [{filters: [{name: test.greet}]}], listener_filters: `
	tests := []struct{ name, filters, want string }{
		{"unknown listener filter", `[{name: example.listener.unknown}]`, `listener "l": listener_filters[0].name = "example.listener.unknown": unsupported listener filter; only envoy.filters.listener.http_inspector, envoy.filters.listener.original_dst, envoy.filters.listener.proxy_protocol, envoy.filters.listener.tls_inspector are implemented`},
		{"listener filter named as the TLS inspector but typed otherwise", `[{name: envoy.filters.listener.tls_inspector, typed_config: {"@type": type.googleapis.com/google.protobuf.StringValue, value: a}}]`,
			`listener_filters[0].typed_config = "type.googleapis.com/google.protobuf.StringValue": unsupported listener filter`},
		{"refused field", `[{name: envoy.filters.listener.tls_inspector, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector, enable_ja3_fingerprinting: true}}]`,
			`listener_filters[0].typed_config.enable_ja3_fingerprinting: set; not implemented by Legate`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := stats.New(stats.Config{})
			if err != nil {
				t.Fatal(err)
			}
			m, err := NewManager(ManagerConfig{Stats: st, Services: newGreeter().services(), Extensions: testExtensions(t)})
			if err != nil {
				t.Fatal(err)
			}
			err = m.AddStatic([]*config.Listener{listenerFromYAML(t, base+tc.filters+"}")})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("AddStatic() = %v; want an error containing %q", err, tc.want)
			}
		})
	}
}
