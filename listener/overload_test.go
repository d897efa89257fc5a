package listener

import (
	"net"
	"testing"
	"time"

	"github.com/legateproxy/legate/overload"
	"github.com/legateproxy/legate/stats"
)

// overloadListeners starts a manager with the listeners "a", "free" (ignore_global_conn_limit)
// and "bypass" (bypass_overload_manager) under h's overload state.
func overloadListeners(t *testing.T, g *greeter, st *overloadHolder) *Manager {
	return testManager(t, ManagerConfig{Services: g.services(), Workers: 1, Stats: st.store, Overload: st.state},
		listenerFromYAML(t, plainListener("a", ", stat_prefix: a")),
		listenerFromYAML(t, plainListener("free", ", stat_prefix: free, ignore_global_conn_limit: true")),
		listenerFromYAML(t, plainListener("bypass", ", stat_prefix: bypass, bypass_overload_manager: true")))
}

// overloadHolder is an overload manager with its store and state.
type overloadHolder struct {
	store *stats.Store
	state *overload.State
	ov    *overload.Manager
}

// newOverload builds an overload manager with a global connection limit of max and the
// actions given, each saturated when the connections reach threshold of the limit.
func newOverload(t *testing.T, max int64, threshold float64, actions ...string) *overloadHolder {
	t.Helper()
	st := newStore(t)
	cfg := &overload.Config{RefreshInterval: time.Second, Monitors: []overload.Monitor{{Name: overload.GlobalConnections, MaxConnections: max}}}
	for _, a := range actions {
		cfg.Actions = append(cfg.Actions, overload.Action{Name: a, Triggers: []overload.Trigger{{Monitor: overload.GlobalConnections, Scaling: threshold, Saturation: threshold}}})
	}
	ov := overload.New(cfg, st, nil)
	t.Cleanup(ov.Close)
	return &overloadHolder{store: st, state: ov.State(), ov: ov}
}

// mustGreet dials the listener and reads its greeting.
func mustGreet(t *testing.T, m *Manager, name string) net.Conn {
	t.Helper()
	got, c, _ := greet(t, addrOf(t, m, name), nil)
	if c == nil {
		t.Fatalf("listener %q closed a connection it should serve", name)
	}
	if got != name+"-chain" {
		t.Fatalf("greeting = %q", got)
	}
	return c
}

// TestGlobalConnectionLimitAtAccept opens real connections up to the global limit: the next
// one is closed at accept and counted in downstream_global_cx_overflow, listeners with
// ignore_global_conn_limit or bypass_overload_manager keep accepting, and a closed connection
// frees its place.
func TestGlobalConnectionLimitAtAccept(t *testing.T) {
	g := newGreeter()
	h := newOverload(t, 2, 1)
	m := overloadListeners(t, g, h)
	c1 := mustGreet(t, m, "a")
	defer c1.Close()
	c2 := mustGreet(t, m, "a")
	defer c2.Close()
	if got, c, _ := greet(t, addrOf(t, m, "a"), nil); c != nil {
		c.Close()
		t.Fatalf("a connection over the global limit was served (greeting %q)", got)
	}
	wantStat(t, h.store, "listener.a.downstream_global_cx_overflow", 1)
	free := mustGreet(t, m, "free")
	defer free.Close()
	bypass := mustGreet(t, m, "bypass")
	defer bypass.Close()
	if n := h.state.Connections(); n != 2 {
		t.Errorf("connections counted against the limit = %d; want 2", n)
	}
	h.ov.Refresh()
	wantStat(t, h.store, "overload.envoy.resource_monitors.global_downstream_max_connections.pressure", 100)

	c1.Close()
	<-g.served // the server side has closed and released it
	c3 := mustGreet(t, m, "a")
	c3.Close()
	wantStat(t, h.store, "listener.a.downstream_global_cx_overflow", 1)
}

// TestRejectIncomingConnections saturates reject_incoming_connections: a new connection is
// closed at accept and counted in downstream_cx_overload_reject, and its place in the global
// limit is released; a bypassing listener is not affected.
func TestRejectIncomingConnections(t *testing.T) {
	g := newGreeter()
	h := newOverload(t, 10, 0, overload.RejectIncomingConnections)
	m := overloadListeners(t, g, h)
	h.ov.Refresh()
	wantStat(t, h.store, "overload.envoy.overload_actions.reject_incoming_connections.active", 1)
	if got, c, _ := greet(t, addrOf(t, m, "a"), nil); c != nil {
		c.Close()
		t.Fatalf("a connection was served under reject_incoming_connections (greeting %q)", got)
	}
	wantStat(t, h.store, "listener.a.downstream_cx_overload_reject", 1)
	if n := h.state.Connections(); n != 0 {
		t.Errorf("a rejected connection still counts against the limit: %d", n)
	}
	mustGreet(t, m, "bypass").Close()
}

