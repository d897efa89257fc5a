package listener

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/filterstate"
	"github.com/legateproxy/legate/internal/sockopt"
	"github.com/legateproxy/legate/listener/listenerfilter"
)

// entry is one active listener by name; its version changes with updates.
type entry struct {
	name        string
	static      bool
	versionInfo string
	lastUpdated time.Time
	cur         atomic.Pointer[version] // read by the accept loops
	sockets     []*socket               // nil before Start and for bind_to_port: false
	stopped     bool                    // /drain_listeners stopped it
}

// socket is one listening socket of an entry.
type socket struct {
	ln    net.Listener
	entry *entry
	// stopping is set by stopAccepting: the accept loops end at their deadline and close the
	// socket (closeStopped), which closes stopped.
	stopping atomic.Bool
	stopOnce sync.Once
	stopped  chan struct{}
	// loops counts the running accept loops: a loop whose Accept returned just before the
	// close still hands its connection on, and the drain waits for that.
	loops sync.WaitGroup
}

// stopGrace is how long a stopping socket keeps accepting: long enough to take what the
// kernel already queued on it.
const stopGrace = 20 * time.Millisecond

// stopAccepting closes the socket once the connections the kernel already queued on it are
// accepted and served. Closing a listening socket at once resets the connections waiting in
// its accept queue, which their clients see as a reset of a request they had sent: a drain's
// end would fail requests it had admitted. The accept loops take connections until the
// deadline stopGrace from now, then close the socket.
func (s *socket) stopAccepting(m *Manager) {
	s.stopped = make(chan struct{})
	s.stopping.Store(true)
	// Real clock: a socket deadline, which the runtime poller compares with the system clock.
	if d, ok := s.ln.(interface{ SetDeadline(time.Time) error }); !ok || d.SetDeadline(time.Now().Add(stopGrace)) != nil {
		s.closeStopped(m)
	}
}

// closeStopped closes a stopping socket, once, after taking the connections still queued
// on it: an accept loop at its deadline may not have been scheduled for the last arrivals.
func (s *socket) closeStopped(m *Manager) {
	s.stopOnce.Do(func() {
		if d, ok := s.ln.(interface{ SetDeadline(time.Time) error }); ok {
			d.SetDeadline(time.Time{})
		}
		for _, nc := range takeQueued(s.ln) {
			m.wg.Add(1)
			m.accepted.Add(1)
			go m.serveConn(s.entry.cur.Load(), nc, 0)
		}
		s.ln.Close()
		close(s.stopped)
	})
}

// awaitStopped waits until stopAccepting's socket is closed; a socket no accept loop serves
// is closed at twice its grace.
func (s *socket) awaitStopped(m *Manager) {
	select {
	case <-s.stopped:
	// Real clock: waits on the network or the kernel, not a timing rule; a fake clock would stall it.
	case <-time.After(2 * stopGrace):
		s.closeStopped(m)
	}
	s.loops.Wait() // each loop has counted what it accepted (m.accepted)
}

// version is one configuration of a listener: its chains and what its connections share.
type version struct {
	cfg        *config.Listener
	info       *listenerInfo
	chains     []*chain
	def        *chain
	noChainLog NoChainLog    // the listener's access_log; nil without one
	udp        PacketHandler // a UDP listener's; nil for others
	// matcher is the compiled filter_chain_matcher; nil selects by filter_chain_match.
	matcher *chainMatcher
}

// allChains returns the filter chains and the default chain.
func (v *version) allChains() []*chain {
	if v.def == nil {
		return v.chains
	}
	return append(append([]*chain(nil), v.chains...), v.def)
}

// listenerInfo is what a listener's connections need at run time. Immutable once built.
type listenerInfo struct {
	mgr               *Manager
	name              string
	stats             *sharedStats
	inbound           bool
	drainType         config.DrainType
	bufferLimit       uint32
	filterTimeout     time.Duration
	continueOnTimeout bool
	filters           []listenerfilter.Filter // listener_filters, in order
	handOff           bool                    // use_original_dst: serve on the listener of the original destination
	// limitKey is the runtime key of the listener's connection limit; open counts the
	// connections admitted against it.
	limitKey string
	open     atomic.Int64
}

// closed accounts for a connection that has closed.
func (li *listenerInfo) closed(c *Conn) {
	li.mgr.active.Add(-1)
	c.admitted.release(c.limited)
	li.stats.s.DownstreamCxActive.Dec()
	li.stats.s.DownstreamCxDestroy.Inc()
	c.worker.DownstreamCxActive.Dec()
	ms := li.mgr.cfg.Clock.Now().Sub(c.start).Milliseconds()
	if ms < 0 {
		ms = 0
	}
	li.stats.s.DownstreamCxLengthMs.Record(uint64(ms))
}

