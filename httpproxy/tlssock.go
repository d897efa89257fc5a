package httpproxy

import (
	"io"
	"net"
	"os"
	"syscall"

	"github.com/legateproxy/legate/internal/sockio"
	"github.com/legateproxy/legate/listener"
)

// tlsSocket is the socket under a downstream TLS connection (crypto/tls reads its records
// from it and writes them to it). Once the listener's peeked bytes (the TLS inspector's
// ClientHello) are read, its reads and writes are raw system calls (internal/sockio) inside
// the socket's raw read and write: the connection's own Read and Write pay entersyscall
// and exitsyscall around the same recvfrom and sendto, a few hundred instructions per
// request each way. The raw read and write keep what matters of the connection's: the
// descriptor's lock (a concurrent Close waits), the wait for readiness, the deadlines, and
// errors as *net.OpError. Reads and writes have separate state: HTTP/2 writes from other
// goroutines while its reader reads.
type tlsSocket struct {
	net.Conn // the listener's connection: the peeked bytes, deadlines, addresses, Close
	raw      syscall.RawConn
	drained  bool // the peeked bytes are gone: reads go to the socket
	rd, wr   rawOp
}

// rawOp is one raw read or write in progress: its buffer, what it moved, its error, and
// the callback, bound once.
type rawOp struct {
	p   []byte
	n   int
	err error
	fn  func(fd uintptr) bool
}

// newTLSSocket returns the socket for c's TLS connection.
func newTLSSocket(c *listener.Conn) net.Conn { return newRawSocket(socketConn{c}, c.Conn) }

// newRawSocket returns conn read and written by raw system calls on sock, its socket; conn
// itself when sock has no raw socket.
func newRawSocket(conn net.Conn, sock net.Conn) net.Conn {
	sc, ok := sock.(syscall.Conn)
	if !ok {
		return conn
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return conn
	}
	s := &tlsSocket{Conn: conn, raw: raw}
	s.rd.fn, s.wr.fn = s.recv, s.send
	return s
}

// Read reads the peeked bytes through the listener's connection, then the socket. A read
// that returns less than p's room has emptied the peeked bytes.
func (s *tlsSocket) Read(p []byte) (int, error) {
	if !s.drained {
		n, err := s.Conn.Read(p)
		s.drained = n < len(p)
		return n, err
	}
	s.rd.p, s.rd.n, s.rd.err = p, 0, nil
	err := s.raw.Read(s.rd.fn)
	n := s.rd.n
	s.rd.p = nil
	switch {
	case err != nil:
		return 0, err
	case s.rd.err != nil:
		return 0, s.opError("read", s.rd.err)
	case n == 0 && len(p) > 0:
		return 0, io.EOF
	}
	return n, nil
}

// recv is Read's raw read callback: one recv; nothing to read waits for readiness.
func (s *tlsSocket) recv(fd uintptr) bool {
	n, err := sockio.Recv(int(fd), s.rd.p)
	if err == syscall.EAGAIN {
		return false
	}
	s.rd.n, s.rd.err = n, err
	return true
}

// Write writes all of p to the socket, waiting while it is full (within the write
// deadline).
func (s *tlsSocket) Write(p []byte) (int, error) {
	s.wr.p, s.wr.n, s.wr.err = p, 0, nil
	err := s.raw.Write(s.wr.fn)
	n := s.wr.n
	s.wr.p = nil
	if s.wr.err != nil {
		err = s.opError("write", s.wr.err)
	}
	return n, err
}

// send is Write's raw write callback: it sends until all is written or a send failed
// (true), or the socket is full (false: wait until it is writable).
func (s *tlsSocket) send(fd uintptr) bool {
	for s.wr.n < len(s.wr.p) {
		n, err := sockio.Send(int(fd), s.wr.p[s.wr.n:])
		switch {
		case err == syscall.EAGAIN:
			return false
		case err != nil:
			s.wr.err = err
			return true
		}
		s.wr.n += n
	}
	return true
}

// opError reports a failed system call as the connection's Read or Write would.
func (s *tlsSocket) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: s.LocalAddr(), Addr: s.RemoteAddr(), Err: os.NewSyscallError(op, err)}
}
