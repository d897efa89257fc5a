// Package sockio reads and writes connected stream sockets with the socket system calls,
// recv(2) and send(2) (recvfrom and sendto without an address), rather than read(2) and
// write(2), as nginx does. The socket calls go to the protocol straight from the descriptor;
// read and write pass through the VFS layer first (fdget_pos, rw_verify_area, the socket's
// read_iter and write_iter). On the HTTP/1.1 rig that layer was about 0.4 µs of Legate's
// kernel time per proxied request (vfs_read, vfs_write, sock_read_iter, fdget_pos in
// bench/cpuprofile.sh's diff beside nginx), which calls recv and writev.
//
// The calls do not wait: they are meant for non-blocking sockets (as every net.Conn's is)
// inside syscall.RawConn callbacks, and return syscall.EAGAIN when the socket is not ready.
// So they are made as raw system calls, without telling the scheduler (entersyscall and
// exitsyscall, about 230 instructions a call, 450 of a proxied request's 26,400 under
// bench/callgrind.sh), which only matters for a call that may block: the scheduler would
// hand the blocked thread's P to another. A non-blocking socket call returns within
// microseconds (a send on loopback runs the receiver's protocol work inline); other
// goroutines of the P wait that long either way, or are stolen by idle Ps. Under the race detector
// they synchronize as syscall.Read and syscall.Write do, so that a message sent through a
// socket orders what its sender did before it with what its receiver does after.
package sockio

import (
	"syscall"
	"unsafe"
)

// Recv reads from the connected socket fd into p, retrying an interrupted call. It returns
// (0, nil) at the peer's end of stream.
//
// Recv and Send make the system call themselves, each with its own retry loop, rather than
// through a shared helper, which the compiler did not inline: its frame (its arguments
// spilled and reloaded, its results passed back) was about 20 instructions of every call, and
// a proxied HTTP/1.1 request makes four.
func Recv(fd int, p []byte) (int, error) {
	base := bytesBase(p)
	for {
		n, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, uintptr(fd), uintptr(base), uintptr(len(p)), 0, 0, 0)
		if e != 0 {
			if e == syscall.EINTR {
				continue
			}
			return 0, e
		}
		if n > 0 {
			raceWrite(base, int(n))
		}
		raceAcquire()
		return int(n), nil
	}
}

// Send writes p to the connected socket fd, retrying an interrupted call; it may write less
// than p (a full socket buffer). MSG_NOSIGNAL: a peer that closed yields EPIPE, not SIGPIPE.
func Send(fd int, p []byte) (int, error) {
	base := bytesBase(p)
	raceReleaseMerge()
	for {
		n, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, uintptr(fd), uintptr(base), uintptr(len(p)), syscall.MSG_NOSIGNAL, 0, 0)
		if e != 0 {
			if e == syscall.EINTR {
				continue
			}
			return 0, e
		}
		if n > 0 {
			raceRead(base, int(n))
		}
		return int(n), nil
	}
}

// bytesBase is the address of p's first byte, nil for an empty p.
func bytesBase(p []byte) unsafe.Pointer {
	if len(p) == 0 {
		return nil
	}
	return unsafe.Pointer(&p[0])
}
