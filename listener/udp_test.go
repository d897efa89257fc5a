package listener

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	udpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/clock/clocktest"
	"github.com/legateproxy/legate/internal/registry"
)

// tagEcho is a PacketHandler that answers each datagram with its tag and the datagram.
type tagEcho struct {
	tag    string
	closed atomic.Bool
}

func (h *tagEcho) Packet(pc *net.UDPConn, from netip.AddrPort, data []byte) {
	pc.WriteToUDPAddrPort(append([]byte(h.tag+":"), data...), from)
}

func (h *tagEcho) Close() error {
	h.closed.Store(true)
	return nil
}

// udpListener is a UDP listener on addr whose UDP proxy's stat_prefix is tag.
func udpListener(t *testing.T, addr, tag string) *config.Listener {
	host, port, _ := net.SplitHostPort(addr)
	return listenerFromYAML(t, `{name: udp, address: {socket_address: {protocol: UDP, address: `+host+`, port_value: `+port+`}},
listener_filters: [{name: envoy.filters.udp_listener.udp_proxy, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.udp.udp_proxy.v3.UdpProxyConfig, stat_prefix: `+tag+`, cluster: c}}]}`)
}

// runUDPManager runs a manager whose UDP listeners get tagEchoes tagged tag (each sent on
// built), with the static listeners ls.
func runUDPManager(t *testing.T, built chan<- *tagEcho, tag string, ls ...*config.Listener) (*Manager, *clocktest.Fake) {
	t.Helper()
	clk := newFakeClock()
	var n atomic.Int32
	b := registry.NewBuilder()
	registry.Add(b, UDPFilters, config.UDPProxyFilter, &udpproxyv3.UdpProxyConfig{}, func(ctx *PacketContext, _ any) (PacketHandler, error) {
		h := &tagEcho{tag: fmt.Sprintf("%s/%s%d", tag, ctx.Listener.Name, n.Add(1))}
		built <- h
		return h, nil
	})
	ext, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewManager(ManagerConfig{Stats: newStore(t), Clock: clk, Extensions: ext})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.AddStatic(ls); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(); err != nil { // bound before Run, which then serves
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return m, clk
}

func udpAsk(t *testing.T, addr, msg string) string {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte(msg))
	c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 1024)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("answer to %q: %v", msg, err)
	}
	return string(buf[:n])
}

// TestUDPListener checks a UDP listener's life in the manager (LDS): it binds, /listeners
// shows its bound port, datagrams reach the handler; an update on the same address hands new
// datagrams to the new version's handler and closes the old one when its drain ends; Close
// closes the current one.
func TestUDPListener(t *testing.T) {
	built := make(chan *tagEcho, 4)
	m, clk := runUDPManager(t, built, "lds")
	if _, err := m.AddOrUpdate(udpListener(t, "127.0.0.1:0", "one"), "1"); err != nil {
		t.Fatal(err)
	}
	first := <-built
	bound := m.Addrs()["udp"][0].(*net.UDPAddr)
	if st := m.Statuses(); len(st) != 1 || st[0].Addresses[0].Port != uint32(bound.Port) {
		t.Errorf("Statuses = %v; want the bound port %d", st, bound.Port)
	}
	if got := udpAsk(t, bound.String(), "a"); got != "lds/udp1:a" {
		t.Fatalf("answer = %q; want lds/udp:a", got)
	}
	if _, err := m.AddOrUpdate(udpListener(t, "127.0.0.1:0", "two"), "2"); err != nil {
		t.Fatal(err)
	}
	second := <-built
	if got := udpAsk(t, bound.String(), "b"); got != "lds/udp2:b" {
		t.Fatalf("answer after the update = %q; want lds/udp2:b (the same socket, the new handler)", got)
	}
	if first.closed.Load() {
		t.Fatal("the old version's handler closed before its drain ended")
	}
	clk.Advance(m.DrainManager().DrainTime())
	deadline := time.Now().Add(wait)
	for !first.closed.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the old version's handler was not closed at the end of its drain")
		}
		time.Sleep(time.Millisecond)
	}
	m.Close()
	if !second.closed.Load() {
		t.Error("the current handler was not closed with the manager")
	}
}

// TestUDPListenerSharesPortForHotRestart checks that a second manager binds the UDP port the
// first still holds (SO_REUSEPORT), as a hot-restart child must, and serves it once the
// first closes.
func TestUDPListenerSharesPortForHotRestart(t *testing.T) {
	built := make(chan *tagEcho, 4)
	parent, _ := runUDPManager(t, built, "parent", udpListener(t, "127.0.0.1:0", "p"))
	<-built
	addr := parent.Addrs()["udp"][0].String()
	child, _ := runUDPManager(t, built, "child", udpListener(t, addr, "c"))
	<-built
	if got := child.Addrs()["udp"][0].String(); got != addr {
		t.Fatalf("child bound %s; want the parent's %s", got, addr)
	}
	parent.Close()
	if got := udpAsk(t, addr, "b"); got != "child/udp1:b" {
		t.Fatalf("answer after the parent closed = %q; want child/udp1:b", got)
	}
}
