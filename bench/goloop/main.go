// Command goloop is a measuring stick, not a proxy: the least an HTTP/1.1 keep-alive proxy
// written in Go can do per request on the rig's shape (bench/ab.sh: GET / with no body, a
// Content-Length response), in two ways of waiting, so that Legate's per-request cost can be
// split into what the Go runtime's way of waiting costs and what Legate's own work costs.
//
//   - GOLOOP=goroutine: a goroutine per downstream connection, each paired with its own
//     upstream connection, waiting in the runtime's netpoller through syscall.RawConn (a read
//     is tried only after readiness, as Legate does). Two parks and two wake-ups per request.
//   - GOLOOP=epoll: one goroutine owns an epoll instance holding every socket (edge-triggered)
//     and waits for that epoll descriptor in the runtime's netpoller; one wake-up serves a
//     whole batch of ready sockets, in the order the kernel reported them, with no goroutine
//     switch per request.
//
// It does no parsing beyond finding the end of a head and its Content-Length, no routing, no
// stats: its cost is a floor for Legate's, not a rival. It takes Legate's command line so that
// bench/ab.sh can start it as a contestant: -c FILE names the rig's bootstrap, whose
// port_values are, in order, the admin's, the listener's and the upstream's.
//
// It is a module of its own so that the repository's packages and tests never see it.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"syscall"
)

// epollET is EPOLLET as the unsigned mask EpollEvent.Events takes (syscall's constant is negative).
const epollET = 1 << 31

// bufSize holds a whole request head and a whole response of the rig's shape.
const bufSize = 16 << 10

func main() {
	conf := flag.String("c", "", "the rig's bootstrap: its port_values are admin, listener, upstream")
	flag.Int("concurrency", 1, "ignored (Legate's flag)")
	flag.Bool("disable-hot-restart", false, "ignored (Legate's flag)")
	flag.Parse()
	listen, upstream, err := ports(*conf)
	if err != nil {
		fmt.Fprintln(os.Stderr, "goloop:", err)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "goloop:", err)
		os.Exit(1)
	}
	switch mode := os.Getenv("GOLOOP"); mode {
	case "", "goroutine":
		err = serveGoroutines(ln, upstream)
	case "epoll":
		err = serveEpoll(ln, upstream)
	default:
		err = fmt.Errorf("GOLOOP=%q: want goroutine or epoll", mode)
	}
	fmt.Fprintln(os.Stderr, "goloop:", err)
	os.Exit(1)
}

// ports reads the listener's and the upstream's addresses from the rig's bootstrap.
func ports(path string) (listen, upstream string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", err
	}
	m := regexp.MustCompile(`port_value: *([0-9]+)`).FindAllSubmatch(b, -1)
	if len(m) < 3 {
		return "", "", fmt.Errorf("%s: want 3 port_values (admin, listener, upstream), found %d", path, len(m))
	}
	return "127.0.0.1:" + string(m[1][1]), "127.0.0.1:" + string(m[2][1]), nil
}

// messageEnd returns the length of the whole message at the start of b (head, and the body
// its Content-Length announces), or 0 while it is incomplete.
func messageEnd(b []byte) int {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		return 0
	}
	end += 4
	head := b[:end]
	n := 0
	if i := bytes.Index(head, []byte("\nContent-Length:")); i >= 0 {
		v := head[i+len("\nContent-Length:"):]
		v = bytes.TrimLeft(v[:bytes.IndexByte(v, '\r')], " ")
		var err error
		if n, err = strconv.Atoi(string(v)); err != nil {
			return -1
		}
	}
	if len(b) < end+n {
		return 0
	}
	return end + n
}

// errMalformed ends a connection whose message this stick cannot frame.
var errMalformed = errors.New("unframed message")

// ---- goroutine per connection -------------------------------------------------------------

func serveGoroutines(ln net.Listener, upstream string) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				return
			}
			defer u.Close()
			relay(c.(*net.TCPConn), u.(*net.TCPConn))
		}()
	}
}

