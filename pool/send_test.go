package pool

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// sockWriterPair returns a sockWriter on a new connection to a local listener, the Manager
// whose stats it counts in, and the listener's end of the connection.
func sockWriterPair(t *testing.T) (*sockWriter, *Manager, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cm, store := newClusterManager(t, staticCluster("", ln.Addr().String()))
	m := newManager(t, cm, store, nil)
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	return &sockWriter{uc: &upConn{Conn: nc, hp: hostPoolOf(t, m)}, fd: -1}, m, peer.(*net.TCPConn)
}

// writeInRawRead writes p through w inside a raw read of its connection, as send does.
func writeInRawRead(t *testing.T, w *sockWriter, p []byte) (int, error) {
	raw, _ := rawSocket(w.uc.Conn)
	var n int
	var err error
	if rerr := raw.Read(func(fd uintptr) bool {
		w.fd = int(fd)
		n, err = w.Write(p)
		w.fd = -1
		return true
	}); rerr != nil {
		t.Fatalf("raw read: %v", rerr)
	}
	return n, err
}

// TestSockWriterFallsBack: what the raw send cannot take at once (the peer reads nothing
// yet and the socket buffers are full) goes through the connection's own write, which waits
// for the peer; every byte arrives once and in order, and is counted once.
func TestSockWriterFallsBack(t *testing.T) {
	w, m, peer := sockWriterPair(t)
	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<19) // 8 MiB, more than the socket buffers hold
	start, got := make(chan struct{}), make(chan []byte, 1)
	go func() {
		<-start
		peer.SetReadDeadline(time.Now().Add(30 * time.Second))
		b, _ := io.ReadAll(io.LimitReader(peer, int64(len(payload))))
		got <- b
	}()
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := writeInRawRead(t, w, payload)
		done <- result{n, err}
	}()
	waitFor(t, "the raw send to take its part", func() bool { return m.st.UpstreamCxTxBytesTotal.Value() > 0 })
	if sent := m.st.UpstreamCxTxBytesTotal.Value(); sent >= uint64(len(payload)) {
		t.Fatalf("raw send took all %d bytes; want part of them", sent)
	}
	close(start)
	r := <-done
	if r.n != len(payload) || r.err != nil {
		t.Errorf("Write = %d, %v; want %d, nil", r.n, r.err, len(payload))
	}
	if b := <-got; !bytes.Equal(b, payload) {
		t.Errorf("peer read %d bytes, equal %v; want the %d bytes written", len(b), bytes.Equal(b, payload), len(payload))
	}
	if sent := m.st.UpstreamCxTxBytesTotal.Value(); sent != uint64(len(payload)) {
		t.Errorf("upstream_cx_tx_bytes_total = %d; want %d", sent, len(payload))
	}
}

// TestSockWriterError: a send on a connection the peer reset fails through the connection's
// own write, which reports the error.
func TestSockWriterError(t *testing.T) {
	w, _, peer := sockWriterPair(t)
	peer.SetLinger(0)
	peer.Close() // a reset
	raw, _ := rawSocket(w.uc.Conn)
	waitFor(t, "the reset to arrive", func() bool {
		var st idleState
		raw.Read(func(fd uintptr) bool { st = peekFD(fd); return true })
		return st == idleClosed
	})
	if n, err := writeInRawRead(t, w, []byte("GET / HTTP/1.1\r\n\r\n")); n != 0 || err == nil {
		t.Errorf("Write after a reset = %d, %v; want 0 and an error", n, err)
	}
}
