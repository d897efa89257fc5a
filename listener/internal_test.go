package listener

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/filterstate"
)

// TestPipeFlowControl: a direction holds its buffer size and no more; the writer waits until
// the reader takes bytes, and everything arrives in order.
func TestPipeFlowControl(t *testing.T) {
	c, s := newPipe(8, internalClient, internalAddr{listener: "l"})
	defer c.Close()
	defer s.Close()
	msg := bytes.Repeat([]byte("0123456789"), 100)
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write(msg)
		wrote <- err
	}()
	// The writer cannot finish before the reader reads: only 8 bytes fit.
	c.SetWriteDeadline(time.Time{})
	select {
	case err := <-wrote:
		t.Fatalf("a 1000-byte write into an 8-byte pipe returned (%v) before anything was read", err)
	case <-time.After(50 * time.Millisecond):
	}
	s.tx.mu.Lock() // nothing flowed the other way
	if len(s.tx.buf) != 0 {
		t.Errorf("server->client direction holds %d bytes", len(s.tx.buf))
	}
	s.tx.mu.Unlock()
	got := make([]byte, 0, len(msg))
	buf := make([]byte, 3)
	for len(got) < len(msg) {
		n, err := s.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if n > 8 {
			t.Fatalf("read %d bytes at once from an 8-byte pipe", n)
		}
		got = append(got, buf[:n]...)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("the bytes arrived changed")
	}
}

// TestPipeCloseAndDeadlines: CloseWrite gives the peer EOF after the buffered bytes and keeps
// the other direction open; Close fails the peer's writes and this end's reads; deadlines
// time reads and writes out and can be lifted.
func TestPipeCloseAndDeadlines(t *testing.T) {
	c, s := newPipe(4, internalClient, internalAddr{listener: "l"})
	io.WriteString(c, "abc")
	c.CloseWrite()
	if b, err := io.ReadAll(s); err != nil || string(b) != "abc" {
		t.Fatalf("after CloseWrite the peer read %q, %v; want abc then EOF", b, err)
	}
	if _, err := io.WriteString(s, "back"); err != nil {
		t.Fatalf("the other direction after CloseWrite: %v", err)
	}
	b := make([]byte, 4)
	if n, err := io.ReadFull(c, b); n != 4 || err != nil {
		t.Fatalf("reading the other direction: %d, %v", n, err)
	}

	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := c.Read(b); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
	io.WriteString(s, "full")
	s.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := io.WriteString(s, "x"); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write into a full pipe past the deadline: %v", err)
	}
	c.SetDeadline(time.Time{})
	if n, err := io.ReadFull(c, b); n != 4 || err != nil {
		t.Fatalf("after lifting the deadline: %d, %v", n, err)
	}
	read := make(chan error, 1)
	go func() { _, err := c.Read(b); read <- err }()
	c.Close()
	if err := <-read; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a read blocked when its end closed: %v", err)
	}
	if _, err := io.WriteString(s, "y"); err == nil {
		t.Fatal("a write to a closed peer succeeded")
	}
}

