package hotrestart

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/legateproxy/legate/internal/clock"
)

// helloTimeout bounds how long a connected peer may take to say hello.
const helloTimeout = 10 * time.Second

// Hooks are what a Parent asks of its server. They run on the goroutine
// serving the child, one at a time. A nil hook answers "none" (sockets) or
// does nothing.
type Hooks struct {
	// ListenSocket returns the listening socket the server configured with
	// address (config.Address text), or nil. The socket stays the server's:
	// the child receives a duplicate and the server keeps accepting on its
	// own until Drain. A *net.UnixListener must not remove its path when the
	// server closes it (SetUnlinkOnClose(false)): the child uses it.
	ListenSocket func(address string) net.Listener
	// AdminSocket returns the admin socket when the server's admin address
	// is configured as address, or nil.
	AdminSocket func(address string) net.Listener
	// AdminPassed runs once the admin socket has been sent: the server
	// stops serving admin (its copy closes; the child's stays open).
	AdminPassed func()
	// Stats is the server's statistics snapshot.
	Stats func() Stats
	// Status is the server's open connections and drain state, without
	// statistics (Stats' ActiveConnections and Draining); it is cheap, for
	// frequent polls.
	Status func() Stats
	// Drain stops accepting on every listener and starts draining
	// connections for --drain-time-s.
	Drain func()
	// Terminate closes the data plane and returns the final statistics.
	// The reply carrying them is sent before Exit runs.
	Terminate func() Stats
	// Exit ends the server's run once the child has its final statistics.
	Exit func()
}

// ParentConfig configures the hot-restart socket of one epoch.
type ParentConfig struct {
	// SocketPath is --socket-path; SocketMode --socket-mode (socket files
	// only; 0 leaves the umask's mode).
	SocketPath string
	SocketMode os.FileMode
	// BaseID is --base-id; Epoch is --restart-epoch.
	BaseID, Epoch uint32
	// Build is the --version string, sent in the handshake for the logs.
	Build string
	// Start is when the first epoch started; zero means now.
	Start time.Time
	// Hooks serve the child's requests.
	Hooks Hooks
	// Logf logs the handover; nil discards.
	Logf func(format string, args ...any)

	// Version, Protocol and Features replace this build's handshake when
	// set. They exist for tests and tools that stand in for another build.
	Version  string
	Protocol int
	Features []string
}

// Parent is an epoch's hot-restart socket, serving the next epoch.
// Build it with Listen, run Serve, stop with Close. Safe for concurrent use.
type Parent struct {
	cfg  ParentConfig
	name string
	ln   *net.UnixListener
	busy atomic.Bool // a child is being served

	mu     sync.Mutex // guards conns and closed
	conns  map[*net.UnixConn]struct{}
	closed bool
	wg     sync.WaitGroup // Serve's connection goroutines
}

// Listen binds the socket of cfg's epoch. It returns an error wrapping
// ErrInUse when a live process holds the name (another Legate with the same
// --base-id and epoch).
func Listen(cfg ParentConfig) (*Parent, error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Start.IsZero() {
		cfg.Start = clock.Real().Now()
	}
	name := SocketName(cfg.SocketPath, cfg.BaseID, cfg.Epoch)
	ln, err := listenSocket(name, cfg.SocketMode)
	if err != nil {
		return nil, err
	}
	return &Parent{cfg: cfg, name: name, ln: ln, conns: map[*net.UnixConn]struct{}{}}, nil
}

// Name is the socket's name ("@…" when abstract).
func (p *Parent) Name() string { return p.name }

// hello is this side's handshake.
func (p *Parent) hello() *Hello {
	return newHello(p.cfg.Version, p.cfg.Protocol, p.cfg.Features, p.cfg.Build, p.cfg.BaseID, p.cfg.Epoch)
}

func newHello(version string, protocol int, feats []string, build string, baseID, epoch uint32) *Hello {
	h := &Hello{Version: Version, Protocol: Protocol, Features: Features(), Build: build, BaseID: baseID, Epoch: epoch, PID: os.Getpid()}
	if version != "" {
		h.Version = version
	}
	if protocol != 0 {
		h.Protocol = protocol
	}
	if feats != nil {
		h.Features = feats
	}
	return h
}

// Serve accepts children until ctx is done or Close is called. Children are
// served one at a time; a second one connecting meanwhile is refused.
func (p *Parent) Serve(ctx context.Context) {
	stop := context.AfterFunc(ctx, p.Close)
	defer stop()
	for {
		c, err := p.ln.AcceptUnix()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serveConn(c)
	}
}

