package nettest

import (
	"net"
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

// ClosedAddr is an address on 127.0.0.1 nothing listens on: a service that is down.
func ClosedAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return a
}
