package cluster

import (
	"fmt"
	"time"

	"github.com/legateproxy/legate/lb"
)

// PlainHost picks a host of the active cluster called name for a plain TCP connection: its
// address and the cluster's connect_timeout. The xDS client dials its management servers this
// way when the server gives it no dialer (tests); a cluster with a transport socket is
// refused, since its connections need the server's TLS dialer.
func (m *Manager) PlainHost(name string) (string, time.Duration, error) {
	cl := m.Get(name)
	if cl == nil {
		return "", 0, fmt.Errorf("cluster %q: not an active cluster", name)
	}
	if cl.Config().TransportSocket != nil {
		return "", 0, fmt.Errorf("cluster %q has a transport_socket; the server must provide a TLS dialer", name)
	}
	h, err := cl.Pick(&lb.Context{})
	if err != nil {
		return "", 0, fmt.Errorf("cluster %q: %w", name, err)
	}
	return h.Address(), cl.Config().ConnectTimeout, nil
}
