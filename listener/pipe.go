package listener

import (
	"io"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/internal/filterstate"
)

// newPipe returns the two ends of an in-memory, full-duplex connection whose directions each
// buffer up to size bytes: a writer waits while its direction is full, so a slow reader holds
// back a fast writer as a TCP window would (net.Pipe has no buffer, and two peers that both
// write before reading would wait on each other for ever). Each end supports deadlines,
// CloseWrite (the peer reads EOF once the buffer is drained) and Close.
func newPipe(size int, clientLocal, clientRemote net.Addr) (client, server *pipeConn) {
	up, down := newHalf(size), newHalf(size)
	client = &pipeConn{rx: down, tx: up, local: clientLocal, remote: clientRemote, closed: make(chan struct{})}
	server = &pipeConn{rx: up, tx: down, local: clientRemote, remote: clientLocal, closed: make(chan struct{})}
	client.rd.init()
	client.wd.init()
	server.rd.init()
	server.wd.init()
	return client, server
}

// half is one direction of a pipe: its writer's end appends, its reader's end takes.
type half struct {
	mu       sync.Mutex // guards buf, eof, broken
	buf      []byte
	max      int
	eof      bool // the writer closed: reads end once buf is empty
	broken   bool // the reader closed: writes fail
	canRead  chan struct{}
	canWrite chan struct{}
}

func newHalf(size int) *half {
	return &half{max: size, canRead: make(chan struct{}, 1), canWrite: make(chan struct{}, 1)}
}

// wake signals ch without blocking; ch holds one pending signal.
func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (h *half) read(p []byte, closed <-chan struct{}, dl *deadline) (int, error) {
	for {
		if err := stopped(closed, dl); err != nil {
			return 0, err
		}
		h.mu.Lock()
		if len(h.buf) > 0 {
			n := copy(p, h.buf)
			h.buf = h.buf[n:]
			if len(h.buf) == 0 {
				h.buf = nil
			}
			h.mu.Unlock()
			wake(h.canWrite)
			return n, nil
		}
		eof := h.eof
		h.mu.Unlock()
		if eof || len(p) == 0 {
			if eof {
				return 0, io.EOF
			}
			return 0, nil
		}
		select {
		case <-h.canRead:
		case <-closed:
		case <-dl.done():
		}
	}
}

func (h *half) write(p []byte, closed <-chan struct{}, dl *deadline) (int, error) {
	n := 0
	for len(p) > 0 {
		if err := stopped(closed, dl); err != nil {
			return n, err
		}
		h.mu.Lock()
		if h.broken || h.eof {
			h.mu.Unlock()
			return n, io.ErrClosedPipe
		}
		if room := h.max - len(h.buf); room > 0 {
			k := min(room, len(p))
			h.buf = append(h.buf, p[:k]...)
			h.mu.Unlock()
			wake(h.canRead)
			p, n = p[k:], n+k
			continue
		}
		h.mu.Unlock()
		select {
		case <-h.canWrite:
		case <-closed:
		case <-dl.done():
		}
	}
	return n, nil
}

// closeWriter ends the direction: the reader gets EOF after what is buffered.
func (h *half) closeWriter() {
	h.mu.Lock()
	h.eof = true
	h.mu.Unlock()
	wake(h.canRead)
	wake(h.canWrite)
}

// closeReader breaks the direction: the writer's writes fail and what is buffered is dropped.
func (h *half) closeReader() {
	h.mu.Lock()
	h.broken, h.buf = true, nil
	h.mu.Unlock()
	wake(h.canWrite)
	wake(h.canRead)
}

// stopped returns the error of an end that is closed or past its deadline.
func stopped(closed <-chan struct{}, dl *deadline) error {
	select {
	case <-closed:
		return net.ErrClosed
	default:
	}
	select {
	case <-dl.done():
		return os.ErrDeadlineExceeded
	default:
	}
	return nil
}

// pipeConn is one end of a pipe.
type pipeConn struct {
	rx, tx        *half
	local, remote net.Addr
	rd, wd        deadline
	closeOnce     sync.Once
	closed        chan struct{}
	// metadata is what the dialer's internal_upstream socket passed to the internal
	// listener's connection (server end only), set before the end is handed over.
	metadata map[string]*structpb.Struct
	// shared are the filter state objects the dialling connection shared with its upstream
	// connection (server end only), which the internal listener's connection inherits.
	shared []filterstate.Entry
}

func (c *pipeConn) Read(p []byte) (int, error)  { return c.rx.read(p, c.closed, &c.rd) }
func (c *pipeConn) Write(p []byte) (int, error) { return c.tx.write(p, c.closed, &c.wd) }

// Close closes both directions of this end: the peer reads EOF and its writes fail.
func (c *pipeConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.rx.closeReader()
		c.tx.closeWriter()
	})
	return nil
}

// CloseWrite ends what this end sends; it can still read (a TCP half-close).
func (c *pipeConn) CloseWrite() error {
	c.tx.closeWriter()
	return nil
}

func (c *pipeConn) LocalAddr() net.Addr  { return c.local }
func (c *pipeConn) RemoteAddr() net.Addr { return c.remote }

func (c *pipeConn) SetDeadline(t time.Time) error {
	c.rd.set(t)
	c.wd.set(t)
	return nil
}

func (c *pipeConn) SetReadDeadline(t time.Time) error  { c.rd.set(t); return nil }
func (c *pipeConn) SetWriteDeadline(t time.Time) error { c.wd.set(t); return nil }

// deadline is a settable deadline whose done channel is closed while it is past.
type deadline struct {
	mu    sync.Mutex // guards timer and ch
	timer *time.Timer
	ch    chan struct{}
}

func (d *deadline) init() { d.ch = make(chan struct{}) }

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.ch // the timer fired: wait until its function has closed ch
	}
	d.timer = nil
	select {
	case <-d.ch: // past: a fresh channel for the new deadline
		d.ch = make(chan struct{})
	default:
	}
	if t.IsZero() {
		return
	}
	// Real clock: a net.Conn deadline is an absolute time on the system clock, as the runtime
	// poller reads it for sockets.
	if dur := time.Until(t); dur <= 0 {
		close(d.ch)
		return
	}
	ch := d.ch
	d.timer = time.AfterFunc(time.Until(t), func() { close(ch) })
}

func (d *deadline) done() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ch
}