// chain is one filter chain with its handler and its open connections.
type chain struct {
	cfg     *config.FilterChain
	handler FilterChainHandler // nil: a chain without filters closes its connections
	filters []ConnFilter       // the non-terminal network filters, in order
	info    *listenerInfo
	drain   *drainSignal

	mu            sync.Mutex // guards head, n, shut, handlerClosed
	head          *Conn
	n             int
	shut          bool // takes no more connections; the handler closes with the last one
	handlerClosed bool
}

// add links c into the chain; false when the chain is shut.
func (ch *chain) add(c *Conn) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.shut {
		return false
	}
	c.next = ch.head
	if ch.head != nil {
		ch.head.prev = c
	}
	ch.head = c
	ch.n++
	return true
}

func (ch *chain) remove(c *Conn) {
	ch.mu.Lock()
	if c.prev != nil {
		c.prev.next = c.next
	} else if ch.head == c {
		ch.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	}
	c.prev, c.next = nil, nil
	ch.n--
	closeHandler := ch.shut && ch.n == 0 && !ch.handlerClosed
	if closeHandler {
		ch.handlerClosed = true
	}
	ch.mu.Unlock()
	if closeHandler {
		ch.closeHandler()
	}
}

// shutdown refuses new connections, closes the open ones and, once none is left, the handler.
func (ch *chain) shutdown() {
	ch.mu.Lock()
	ch.shut = true
	var open []*Conn
	for c := ch.head; c != nil; c = c.next {
		open = append(open, c)
	}
	closeHandler := ch.n == 0 && !ch.handlerClosed
	if closeHandler {
		ch.handlerClosed = true
	}
	ch.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
	if closeHandler {
		ch.closeHandler()
	}
}

// closeHandler closes the chain's handler and its network filters that hold resources (a
// gRPC channel to an authorization or rate limit service).
func (ch *chain) closeHandler() {
	closers := make([]any, 0, len(ch.filters)+1)
	closers = append(closers, ch.handler)
	for _, f := range ch.filters {
		closers = append(closers, f)
	}
	for _, c := range closers {
		if cl, ok := c.(io.Closer); ok {
			if err := cl.Close(); err != nil {
				ch.info.mgr.cfg.Logger.Warnf("listener '%s': closing filter chain '%s': %v", ch.info.name, ch.cfg.Name, err)
			}
		}
	}
}

// acceptLoop accepts connections on s for one worker until s is closed.
func (m *Manager) acceptLoop(s *socket, worker int) {
	defer m.wg.Done()
	defer s.loops.Done()
	var delay time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if s.stopping.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
				s.closeStopped(m) // the deadline of stopAccepting
				return
			}
			// Out of file descriptors and the like: back off as net/http does.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			m.cfg.Logger.Warnf("listener '%s': accept: %v; retrying in %v", s.entry.name, err, delay)
			// Real clock: waits on the network or the kernel, not a timing rule; a fake clock would stall it.
			time.Sleep(delay)
			continue
		}
		delay = 0
		m.awaitAccepting(s)
		v := s.entry.cur.Load()
		v.info.stats.s.ConnectionsAcceptedPerSocketEvent.Record(1)
		m.wg.Add(1)
		m.accepted.Add(1)
		go m.serveConn(v, nc, worker)
	}
}

