//go:build linux

package listener

import (
	"net"
	"os"
	"syscall"
)

// takeQueued accepts, without waiting, the connections the kernel has queued on ln, so that
// closing ln resets none of them. Errors end the taking: what was taken is served.
func takeQueued(ln net.Listener) []net.Conn {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	var fds []int
	rc.Read(func(fd uintptr) bool {
		for {
			nfd, _, err := syscall.Accept4(int(fd), syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC)
			switch err {
			case nil:
				fds = append(fds, nfd)
			case syscall.EINTR, syscall.ECONNABORTED:
			default:
				return true // EAGAIN: the queue is empty
			}
		}
	})
	var out []net.Conn
	for _, fd := range fds {
		f := os.NewFile(uintptr(fd), "queued")
		nc, err := net.FileConn(f) // a duplicate of fd, in the runtime's poller
		f.Close()
		if err == nil {
			out = append(out, nc)
		}
	}
	return out
}