// Close stops accepting, closes the children's connections and waits for
// their goroutines. The socket name is released (a socket file is removed).
func (p *Parent) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		p.ln.Close()
		for c := range p.conns {
			c.Close()
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Parent) serveConn(c *net.UnixConn) {
	defer func() {
		c.Close()
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		p.wg.Done()
	}()
	cn := &conn{uc: c}
	// Real clock: a socket deadline, which the runtime poller compares with the system clock.
	c.SetReadDeadline(time.Now().Add(helloTimeout))
	m, files, err := cn.read()
	closeFiles(files)
	if err != nil {
		p.cfg.Logf("hot restart: reading a child's hello: %v", err)
		return
	}
	if m.Type != typeHello {
		cn.write(&message{Type: typeError, Error: fmt.Sprintf("first message is %q; must be hello", m.Type)}, -1)
		return
	}
	reply := p.hello()
	reply.StartUnixNano = p.cfg.Start.UnixNano()
	if reply.Refused = checkHello(reply, m.Hello, "child", p.cfg.Epoch+1); reply.Refused == "" && !p.busy.CompareAndSwap(false, true) {
		reply.Refused = "this parent is already handing over to another child"
	}
	if reply.Refused != "" {
		p.cfg.Logf("hot restart: refused child pid %d: %s", m.Hello.PID, reply.Refused)
		cn.write(&message{Type: typeHello, Hello: reply}, -1)
		return
	}
	defer p.busy.Store(false)
	if err := cn.write(&message{Type: typeHello, Hello: reply}, -1); err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	p.cfg.Logf("hot restart: child epoch %d (pid %d, build %s) connected", m.Hello.Epoch, m.Hello.PID, m.Hello.Build)
	for {
		m, files, err := cn.read()
		closeFiles(files)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				p.cfg.Logf("hot restart: child connection ended: %v", err)
			}
			return
		}
		if done := p.serveRequest(cn, m); done {
			return
		}
	}
}

// serveRequest answers one request; done reports that the parent exits.
func (p *Parent) serveRequest(cn *conn, m *message) (done bool) {
	h := p.cfg.Hooks
	switch m.Type {
	case typeSocket:
		var ln net.Listener
		switch m.Socket.Kind {
		case KindListener:
			if h.ListenSocket != nil {
				ln = h.ListenSocket(m.Socket.Address)
			}
		case KindAdmin:
			if h.AdminSocket != nil {
				ln = h.AdminSocket(m.Socket.Address)
			}
		default:
			cn.write(&message{Type: typeError, Error: fmt.Sprintf("socket kind %q; must be listener or admin", m.Socket.Kind)}, -1)
			return false
		}
		sent, err := sendListener(cn, m.Socket, ln)
		if err != nil {
			p.cfg.Logf("hot restart: passing %s socket %s: %v", m.Socket.Kind, m.Socket.Address, err)
			return false
		}
		if sent && m.Socket.Kind == KindAdmin && h.AdminPassed != nil {
			h.AdminPassed()
		}
	case typeStats:
		st := Stats{}
		if h.Stats != nil {
			st = h.Stats()
		}
		cn.write(&message{Type: typeStats, Stats: &st}, -1)
	case typeStatus:
		st := Stats{}
		if h.Status != nil {
			st = h.Status()
		}
		cn.write(&message{Type: typeStatus, Stats: &st}, -1)
	case typeDrain:
		p.cfg.Logf("hot restart: child asked to stop accepting and drain")
		if h.Drain != nil {
			h.Drain()
		}
		cn.write(&message{Type: typeDrain}, -1)
	case typeTerminate:
		p.cfg.Logf("hot restart: child asked this process to exit")
		st := Stats{}
		if h.Terminate != nil {
			st = h.Terminate()
		}
		cn.write(&message{Type: typeTerminate, Stats: &st}, -1)
		if h.Exit != nil {
			h.Exit()
		}
		return true
	default:
		cn.write(&message{Type: typeError, Error: fmt.Sprintf("unexpected %s request", m.Type)}, -1)
	}
	return false
}

// sendListener answers a socket request, attaching ln's descriptor when ln
// is a socket. It reports whether a descriptor was sent.
func sendListener(cn *conn, req *SocketMessage, ln net.Listener) (bool, error) {
	reply := &SocketMessage{Kind: req.Kind, Address: req.Address}
	sc, ok := ln.(syscall.Conn)
	if ln == nil || !ok {
		return false, cn.write(&message{Type: typeSocket, Socket: reply}, -1)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false, cn.write(&message{Type: typeSocket, Socket: reply}, -1)
	}
	reply.Found = true
	reply.Bound = ln.Addr().String()
	var werr error
	if err := rc.Control(func(fd uintptr) { werr = cn.write(&message{Type: typeSocket, Socket: reply}, int(fd)) }); err != nil {
		// The listener closed meanwhile: answer "none".
		reply.Found, reply.Bound = false, ""
		return false, cn.write(&message{Type: typeSocket, Socket: reply}, -1)
	}
	return werr == nil, werr
}
