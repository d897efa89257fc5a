package httpproxy

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/legateproxy/legate/stats"
)

// tcpPair returns the two ends of a TCP connection on 127.0.0.1.
func tcpPair(t *testing.T) (server *net.TCPConn, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn), client
}

// idleReader is the reader of a plain downstream socket, past its first read.
func idleReader(t *testing.T, server *net.TCPConn) *reader {
	t.Helper()
	raw, err := server.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var rd reader
	rd.init(server, raw, 4096, new(stats.HotCounter))
	rd.drained = true
	return &rd
}

// TestFillIdleReadsAfterWaiting: the idle read of a plain socket returns the next request
// whether it was there already or came while the read waited (its buffer given back
// meanwhile), counts the bytes, and reports the client's close as io.EOF.
func TestFillIdleReadsAfterWaiting(t *testing.T) {
	server, client := tcpPair(t)
	rd := idleReader(t, server)
	server.SetReadDeadline(time.Now().Add(10 * time.Second)) // a bound on a missed wake-up
	const first, second = "GET /1 HTTP/1.1\r\n\r\n", "GET /2 HTTP/1.1\r\n\r\n"
	if _, err := io.WriteString(client, first); err != nil {
		t.Fatal(err)
	}
	got := ""
	for len(got) < len(first) {
		if err := rd.fillIdle(); err != nil {
			t.Fatalf("fillIdle with bytes there = %v", err)
		}
		got += string(rd.Buffered())
		rd.Discard(rd.buffered())
	}
	if got != first {
		t.Fatalf("first read = %q; want %q", got, first)
	}
	done := make(chan error, 1)
	go func() { done <- rd.fillIdle() }() // nothing there yet: it waits
	time.Sleep(20 * time.Millisecond)     // let the read find the socket empty (either way is correct)
	if _, err := io.WriteString(client, second); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("fillIdle after waiting = %v", err)
	}
	if got := string(rd.Buffered()); got != second[:len(got)] || got == "" {
		t.Fatalf("second read = %q; want a prefix of %q", got, second)
	}
	if got, want := rd.rx.Value(), uint64(len(first)+rd.buffered()); got != want {
		t.Errorf("rx bytes = %d; want %d", got, want)
	}
	rd.Discard(rd.buffered())
	for rd.rx.Value() < uint64(len(first)+len(second)) {
		if err := rd.fillIdle(); err != nil {
			t.Fatalf("fillIdle for the rest = %v", err)
		}
		rd.Discard(rd.buffered())
	}
	client.Close()
	if err := rd.fillIdle(); err != io.EOF {
		t.Errorf("fillIdle after the client closed = %v; want io.EOF", err)
	}
	if len(rd.buf) != readBufferSize {
		t.Errorf("buffer after the close = %d bytes; want %d", len(rd.buf), readBufferSize)
	}
}

// TestFillIdleDeadline: a read deadline (idle timeout, drain wake-up) ends the idle read with
// os.ErrDeadlineExceeded and leaves the reader a buffer for what follows (408, lingering close).
func TestFillIdleDeadline(t *testing.T) {
	server, _ := tcpPair(t)
	rd := idleReader(t, server)
	server.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	err := rd.fillIdle()
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("fillIdle past the deadline = %v; want os.ErrDeadlineExceeded", err)
	}
	if len(rd.buf) != readBufferSize {
		t.Errorf("buffer after the deadline = %d bytes; want %d", len(rd.buf), readBufferSize)
	}
}

// TestFillIdleKeepsConnBytes: until a read of the connection came back short, bytes may wait
// in the connection itself (a listener filter's peeked bytes), so the idle read goes through
// the connection and finds them instead of reading the socket past them.
func TestFillIdleKeepsConnBytes(t *testing.T) {
	server, _ := tcpPair(t)
	rd := idleReader(t, server)
	rd.drained = false
	const peeked = "GET /peeked HTTP/1.1\r\n\r\n"
	rd.conn = &pipeConn{Conn: server, r: strings.NewReader(peeked)}
	if err := rd.fillIdle(); err != nil {
		t.Fatalf("fillIdle = %v", err)
	}
	if got := string(rd.Buffered()); got != peeked {
		t.Errorf("read = %q; want the connection's own bytes %q", got, peeked)
	}
	if !rd.drained {
		t.Error("a short read of the connection did not mark it drained")
	}
}
