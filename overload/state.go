package overload

import (
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
)

// scaleOne is an action state of 1 in the fixed-point form the data path reads.
const scaleOne = 1 << 16

// State is what the data path reads: each action's state as one atomic word, and the global
// connection count. A nil *State is an absent overload manager: nothing is ever shed. The
// overload manager's goroutine is its only writer, except for the connection count.
type State struct {
	stopRequests     atomic.Uint32
	disableKeepalive atomic.Uint32
	rejectConns      atomic.Uint32
	reduceTimeouts   atomic.Uint32
	// timers are reduce_timeouts' minimums (fixed at New); hasTimers: the action is configured.
	timers    [numTimers]TimerMinimum
	hasTimers bool

	mu     sync.Mutex    // guards paused and timersChanged
	paused chan struct{} // non-nil while stop_accepting_connections is saturated; closed on resume
	// timersChanged is closed, and replaced, when reduce_timeouts' state changes.
	timersChanged chan struct{}

	conns    atomic.Int64
	maxConns int64 // 0: no global_downstream_max_connections monitor
}

// chance reports true with the probability the fixed-point state v stands for, as Envoy's
// bernoulli draws: never at 0 (a single atomic load), always once saturated.
func chance(v uint32) bool {
	return v != 0 && (v >= scaleOne || rand.Uint32N(scaleOne) < v)
}

// StopAcceptingRequests reports whether a new request must be refused with 503.
func (s *State) StopAcceptingRequests() bool {
	return s != nil && chance(s.stopRequests.Load())
}

// DisableKeepalive reports whether a response must close its connection.
func (s *State) DisableKeepalive() bool {
	return s != nil && chance(s.disableKeepalive.Load())
}

// RejectConnection reports whether a connection just accepted must be closed at once
// (reject_incoming_connections).
func (s *State) RejectConnection() bool {
	return s != nil && chance(s.rejectConns.Load())
}

// AcceptPaused returns, while stop_accepting_connections is saturated, a channel closed when
// accepting may resume; nil otherwise.
func (s *State) AcceptPaused() <-chan struct{} {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused == nil {
		return nil
	}
	return s.paused
}

func (s *State) setPaused(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case on && s.paused == nil:
		s.paused = make(chan struct{})
	case !on && s.paused != nil:
		close(s.paused)
		s.paused = nil
	}
}

// AcquireConnection counts a new downstream connection against
// global_downstream_max_connections; false, and nothing counted, when the limit is reached.
// Without the monitor every connection is allowed and counted nowhere.
func (s *State) AcquireConnection() bool {
	if s == nil || s.maxConns == 0 {
		return true
	}
	if s.conns.Add(1) > s.maxConns {
		s.conns.Add(-1)
		return false
	}
	return true
}

// HasConnectionLimit reports whether global_downstream_max_connections is configured.
func (s *State) HasConnectionLimit() bool {
	return s != nil && s.maxConns != 0
}

// ReleaseConnection uncounts a connection AcquireConnection counted.
func (s *State) ReleaseConnection() {
	if s != nil && s.maxConns != 0 {
		s.conns.Add(-1)
	}
}

// Connections is the number of connections counted against the global limit.
func (s *State) Connections() int64 {
	if s == nil {
		return 0
	}
	return s.conns.Load()
}

// LimitListener returns ln with each accepted connection counted against the global
// connection limit, and closed at once when the limit is reached (the admin listener without
// ignore_global_conn_limit, as in Envoy). Without the limit it returns ln.
func (s *State) LimitListener(ln net.Listener) net.Listener {
	if s == nil || s.maxConns == 0 {
		return ln
	}
	return limitedListener{Listener: ln, s: s}
}

type limitedListener struct {
	net.Listener
	s *State
}

// Accept returns the next connection the limit admits.
func (l limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.s.AcquireConnection() {
			return &limitedConn{Conn: c, s: l.s}, nil
		}
		c.Close()
	}
}

// limitedConn releases its place in the limit when it is first closed.
type limitedConn struct {
	net.Conn
	s    *State
	once sync.Once
}

func (c *limitedConn) Close() error {
	c.once.Do(c.s.ReleaseConnection)
	return c.Conn.Close()
}
