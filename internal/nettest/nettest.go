package nettest

import (
	"net"
	"sync"
	"testing"
)

// Serve accepts connections on ln until the test ends and runs handle for each on a goroutine
// of its own. When the test ends it closes ln and waits for the accept loop and every handler
// to return, so handle must end by itself (its peer closes, or a deadline passes).
func Serve(tb testing.TB, ln net.Listener, handle func(net.Conn)) {
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { handle(c) })
		}
	})
	tb.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
}

// TCPPair returns the two ends of a TCP connection on 127.0.0.1, the dialing client's and the
// accepting server's; both close when the test ends.
func TCPPair(tb testing.TB) (client, server *net.TCPConn) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	s, err := ln.Accept()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}