// serveConn runs the listener filters, selects the filter chain and hands the connection to
// its handler. It runs on the connection's own goroutine.
// The caller counted the connection in m.accepted; it moves to m.active (or, closed before
// it reaches its handler, leaves the count).
func (m *Manager) serveConn(v *version, nc net.Conn, worker int) {
	defer m.wg.Done()
	acceptedAt := m.cfg.Clock.Now()
	counted := false
	admitted := v.info
	limited, ok := m.admit(v, nc)
	defer func() {
		if !counted {
			m.accepted.Add(-1)
			if ok {
				admitted.release(limited)
			}
		}
	}()
	if !ok {
		return
	}
	info := v.info
	a := accepted{Conn: listenerfilter.Conn{Socket: nc}}
	if pc, ok := nc.(*pipeConn); ok {
		a.Metadata = pc.metadata // an internal connection's passed-through metadata
		a.FilterState = filterstate.Inherit(pc.shared)
	}
	b := &filterBuffer{nc: nc}
	if !m.runFilters(info, b, &a) {
		nc.Close()
		return
	}
	if info.handOff && a.Local != nil {
		// use_original_dst: the listener of the restored destination serves the connection,
		// after its own listener filters, as in Envoy.
		if to := m.handOffTarget(v, a.Local.AddrPort()); to != v {
			v, info = to, to.info
			a.Conn = listenerfilter.Conn{Socket: nc, Local: a.Local, Metadata: a.Metadata, TLVs: a.TLVs, FilterState: a.FilterState}
			if !m.runFilters(info, b, &a) {
				nc.Close()
				return
			}
		}
	}
	if d := b.data(); len(d) > 0 {
		a.peeked = d
	}
	local, remote := nc.LocalAddr(), nc.RemoteAddr()
	if a.Local != nil {
		local = a.Local
	}
	if a.Remote != nil {
		remote = a.Remote
	}
	f := factsOf(local, remote, nc.RemoteAddr(), a.hello(), a.TLS)
	var ch *chain
	if v.matcher != nil {
		ch = matchChain(v.matcher, &f, v.def)
	} else {
		ch = selectChain(v.chains, v.def, &f)
	}
	if ch == nil {
		info.stats.s.NoFilterChainMatch.Inc()
		m.cfg.Logger.Debugf("listener '%s': closing connection from %s: no matching filter chain found", info.name, remote)
		if v.noChainLog != nil {
			v.noChainLog(NoChainConn{Start: acceptedAt, Local: local, Remote: remote, DirectRemote: nc.RemoteAddr(), SNI: a.ServerName, ID: m.connIDs.Add(1), Metadata: a.Metadata, FilterState: a.FilterState})
		}
		nc.Close()
		return
	}
	w := &ch.info.stats.workers[worker]
	c := &Conn{Conn: nc, id: m.connIDs.Add(1), peeked: a.peeked, chain: ch, worker: w, start: m.cfg.Clock.Now(), hello: a.hello(), tls: a.TLS, restored: a.Local, remote: a.Remote, metadata: a.Metadata, tlvs: a.TLVs, source: a.Source, limited: limited, admitted: admitted}
	c.state.Adopt(a.FilterState)
	if !ch.add(c) {
		nc.Close()
		return
	}
	m.active.Add(1)
	m.accepted.Add(-1)
	counted = true
	st := &ch.info.stats.s
	st.DownstreamCxTotal.Inc()
	st.DownstreamCxActive.Inc()
	w.DownstreamCxTotal.Inc()
	w.DownstreamCxActive.Inc()
	if ch.handler == nil {
		c.Close()
		return
	}
	for _, f := range ch.filters {
		if !f.OnConnection(c) {
			c.Close()
			return
		}
	}
	ch.handler.ServeConn(c)
}

// bind opens the listening sockets of e's current version, taking inherited
// ones first. mu is held.
func (m *Manager) bind(e *entry) ([]*socket, error) {
	cfg := e.cur.Load().cfg
	if !cfg.BindToPort {
		return nil, nil
	}
	var out []*socket
	if cfg.Internal {
		return []*socket{{ln: m.internalListen(e.name), entry: e}}, nil
	}
	if cfg.UDP != nil {
		pl, err := listenUDP(cfg.Address)
		if err != nil {
			return nil, &BindError{Listener: e.name, Address: cfg.Address.String(), Err: err}
		}
		return []*socket{{ln: pl, entry: e}}, nil
	}
	for i, a := range append([]config.Address{cfg.Address}, cfg.AdditionalAddresses...) {
		ln, err := m.takeInherited(a), error(nil)
		if ln == nil {
			var opts []sockopt.Option
			if i < len(cfg.SocketOptions) {
				opts = cfg.SocketOptions[i]
			}
			ln, err = listen(a, cfg.IPv4Compat, opts)
		}
		if err != nil {
			for _, s := range out {
				s.ln.Close()
			}
			return nil, &BindError{Listener: e.name, Address: a.String(), Err: err}
		}
		out = append(out, &socket{ln: ln, entry: e})
	}
	return out, nil
}

// listen opens a listening socket on a with the socket options opts: those for before bind
// and once bound as the socket is made, those for a listening socket once it listens.
// Accepted connections get no keep-alive of Go's: as in Envoy, only tcp_keepalive or
// socket_options turn it on, and the kernel passes the listening socket's on to them.
func listen(a config.Address, ipv4Compat bool, opts []sockopt.Option) (net.Listener, error) {
	if a.Kind == config.PipeAddress {
		return net.Listen("unix", a.Path)
	}
	network := "tcp4"
	if ip, err := netip.ParseAddr(a.Host); err == nil && ip.Is6() && !ip.Is4In6() {
		network = "tcp6"
		if ipv4Compat {
			network = "tcp"
		}
	}
	lc := net.ListenConfig{KeepAlive: -1, Control: sockopt.Control(opts)}
	ln, err := lc.Listen(context.Background(), network, net.JoinHostPort(a.Host, strconv.FormatUint(uint64(a.Port), 10)))
	if err != nil || len(opts) == 0 {
		return ln, err
	}
	raw, err := ln.(*net.TCPListener).SyscallConn()
	if err == nil {
		family := 4
		if network != "tcp4" {
			family = 6
		}
		err = sockopt.Apply(raw, opts, sockopt.Listening, family)
	}
	if err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// BindError is a listening socket that could not be opened.
type BindError struct {
	Listener string
	Address  string
	Err      error
}

func (e *BindError) Error() string {
	return "listener '" + e.Listener + "': cannot bind " + e.Address + ": " + e.Err.Error()
}

func (e *BindError) Unwrap() error { return e.Err }
