package listener

import (
	"math"
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
			// Real clock: waits on the network or the kernel, not a timing rule; a fake clock would stall it.
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
// limit (unless the listener ignores it; the overload manager's, else the runtime's), then reject_incoming_connections, then the
// listener's own connection limit. A refused connection is counted and uncounted before it is
// closed, so that its client's EOF follows the release. An admitted one counts in the
// listener's open connections and, when limited, against the global limit; the caller releases
// both when it ends (listenerInfo.release).
func (m *Manager) admit(v *version, nc net.Conn) (limited, ok bool) {
	info := v.info
	if m.overRuntimeGlobalLimit(v) {
		info.stats.s.DownstreamGlobalCxOverflow.Inc()
		m.refuse(info, nc, "global connection limit reached")
		return false, false
	}
	if ov := m.cfg.Overload; ov != nil && !v.cfg.BypassOverloadManager {
		if !v.cfg.IgnoreGlobalConnLimit {
			if !ov.AcquireConnection() {
				info.stats.s.DownstreamGlobalCxOverflow.Inc()
				m.refuse(info, nc, "global connection limit reached")
				return false, false
			}
			limited = true
		}
		if ov.RejectConnection() {
			info.stats.s.DownstreamCxOverloadReject.Inc()
			if limited {
				ov.ReleaseConnection()
			}
			m.refuse(info, nc, "rejected by the overload manager")
			return false, false
		}
	}
	if n := info.open.Add(1); m.cfg.Runtime != nil && uint64(n) > m.cfg.Runtime(info.limitKey, math.MaxUint64) {
		info.stats.s.DownstreamCxOverflow.Inc()
		info.release(limited)
		m.refuse(info, nc, "listener connection limit reached")
		return false, false
	}
	return limited, true
}

// globalLimitKey is Envoy's deprecated runtime key for a global connection limit, which
// applies when the overload manager has no global_downstream_max_connections monitor.
const globalLimitKey = "overload.global_downstream_max_connections"

// overRuntimeGlobalLimit reports whether a connection just accepted (and counted in
// m.accepted) takes the connections over the runtime's global limit. As in Envoy, every
// connection the listeners accepted counts, and listeners with ignore_global_conn_limit are
// not limited.
func (m *Manager) overRuntimeGlobalLimit(v *version) bool {
	if m.cfg.Runtime == nil || v.cfg.IgnoreGlobalConnLimit || m.cfg.Overload.HasConnectionLimit() {
		return false
	}
	return uint64(m.active.Load()+m.accepted.Load()) > m.cfg.Runtime(globalLimitKey, math.MaxUint64)
}

// release uncounts an admitted connection: from the listener's open connections and, when
// limited, from the global limit.
func (li *listenerInfo) release(limited bool) {
	li.open.Add(-1)
	if limited {
		li.mgr.cfg.Overload.ReleaseConnection()
	}
}

func (m *Manager) refuse(info *listenerInfo, nc net.Conn, why string) {
	m.cfg.Logger.Debugf("listener '%s': closing connection from %s: %s", info.name, nc.RemoteAddr(), why)
	nc.Close()
}

// connectionLimitKey is the runtime key of a listener's connection limit, as Envoy names it.
func connectionLimitKey(name string) string {
	return "envoy.resource_limits.listener." + name + ".connection_limit"
}
