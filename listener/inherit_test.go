package listener

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/config"
)

// TestInheritedSocketHandover plays a hot restart inside one process: a
// parent manager passes its socket (a duplicate, as SCM_RIGHTS gives) to a
// child manager configured with the same address, then stops; connections
// keep reaching the same port and the child serves them.
func TestInheritedSocketHandover(t *testing.T) {
	g := newGreeter()
	parent := testManager(t, ManagerConfig{Services: g.services()}, listenerFromYAML(t, plainListener("parent", "")))
	addr := addrOf(t, parent, "parent")

	if got, want := parent.ListenAddresses(), []config.Address{{Kind: config.SocketAddress, Host: "127.0.0.1", Port: 0}}; !cmp.Equal(got, want, cmp.Comparer(func(a, b config.Address) bool { return a.String() == b.String() })) {
		t.Errorf("ListenAddresses() = %v; want %v", got, want)
	}
	ln := parent.ListenSocket("127.0.0.1:0")
	if ln == nil {
		t.Fatal(`ListenSocket("127.0.0.1:0") = nil; want the bound socket`)
	}
	if got := parent.ListenSocket("127.0.0.1:1"); got != nil {
		t.Errorf(`ListenSocket("127.0.0.1:1") = %v; want nil`, got.Addr())
	}
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	dup, err := net.FileListener(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	unused, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	child, err := NewManager(ManagerConfig{Stats: newStore(t), Services: g.services(), Extensions: testExtensions(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := child.AddStatic([]*config.Listener{listenerFromYAML(t, plainListener("child", ""))}); err != nil {
		t.Fatal(err)
	}
	child.InheritSockets(map[string]net.Listener{"127.0.0.1:0": dup, "127.0.0.1:1": unused})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- child.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	if got := addrOf(t, child, "child"); got != addr {
		t.Errorf("child bound %s; want the inherited %s", got, addr)
	}
	child.ReleaseInherited()
	if _, err := unused.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("unused inherited socket: Accept() error %v; want closed", err)
	}

	parent.StopListeners(false)
	for range 3 {
		line, c, _ := greet(t, addr, nil)
		if line != "child-chain" {
			t.Errorf("greeting after the parent stopped = %q; want child-chain", line)
		}
		if c != nil {
			c.Close()
		}
	}
}
