//go:build linux

package listener

import "syscall"

// soReusePort is SO_REUSEPORT on Linux, which package syscall does not name.
const soReusePort = 0xf

// reusePort sets SO_REUSEPORT on a UDP socket before it binds, as Envoy's listeners do by
// default (enable_reuse_port): a hot-restart child binds the port its parent still serves
// (UDP sockets are not handed over), and the kernel gives the child the datagrams once the
// parent's socket closes.
func reusePort(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, soReusePort, 1)
	})
	if err != nil {
		return err
	}
	return serr
}
