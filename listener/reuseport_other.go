//go:build !linux

package listener

import "syscall"

// reusePort leaves the socket as it is where SO_REUSEPORT is not wired: a hot-restart child
// cannot bind a UDP port its parent still serves.
func reusePort(_, _ string, _ syscall.RawConn) error { return nil }
