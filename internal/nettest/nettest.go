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
