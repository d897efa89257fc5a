package hotrestart

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// ChildConfig configures the connection of epoch Epoch to epoch Epoch-1.
type ChildConfig struct {
	// SocketPath is --socket-path; BaseID --base-id; Epoch this process's
	// --restart-epoch (at least 1).
	SocketPath string
	BaseID     uint32
	Epoch      uint32
	// Build is the --version string, sent in the handshake for the logs.
	Build string
	// Timeout bounds each request and its reply; 0 means 30 s (a stats
	// snapshot of a large store takes a while).
	Timeout time.Duration

	// Version, Protocol and Features replace this build's handshake when
	// set. They exist for tests and tools that stand in for another build.
	Version  string
	Protocol int
	Features []string
}

// Child is a connection to the parent epoch. Safe for concurrent use:
// requests serialise on one mutex.
type Child struct {
	cfg    ChildConfig
	parent Hello

	mu sync.Mutex // guards c and each request/reply exchange
	c  *conn      // nil once closed

	// uc is c's socket, kept for Abort, which must not wait for mu (a request holds it
	// while it waits for the parent); aborted makes every request after Abort fail.
	uc      *net.UnixConn
	aborted atomic.Bool
}

// Connect dials the parent's socket and performs the handshake. A parent
// that cannot be reached is an error wrapping ErrNoParent; a refused
// handshake is a *VersionError naming what differs.
func Connect(ctx context.Context, cfg ChildConfig) (*Child, error) {
	if cfg.Epoch == 0 {
		return nil, fmt.Errorf("%w: --restart-epoch 0 has no parent", ErrNoParent)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	name := SocketName(cfg.SocketPath, cfg.BaseID, cfg.Epoch-1)
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", name)
	if err != nil {
		return nil, fmt.Errorf("%w for --restart-epoch %d at %s (is epoch %d running with --base-id %d, without --disable-hot-restart?): %v",
			ErrNoParent, cfg.Epoch, name, cfg.Epoch-1, cfg.BaseID, err)
	}
	uc := nc.(*net.UnixConn)
	ch := &Child{cfg: cfg, c: &conn{uc: uc}, uc: uc}
	// A parent that accepts but does not answer must not hold the child past ctx (a SIGTERM
	// while connecting): the handshake waits at most until then.
	stop := context.AfterFunc(ctx, ch.Abort)
	defer stop()
	mine := newHello(cfg.Version, cfg.Protocol, cfg.Features, cfg.Build, cfg.BaseID, cfg.Epoch)
	reply, err := ch.roundTrip(&message{Type: typeHello, Hello: mine}, typeHello)
	if err != nil {
		ch.Close()
		return nil, fmt.Errorf("hot restart handshake with %s: %w", name, err)
	}
	if r := reply.Hello.Refused; r != "" {
		ch.Close()
		return nil, &VersionError{Reason: "the parent (pid " + fmt.Sprint(reply.Hello.PID) + ") says: " + r}
	}
	if r := checkHello(mine, reply.Hello, "parent", cfg.Epoch-1); r != "" {
		ch.Close()
		return nil, &VersionError{Reason: r}
	}
	ch.parent = *reply.Hello
	return ch, nil
}

// Parent is the parent's handshake reply (its pid, epoch, build and the
// start time of the first epoch).
func (c *Child) Parent() Hello { return c.parent }

// ListenSocket asks for the parent's socket of the given kind configured
// with address. It returns nil and no error when the parent has none.
func (c *Child) ListenSocket(kind, address string) (net.Listener, error) {
	m, err := c.request(&message{Type: typeSocket, Socket: &SocketMessage{Kind: kind, Address: address}}, typeSocket, 1)
	if err != nil || m == nil {
		return nil, err
	}
	if !m.msg.Socket.Found || len(m.files) == 0 {
		closeFiles(m.files)
		return nil, nil
	}
	defer closeFiles(m.files)
	ln, err := net.FileListener(m.files[0])
	if err != nil {
		return nil, fmt.Errorf("hot restart: %s socket %s from the parent: %w", kind, address, err)
	}
	if ul, ok := ln.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(true) // the last holder removes the path
	}
	return ln, nil
}