// The goroutine way waits as Legate does (docs/DESIGN.md, "The request path"): a read is made
// only inside a raw read of the socket (syscall.RawConn.Read), and what must not race with
// readiness is done inside it too. The runtime forgets readiness when a raw read starts, so
// a response written to the client before its socket's raw read started could be answered
// by a request whose arrival nobody is told of; the same for the upstream's response to a
// request written before its raw read. So the downstream's whole keep-alive loop runs inside
// one raw read of its socket, and each request is written upstream inside the raw read that
// then reads its response.

func relay(down, up *net.TCPConn) {
	drc, _ := down.SyscallConn()
	urc, _ := up.SyscallConn()
	x := &exchanger{rc: urc, buf: make([]byte, bufSize)}
	x.fn = x.step
	dbuf := make([]byte, bufSize)
	dn := 0
	drc.Read(func(fd uintptr) bool {
		for {
			r, drained, err := readInto(int(fd), dbuf, dn)
			if err != nil {
				return true
			}
			dn += r
			for {
				m := messageEnd(dbuf[:dn])
				if m == 0 {
					break
				}
				if m < 0 {
					return true
				}
				n, err := x.exchange(dbuf[:m])
				if err != nil || writeAll(int(fd), x.buf[:n]) != nil {
					return true
				}
				x.n = copy(x.buf, x.buf[n:x.n])
				dn = copy(dbuf, dbuf[m:dn])
			}
			if drained {
				return false // wait for the next request
			}
			if dn == len(dbuf) {
				return true
			}
		}
	})
}

// exchanger sends requests on an upstream connection and reads their responses.
type exchanger struct {
	rc  syscall.RawConn
	buf []byte
	n   int // bytes held in buf
	req []byte
	m   int // the whole response's length, once found
	err error
	fn  func(fd uintptr) bool // step, built once
}

// exchange writes req and returns the length of its whole response, at the start of buf.
func (x *exchanger) exchange(req []byte) (int, error) {
	x.req, x.m, x.err = req, 0, nil
	if err := x.rc.Read(x.fn); err != nil {
		return 0, err
	}
	return x.m, x.err
}

// step is the raw read's callback: the request is written on its first call.
func (x *exchanger) step(fd uintptr) bool {
	if x.req != nil {
		if x.err = writeAll(int(fd), x.req); x.err != nil {
			return true
		}
		x.req = nil
		return false // the response cannot be here yet
	}
	for {
		r, drained, err := readInto(int(fd), x.buf, x.n)
		if err != nil {
			x.err = err
			return true
		}
		x.n += r
		if x.m = messageEnd(x.buf[:x.n]); x.m != 0 {
			if x.m < 0 {
				x.err = errMalformed
			}
			return true
		}
		if drained {
			return false
		}
		if x.n == len(x.buf) {
			x.err = errMalformed
			return true
		}
	}
}

// ---- one epoll loop -------------------------------------------------------------------------

// pair is a downstream connection and its upstream, both owned by the loop.
type pair struct {
	down, up int // descriptors
	dbuf     []byte
	dn       int
	ubuf     []byte
	un       int
	waiting  bool // a request went upstream and its response is not whole yet
}

// loop owns the epoll instance and every pair in it; only its goroutine touches them.
type loop struct {
	ep    int
	pairs map[int]*pair // by either descriptor
	ready chan [2]int   // accepted pairs, registered by the loop itself
	wake  int           // an eventfd the accepter writes to after sending on ready
}

func serveEpoll(ln net.Listener, upstream string) error {
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	wake, _, errno := syscall.Syscall(syscall.SYS_EVENTFD2, 0, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errno != 0 {
		return errno
	}
	l := &loop{ep: ep, pairs: map[int]*pair{}, ready: make(chan [2]int, 1024), wake: int(wake)}
	if err := l.add(l.wake); err != nil {
		return err
	}
	go l.accept(ln, upstream)
	return l.run()
}

func (l *loop) add(fd int) error {
	return syscall.EpollCtl(l.ep, syscall.EPOLL_CTL_ADD, fd,
		&syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | epollET, Fd: int32(fd)})
}

// detach takes the descriptor out of c (a duplicate, non-blocking) and closes c.
func detach(c net.Conn) (int, error) {
	f, err := c.(*net.TCPConn).File()
	c.Close()
	if err != nil {
		return -1, err
	}
	fd, err := syscall.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		return -1, err
	}
	return fd, syscall.SetNonblock(fd, true)
}