// TestInternalListener: a cluster reaches an internal listener through DialInternal: the
// connection is served by the listener's filter chain, carries data both ways, has internal
// addresses, and counts in the listener's stats; an update keeps the name reachable, and once
// the listener is removed, dials fail.
func TestInternalListener(t *testing.T) {
	st := newStore(t)
	inner := `{name: inner, internal_listener: {}, filter_chains: [{name: chain, filters: [{name: test.addrs}]}]}`
	m := testManager(t, ManagerConfig{Stats: st, Services: addrServices(), InternalListener: &config.InternalListener{BufferSize: 16}})
	if _, err := m.AddOrUpdate(listenerFromYAML(t, inner), "1"); err != nil {
		t.Fatal(err)
	}
	// An update that changes more than the chains rebinds: the new version takes the name.
	if _, err := m.AddOrUpdate(listenerFromYAML(t, strings.Replace(inner, "{name: inner,", "{name: inner, per_connection_buffer_limit_bytes: 1000,", 1)), "2"); err != nil {
		t.Fatal(err)
	}
	dial := func(addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		return m.DialInternal(ctx, addr)
	}
	c, err := dial("envoy://inner/ep/1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	line, err := bufioReader(c).ReadString('\n')
	if want := "chain envoy://internal_client_address/ envoy://inner/ep/1 envoy://internal_client_address/ false\n"; err != nil || line != want {
		t.Fatalf("handler saw %q, %v; want %q", line, err, want)
	}
	big := bytes.Repeat([]byte("x"), 100_000) // far more than the 16-byte buffers
	go c.Write(big)
	got := make([]byte, len(big))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("echo of 100 kB through 16-byte buffers: %v", err)
	}
	wantStat(t, st, "listener.envoy_//inner/.downstream_cx_total", 1)
	if _, err := dial("envoy://nosuch/"); err == nil {
		t.Fatal("a dial to an unknown internal listener succeeded")
	}
	if _, err := m.Remove("inner"); err != nil {
		t.Fatal(err)
	}
	if _, err := dial("envoy://inner/"); err == nil {
		t.Fatal("a dial to a removed internal listener succeeded")
	}
}

// TestInternalListenerNeedsBootstrapExtension: without envoy.bootstrap.internal_listener an
// internal listener is refused, as in Envoy.
func TestInternalListenerNeedsBootstrapExtension(t *testing.T) {
	m, err := NewManager(ManagerConfig{Stats: newStore(t), Services: addrServices(), Extensions: testExtensions(t)})
	if err != nil {
		t.Fatal(err)
	}
	err = m.AddStatic([]*config.Listener{listenerFromYAML(t, `{name: inner, internal_listener: {}, filter_chains: [{filters: [{name: test.addrs}]}]}`)})
	if err == nil || !strings.Contains(err.Error(), "envoy.bootstrap.internal_listener") {
		t.Fatalf("AddStatic = %v; want the missing bootstrap extension named", err)
	}
}

// TestInternalListenerInheritsSharedFilterState: the objects a dial's context shares
// (filterstate.WithUpstream, what the pool passes for a TCP proxy's connection) reach the
// internal listener's connection: one shared with every upstream connection stays shared
// onwards, one shared once stays but is not shared again.
func TestInternalListenerInheritsSharedFilterState(t *testing.T) {
	type seen struct {
		tenant, hop string
		shared      []string
	}
	got := make(chan seen, 1)
	r := serving("test.state", func(*ChainContext, any) (FilterChainHandler, error) {
		return HandlerFunc(func(c *Conn) {
			defer c.Close()
			s := seen{}
			if o := c.FilterState().Get("acme.tenant"); o != nil {
				s.tenant, _ = o.Plain()
			}
			if o := c.FilterState().Get("acme.hop"); o != nil {
				s.hop, _ = o.Plain()
			}
			for _, e := range c.FilterState().Shared() {
				s.shared = append(s.shared, e.Name)
			}
			got <- s
		}), nil
	})
	m := testManager(t, ManagerConfig{Stats: newStore(t), Services: r, InternalListener: &config.InternalListener{BufferSize: 1024}},
		listenerFromYAML(t, `{name: inner, internal_listener: {}, filter_chains: [{filters: [{name: test.state}]}]}`))
	outer := &filterstate.State{}
	outer.Set("acme.tenant", filterstate.String("blue"), filterstate.Options{Sharing: filterstate.SharedWithUpstream})
	outer.Set("acme.hop", filterstate.String("first"), filterstate.Options{Sharing: filterstate.SharedWithUpstreamOnce})
	outer.Set("acme.private", filterstate.String("x"), filterstate.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, err := m.DialInternal(filterstate.WithUpstream(ctx, outer.Shared()), "envoy://inner/")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case s := <-got:
		if s.tenant != "blue" || s.hop != "first" || len(s.shared) != 1 || s.shared[0] != "acme.tenant" {
			t.Errorf("inner connection's filter state: tenant %q, hop %q, shared %v; want blue, first, [acme.tenant]", s.tenant, s.hop, s.shared)
		}
	case <-time.After(wait):
		t.Fatal("the internal listener's handler never ran")
	}
}