// TestStopAcceptingConnections saturates stop_accepting_connections with one open connection
// of a limit of one: a new connection is not served until that one closes and the action ends,
// while a bypassing listener keeps serving.
func TestStopAcceptingConnections(t *testing.T) {
	g := newGreeter()
	h := newOverload(t, 1, 1, overload.StopAcceptingConnections)
	m := overloadListeners(t, g, h)
	first := mustGreet(t, m, "a")
	h.ov.Refresh()
	wantStat(t, h.store, "overload.envoy.overload_actions.stop_accepting_connections.active", 1)

	c, err := net.DialTimeout("tcp", addrOf(t, m, "a"), wait)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Nothing can be awaited for a connection that is not served: give it a bounded chance.
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 64)
	if n, err := c.Read(buf); err == nil {
		t.Fatalf("served while stop_accepting_connections holds: %q", buf[:n])
	}
	mustGreet(t, m, "bypass").Close()

	first.Close()
	<-g.served // the bypassing connection
	<-g.served // first, released on the server side
	h.ov.Refresh()
	wantStat(t, h.store, "overload.envoy.overload_actions.stop_accepting_connections.active", 0)
	c.SetReadDeadline(time.Now().Add(wait))
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "a-chain\n" {
		t.Fatalf("after the action ended: read %q, %v; want the greeting", buf[:n], err)
	}
}

// TestListenerConnectionLimitRuntime sets envoy.resource_limits.listener.a.connection_limit
// to 1: a second connection to "a" is closed at accept and counted in downstream_cx_overflow,
// another listener is not limited, and a closed connection frees its place.
func TestListenerConnectionLimitRuntime(t *testing.T) {
	g := newGreeter()
	st := newStore(t)
	runtime := func(key string, def uint64) uint64 {
		if key == "envoy.resource_limits.listener.a.connection_limit" {
			return 1
		}
		return def
	}
	m := testManager(t, ManagerConfig{Services: g.services(), Workers: 1, Stats: st, Runtime: runtime},
		listenerFromYAML(t, plainListener("a", ", stat_prefix: a")),
		listenerFromYAML(t, plainListener("b", ", stat_prefix: b")))
	first := mustGreet(t, m, "a")
	if got, c, _ := greet(t, addrOf(t, m, "a"), nil); c != nil {
		c.Close()
		t.Fatalf("a connection over the listener's limit was served (greeting %q)", got)
	}
	wantStat(t, st, "listener.a.downstream_cx_overflow", 1)
	b1 := mustGreet(t, m, "b")
	b2 := mustGreet(t, m, "b")
	b1.Close()
	b2.Close()
	first.Close()
	for i := 0; i < 3; i++ { // first, b1 and b2 have closed on the server side
		<-g.served
	}
	mustGreet(t, m, "a").Close()
	wantStat(t, st, "listener.a.downstream_cx_overflow", 1)
}

// TestRuntimeGlobalConnectionLimit sets Envoy's deprecated runtime key
// overload.global_downstream_max_connections to 1 without an overload manager: a second
// connection is closed at accept and counted in downstream_global_cx_overflow, while a
// listener with ignore_global_conn_limit keeps accepting.
func TestRuntimeGlobalConnectionLimit(t *testing.T) {
	g := newGreeter()
	st := newStore(t)
	runtime := func(key string, def uint64) uint64 {
		if key == "overload.global_downstream_max_connections" {
			return 1
		}
		return def
	}
	m := testManager(t, ManagerConfig{Services: g.services(), Workers: 1, Stats: st, Runtime: runtime},
		listenerFromYAML(t, plainListener("a", ", stat_prefix: a")),
		listenerFromYAML(t, plainListener("free", ", stat_prefix: free, ignore_global_conn_limit: true")))
	first := mustGreet(t, m, "a")
	defer first.Close()
	if got, c, _ := greet(t, addrOf(t, m, "a"), nil); c != nil {
		c.Close()
		t.Fatalf("a connection over the runtime's global limit was served (greeting %q)", got)
	}
	wantStat(t, st, "listener.a.downstream_global_cx_overflow", 1)
	mustGreet(t, m, "free").Close()
}
