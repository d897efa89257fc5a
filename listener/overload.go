package listener

import (
	"net"
	"syscall"
	"time"
)

// pausePoll is how often an accept loop paused by stop_accepting_connections checks that its
// socket is still open, so that closing a paused listener ends its loop.
const pausePoll = 50 * time.Millisecond

// awaitAccepting holds a connection just accepted while the overload action
// stop_accepting_connections is saturated (unless the listener bypasses the overload manager),
// and accepts no other: the kernel's backlog holds the next ones, as when Envoy disables its
// listeners. Its client sees what a client in the backlog sees, a connection nothing answers.
// It returns when the action ends or the socket stops or closes.
func (m *Manager) awaitAccepting(s *socket) {
	if m.cfg.Overload == nil {
		return
	}
	var t *time.Timer
	for {
		resume := m.cfg.Overload.AcceptPaused()
		if resume == nil || s.entry.cur.Load().cfg.BypassOverloadManager {
			return
		}
		if t == nil {
			t = time.NewTimer(pausePoll)
			defer t.Stop()
		} else {
			t.Reset(pausePoll)
		}
		select {
		case <-resume:
			return
		case <-t.C:
		}
		if s.stopping.Load() || socketClosed(s.ln) {
			return
		}
	}
}

// socketClosed reports whether ln has been closed, without accepting from it.
func socketClosed(ln net.Listener) bool {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	return raw.Control(func(uintptr) {}) != nil
}

// admit applies the overload manager to a connection just accepted: the global connection
// limit (unless the listener ignores it), then reject_incoming_connections. A refused
// connection is closed and counted; limited reports that the connection counts against the
// global limit, which the caller releases when it ends.
func (m *Manager) admit(v *version, nc net.Conn) (limited, ok bool) {
	ov := m.cfg.Overload
	if ov == nil || v.cfg.BypassOverloadManager {
		return false, true
	}
	if !v.cfg.IgnoreGlobalConnLimit {
		if !ov.AcquireConnection() {
			v.info.stats.s.DownstreamGlobalCxOverflow.Inc()
			m.cfg.Logger.Debugf("listener '%s': closing connection from %s: global connection limit reached", v.info.name, nc.RemoteAddr())
			nc.Close()
			return false, false
		}
		limited = true
	}
	if ov.RejectConnection() {
		v.info.stats.s.DownstreamCxOverloadReject.Inc()
		m.cfg.Logger.Debugf("listener '%s': closing connection from %s: rejected by the overload manager", v.info.name, nc.RemoteAddr())
		nc.Close()
		return limited, false
	}
	return limited, true
}
