package nettest

import (
	"io"
	"net"
	"testing"
	"time"
)

func TestServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	handled := make(chan struct{}, 2)
	t.Run("serves each connection", func(t *testing.T) {
		Serve(t, ln, func(c net.Conn) {
			defer c.Close()
			io.Copy(c, c)
			handled <- struct{}{}
		})
		for _, msg := range []string{"one", "two"} {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(10 * time.Second))
			io.WriteString(c, msg)
			c.(*net.TCPConn).CloseWrite()
			got, err := io.ReadAll(c)
			c.Close()
			if err != nil || string(got) != msg {
				t.Errorf("echo = %q, %v; want %q, nil", got, err, msg)
			}
		}
	})
	// The subtest's cleanup has closed the listener and waited for both handlers.
	if got := len(handled); got != 2 {
		t.Errorf("handlers returned before cleanup ended = %d; want 2", got)
	}
}

// TestClosedAddr: a dial to ClosedAddr is refused, and the port stays taken until the test
// ends, so no listener (the test's own, bound to port 0) can be handed it.
func TestClosedAddr(t *testing.T) {
	a := ClosedAddr(t)
	if c, err := net.DialTimeout("tcp", a, 10*time.Second); err == nil {
		c.Close()
		t.Fatalf("dial %s succeeded; want refused", a)
	}
	ln, err := net.Listen("tcp", a)
	if err == nil {
		ln.Close()
		t.Fatalf("listen on %s succeeded; want the port held", a)
	}
}