// Stats fetches the parent's statistics snapshot.
func (c *Child) Stats() (Stats, error) { return c.statsRequest(typeStats) }

// Status fetches the parent's open connections and drain state (the
// ActiveConnections and Draining fields of Stats), without statistics.
func (c *Child) Status() (Stats, error) { return c.statsRequest(typeStatus) }

// statsRequest sends a request of type typ whose reply carries Stats.
func (c *Child) statsRequest(typ string) (Stats, error) {
	m, err := c.request(&message{Type: typ}, typ, 0)
	if err != nil {
		return Stats{}, err
	}
	if m.msg.Stats == nil {
		return Stats{}, nil
	}
	return *m.msg.Stats, nil
}

// Drain tells the parent to stop accepting and drain its connections.
func (c *Child) Drain() error {
	_, err := c.request(&message{Type: typeDrain}, typeDrain, 0)
	return err
}

// Terminate tells the parent to close everything and exit; it returns the
// parent's final statistics and closes the connection.
func (c *Child) Terminate() (Stats, error) {
	m, err := c.request(&message{Type: typeTerminate}, typeTerminate, 0)
	c.Close()
	if err != nil {
		return Stats{}, err
	}
	if m.msg.Stats == nil {
		return Stats{}, nil
	}
	return *m.msg.Stats, nil
}

// Abort ends the request waiting for the parent, if any, and fails every later one at once.
// Unlike Close it does not wait for that request, so another goroutine (a signal's) can
// call it. Close must still be called.
func (c *Child) Abort() {
	c.aborted.Store(true)
	c.uc.SetDeadline(time.Unix(1, 0))
}

// Close closes the connection; the parent carries on as it was.
func (c *Child) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c == nil {
		return nil
	}
	err := c.c.uc.Close()
	c.c = nil
	return err
}

// errClosed is a request on a closed Child.
var errClosed = errors.New("hot restart: connection to the parent is closed")

// errAborted is a request on an aborted Child.
var errAborted = errors.New("hot restart: connection to the parent aborted")

// replyFiles is a reply and the descriptors that came with it.
type replyFiles struct {
	msg   *message
	files []*os.File
}

// request sends m and reads the reply of type want, with up to maxFiles
// descriptors (extra ones are closed).
func (c *Child) request(m *message, want string, maxFiles int) (*replyFiles, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c == nil {
		return nil, errClosed
	}
	// Real clock: a socket deadline, which the runtime poller compares with the system clock.
	c.c.uc.SetDeadline(time.Now().Add(c.cfg.Timeout))
	if c.aborted.Load() { // after the deadline is set, so that an Abort racing it wins
		return nil, errAborted
	}
	defer func() {
		if c.c != nil {
			c.c.uc.SetDeadline(time.Time{})
		}
	}()
	if err := c.c.write(m, -1); err != nil {
		return nil, err
	}
	r, files, err := c.c.read()
	if err != nil {
		return nil, err
	}
	if len(files) > maxFiles {
		closeFiles(files[maxFiles:])
		files = files[:maxFiles]
	}
	if r.Type == typeError {
		closeFiles(files)
		return nil, fmt.Errorf("hot restart: the parent refused %s: %s", m.Type, r.Error)
	}
	if r.Type != want {
		closeFiles(files)
		return nil, fmt.Errorf("hot restart: the parent answered %s with %s", m.Type, r.Type)
	}
	return &replyFiles{msg: r, files: files}, nil
}

// roundTrip is request for the handshake, which has no descriptors.
func (c *Child) roundTrip(m *message, want string) (*message, error) {
	r, err := c.request(m, want, 0)
	if err != nil {
		return nil, err
	}
	return r.msg, nil
}
