package nettest

import (
	"net"
	"strconv"
	"syscall"
	"testing"

	"google.golang.org/grpc"
)

// ServeGRPC runs a grpc-go server on 127.0.0.1 with the services register adds, until the
// test ends, and returns its address: the authorization or rate limit service a filter calls.
func ServeGRPC(tb testing.TB, register func(*grpc.Server)) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := grpc.NewServer()
	register(srv)
	go srv.Serve(ln)
	tb.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// ClosedAddr is an address on 127.0.0.1 nothing listens on, until the test ends: a service
// that is down. It holds the port with a socket that is bound but not listening, so a dial is
// refused and no later listener gets it. A port closed again at once (a listener opened and
// closed) goes back to the kernel's pool for port 0, and the test's own listener could then
// be handed it: a filter calling its service there calls its own listener, which calls again.
func ClosedAddr(tb testing.TB) string {
	tb.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { syscall.Close(fd) })
	// Without SO_REUSEADDR on this socket, nothing else may bind the port while it is open.
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		tb.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		tb.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}
