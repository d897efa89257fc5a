package sockio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/legateproxy/legate/internal/nettest"
)

// pair returns the two ends of a loopback TCP connection; the second is a syscall.RawConn.
func pair(t *testing.T) (net.Conn, syscall.RawConn, *net.TCPConn) {
	peer, c := nettest.TCPPair(t)
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	return peer, raw, c
}

// recvOnce waits until the socket is readable and returns one Recv's result.
func recvOnce(t *testing.T, raw syscall.RawConn, p []byte) (n int, err error) {
	t.Helper()
	if rerr := raw.Read(func(fd uintptr) bool {
		n, err = Recv(int(fd), p)
		return err != syscall.EAGAIN
	}); rerr != nil {
		t.Fatal(rerr)
	}
	return n, err
}

// TestRecvSend moves bytes both ways through a real TCP connection and checks what each call
// reports: the bytes, EAGAIN on an empty socket, a partial Send on a full one, and (0, nil) at
// the peer's close.
func TestRecvSend(t *testing.T) {
	peer, raw, _ := pair(t)
	var n int
	var err error
	raw.Read(func(fd uintptr) bool { n, err = Recv(int(fd), make([]byte, 8)); return true })
	if n != 0 || err != syscall.EAGAIN {
		t.Fatalf("Recv on an empty socket = %d, %v; want 0, EAGAIN", n, err)
	}

	if _, err := peer.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := recvOnce(t, raw, buf); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("Recv = %q, %v; want hello", buf[:n], err)
	}

	want := bytes.Repeat([]byte("0123456789"), 100_000) // more than the socket buffers hold
	got := make(chan []byte)
	go func() { b, _ := io.ReadAll(io.LimitReader(peer, int64(len(want)))); got <- b }()
	for rest := want; len(rest) > 0; {
		var sent int
		if werr := raw.Write(func(fd uintptr) bool {
			sent, err = Send(int(fd), rest)
			return err != syscall.EAGAIN
		}); werr != nil {
			t.Fatal(werr)
		}
		if err != nil {
			t.Fatalf("Send: %v", err)
		}
		rest = rest[sent:]
	}
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("the peer read %d bytes, not the %d sent", len(b), len(want))
	}

	peer.Close()
	if n, err := recvOnce(t, raw, buf); n != 0 || err != nil {
		t.Fatalf("Recv after the peer closed = %d, %v; want 0, nil", n, err)
	}
}

// TestRecvSendAfterReset checks the calls' errors on a connection the peer reset (closed
// with SO_LINGER 0): ECONNRESET for Recv once the reset came, EPIPE for Send after it.
func TestRecvSendAfterReset(t *testing.T) {
	peer, raw, c := pair(t)
	if err := peer.(*net.TCPConn).SetLinger(0); err != nil {
		t.Fatal(err)
	}
	peer.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if n, err := recvOnce(t, raw, make([]byte, 8)); n != 0 || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Recv after the peer's reset = %d, %v; want 0, ECONNRESET", n, err)
	}
	var err error
	raw.Write(func(fd uintptr) bool { _, err = Send(int(fd), []byte("x")); return true })
	if !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("Send after the peer's reset: %v; want EPIPE", err)
	}
}