func (l *loop) accept(ln net.Listener, upstream string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", upstream)
		if err != nil {
			c.Close()
			continue
		}
		d, err1 := detach(c)
		uf, err2 := detach(u)
		if err1 != nil || err2 != nil {
			continue
		}
		l.ready <- [2]int{d, uf}
		var one = [8]byte{1}
		syscall.Write(l.wake, one[:])
	}
}

// run waits for the epoll descriptor in the runtime's netpoller and serves every batch it
// reports, in the kernel's order.
func (l *loop) run() error {
	if err := syscall.SetNonblock(l.ep, true); err != nil {
		return err
	}
	f := os.NewFile(uintptr(l.ep), "epoll")
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	events := make([]syscall.EpollEvent, 256)
	return rc.Read(func(uintptr) bool {
		for {
			n, err := syscall.EpollWait(l.ep, events, 0)
			if err == syscall.EINTR {
				continue
			}
			if n <= 0 {
				return false // nothing ready: park until the epoll descriptor is readable
			}
			for _, ev := range events[:n] {
				l.serve(int(ev.Fd))
			}
		}
	})
}

func (l *loop) serve(fd int) {
	if fd == l.wake {
		var b [8]byte
		syscall.Read(l.wake, b[:])
		for {
			select {
			case p := <-l.ready:
				pr := &pair{down: p[0], up: p[1], dbuf: make([]byte, bufSize), ubuf: make([]byte, bufSize)}
				l.pairs[p[0]], l.pairs[p[1]] = pr, pr
				l.add(p[0])
				l.add(p[1])
			default:
				return
			}
		}
	}
	p := l.pairs[fd]
	if p == nil {
		return
	}
	var err error
	if fd == p.down {
		err = l.downReadable(p)
	} else {
		err = l.upReadable(p)
	}
	if err != nil {
		delete(l.pairs, p.down)
		delete(l.pairs, p.up)
		syscall.Close(p.down)
		syscall.Close(p.up)
	}
}

// readInto reads once into b[n:]; drained reports that the socket's queue is now empty (a
// short read: edge-triggered, the next arrival is a new event).
func readInto(fd int, b []byte, n int) (got int, drained bool, err error) {
	for {
		r, err := syscall.Read(fd, b[n:])
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return 0, true, nil
		case err != nil:
			return 0, true, err
		case r == 0:
			return 0, true, errors.New("closed")
		}
		return r, r < len(b)-n, nil
	}
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := syscall.Write(fd, b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err // EAGAIN included: the rig's messages fit a socket buffer
		}
		b = b[n:]
	}
	return nil
}

func (l *loop) downReadable(p *pair) error {
	for {
		r, drained, err := readInto(p.down, p.dbuf, p.dn)
		if err != nil {
			return err
		}
		p.dn += r
		if err := l.forward(p); err != nil {
			return err
		}
		if drained {
			return nil
		}
		if p.dn == len(p.dbuf) {
			return errMalformed
		}
	}
}

// forward sends the next whole request upstream unless one is outstanding.
func (l *loop) forward(p *pair) error {
	if p.waiting {
		return nil
	}
	m := messageEnd(p.dbuf[:p.dn])
	if m <= 0 {
		if m < 0 {
			return errMalformed
		}
		return nil
	}
	if err := writeAll(p.up, p.dbuf[:m]); err != nil {
		return err
	}
	p.dn = copy(p.dbuf, p.dbuf[m:p.dn])
	p.waiting = true
	return nil
}

func (l *loop) upReadable(p *pair) error {
	for {
		r, drained, err := readInto(p.up, p.ubuf, p.un)
		if err != nil {
			return err
		}
		p.un += r
		if p.waiting {
			m := messageEnd(p.ubuf[:p.un])
			if m < 0 {
				return errMalformed
			}
			if m > 0 {
				if err := writeAll(p.down, p.ubuf[:m]); err != nil {
					return err
				}
				p.un = copy(p.ubuf, p.ubuf[m:p.un])
				p.waiting = false
				if err := l.forward(p); err != nil { // a pipelined request already here
					return err
				}
			}
		} else if p.un > 0 {
			return errMalformed // bytes with no request outstanding
		}
		if drained {
			return nil
		}
		if p.un == len(p.ubuf) {
			return errMalformed
		}
	}
}
