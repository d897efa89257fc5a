package pool

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/legateproxy/legate/internal/nettest"
)

// sockPair returns an upstream connection to a local listener, the Manager whose stats it
// counts in, and the listener's end of the connection.
func sockPair(t *testing.T) (*upConn, *Manager, *net.TCPConn) {
	t.Helper()
	nc, peer := nettest.TCPPair(t)
	cm, store := newClusterManager(t, staticCluster("", nc.RemoteAddr().String()))
	m := newManager(t, cm, store, nil)
	return &upConn{Conn: nc, hp: hostPoolOf(t, m)}, m, peer
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
	uc, m, peer := sockPair(t)
	w := &sockWriter{uc: uc, fd: -1}
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
	uc, _, peer := sockPair(t)
	w := &sockWriter{uc: uc, fd: -1}
	peer.SetLinger(0)
	peer.Close() // a reset
	raw, _ := rawSocket(w.uc.Conn)
	waitFor(t, "the reset to arrive", func() bool { return readable(raw) })
	if n, err := writeInRawRead(t, w, []byte("GET / HTTP/1.1\r\n\r\n")); n != 0 || err == nil {
		t.Errorf("Write after a reset = %d, %v; want 0 and an error", n, err)
	}
}

// TestSockReader: a raw recv in send's callback (readAnswer) fills the reader with what came,
// counted as read; finds nothing (wait on); or keeps the end of stream or a reset for the
// next read, through the connection, which returns it.
func TestSockReader(t *testing.T) {
	for _, tt := range []struct {
		name  string
		peer  func(*net.TCPConn)
		ready bool
		check func(error) bool // of the read after the callback
	}{
		{name: "nothing", peer: func(*net.TCPConn) {}},
		{name: "bytes", peer: func(p *net.TCPConn) { io.WriteString(p, "HTTP/1.1 200 OK\r\n") }, ready: true,
			check: func(err error) bool { return err == nil }},
		{name: "end of stream", peer: func(p *net.TCPConn) { p.Close() }, ready: true,
			check: func(err error) bool { return err == io.EOF }},
		{name: "reset", peer: func(p *net.TCPConn) { p.SetLinger(0); p.Close() }, ready: true,
			check: func(err error) bool { return errors.Is(err, syscall.ECONNRESET) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			uc, m, peer := sockPair(t)
			c := &h1conn{uc: uc, sr: sockReader{uc: uc, fd: -1}}
			c.br = bufio.NewReader(&c.sr)
			raw, _ := rawSocket(uc.Conn)
			tt.peer(peer)
			if tt.ready {
				waitFor(t, "the peer's bytes or end", func() bool { return readable(raw) })
			}
			var ready bool
			raw.Read(func(fd uintptr) bool { ready = c.readAnswer(int(fd)); return true })
			if ready != tt.ready {
				t.Fatalf("readAnswer = %v; want %v", ready, tt.ready)
			}
			if !ready {
				return
			}
			line, err := c.br.ReadString('\n')
			if !tt.check(err) {
				t.Errorf("read after the callback = %q, %v", line, err)
			}
			if want := uint64(len(line)); m.st.UpstreamCxRxBytesTotal.Value() != want || uc.rx != int64(want) {
				t.Errorf("upstream_cx_rx_bytes_total = %d, rx %d; want %d", m.st.UpstreamCxRxBytesTotal.Value(), uc.rx, want)
			}
		})
	}
}

// readable polls the socket of raw, without reading from it or clearing its error.
func readable(raw syscall.RawConn) bool {
	var ready bool
	raw.Control(func(fd uintptr) {
		pfd := [1]struct {
			fd             int32
			events, revent int16
		}{{fd: int32(fd), events: 0x1}} // POLLIN
		n, _, errno := syscall.Syscall(syscall.SYS_POLL, uintptr(unsafe.Pointer(&pfd[0])), 1, 0)
		ready = errno == 0 && n == 1
	})
	return ready
}
