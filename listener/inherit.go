package listener

import (
	"net"

	"github.com/legateproxy/legate/config"
)

// InheritSockets hands the manager listening sockets taken over from a
// hot-restart parent, keyed by the configured address they were bound for
// (config.Address text, so "127.0.0.1:0" keeps the parent's port). Binding a
// listener on such an address takes the socket instead of binding anew.
// Sockets no listener takes stay open until ReleaseInherited.
func (m *Manager) InheritSockets(ls map[string]net.Listener) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.inherited == nil {
		m.inherited = map[string]net.Listener{}
	}
	for a, ln := range ls {
		if old := m.inherited[a]; old != nil {
			old.Close()
		}
		m.inherited[a] = ln
	}
}

// ReleaseInherited closes the inherited sockets no listener took.
func (m *Manager) ReleaseInherited() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for a, ln := range m.inherited {
		ln.Close()
		delete(m.inherited, a)
	}
}

// takeInherited removes and returns the inherited socket for a, or nil. mu
// is held.
func (m *Manager) takeInherited(a config.Address) net.Listener {
	ln := m.inherited[a.String()]
	if ln != nil {
		delete(m.inherited, a.String())
	}
	return ln
}

// ListenAddresses returns the configured addresses of every listener that
// binds, in listener order: what a hot-restart child asks its parent for. UDP
// listeners are left out: their sockets are not handed over but bound again
// with SO_REUSEPORT (reusePort).
func (m *Manager) ListenAddresses() []config.Address {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []config.Address
	for _, e := range m.entries {
		cfg := e.cur.Load().cfg
		if cfg.BindToPort && !cfg.Internal && cfg.UDP == nil {
			out = append(out, cfg.Address)
			out = append(out, cfg.AdditionalAddresses...)
		}
	}
	return out
}

// ListenSocket returns the bound socket of the listener configured with
// address (config.Address text), or nil: what a hot-restart parent passes to
// its child. The socket stays the manager's; a Unix socket no longer
// removes its path when closed, since the child serves on it.
func (m *Manager) ListenSocket(address string) net.Listener {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.entries {
		if e.stopped {
			continue
		}
		cfg := e.cur.Load().cfg
		addrs := append([]config.Address{cfg.Address}, cfg.AdditionalAddresses...)
		for i, s := range e.sockets {
			if i < len(addrs) && addrs[i].String() == address {
				if ul, ok := s.ln.(*net.UnixListener); ok {
					ul.SetUnlinkOnClose(false)
				}
				return s.ln
			}
		}
	}
	return nil
}
