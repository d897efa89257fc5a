package pool

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/tlsutil"
)

// RegistryConfig configures a Registry.
type RegistryConfig struct {
	// Clusters is the cluster manager. Required.
	Clusters *cluster.Manager
	// Stats is the server's stats store (see ManagerConfig.Stats); may be nil.
	Stats *stats.Store
	// TLS returns the client TLS configuration for a host of cluster c; nil, or a nil result,
	// means plain TCP.
	TLS func(c *config.Cluster, h *host.Host) *tls.Config
	// AuthorityTLS returns the client TLS configuration for a connection to a host of
	// cluster c carrying requests whose authority's host is name (see
	// ManagerConfig.AuthorityTLS); nil, or a nil result, means plain TCP.
	AuthorityTLS func(c *config.Cluster, h *host.Host, name string) *tls.Config
	// SocketTLS returns the client TLS configuration of transport socket socket of cluster c
	// for a host whose connection's socket filter state chose (see ManagerConfig.SocketTLS);
	// nil, or a nil result, means plain TCP.
	SocketTLS func(c *config.Cluster, h *host.Host, socket int) *tls.Config
	// TLSStats returns the cluster.<name>.ssl.* stats the handshakes of cluster c count in
	// (see ManagerConfig.TLSStats); nil, or a nil result, counts nothing.
	TLSStats func(c *config.Cluster) *tlsutil.Stats
	// DialInternal connects to hosts with an internal address (see ManagerConfig).
	DialInternal func(ctx context.Context, address string) (net.Conn, error)
}

// Registry owns one Manager per active cluster, for the router and the TCP proxy. The pools
// live and die with their cluster: the cluster manager's events (OnRetire, OnSnapshot) close
// a removed or replaced cluster's Manager and drain the pools of hosts that leave a cluster as
// it happens; nothing polls.
//
// Concurrency: Get is lock-free when the cluster's Manager exists (a sync.Map read and a
// pointer comparison); creation, the events and Close take mu.
type Registry struct {
	cfg      RegistryConfig
	managers sync.Map   // cluster name -> *Manager
	mu       sync.Mutex // serialises creation, the events and Close; guards closed
	closed   bool
	cancel   []func() // the cluster manager subscriptions
}

// NewRegistry builds an empty registry.
func NewRegistry(cfg RegistryConfig) (*Registry, error) {
	if cfg.Clusters == nil {
		return nil, errors.New("pool: RegistryConfig.Clusters is required")
	}
	r := &Registry{cfg: cfg}
	r.cancel = []func(){cfg.Clusters.OnRetire(r.retired), cfg.Clusters.OnSnapshot(r.snapshot)}
	return r, nil
}

// retired closes the Manager of a cluster that left the cluster manager.
func (r *Registry) retired(c *cluster.Cluster) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.managers.Load(c.Config().Name); ok && v.(*Manager).cluster == c {
		r.managers.Delete(c.Config().Name)
		v.(*Manager).Close()
	}
}

// snapshot syncs the Manager of a cluster that published a new host set. It runs under the
// cluster's lock and takes no lock of the registry: Manager.Sync reads the published snapshot.
func (r *Registry) snapshot(c *cluster.Cluster) {
	if v, ok := r.managers.Load(c.Config().Name); ok && v.(*Manager).cluster == c {
		v.(*Manager).Sync()
	}
}

// GetAgain is Get for a caller that keeps the Manager it got last for name (last; nil at
// first): that Manager while it is still the one of the active cluster named name, found
// without a lookup by name (the cluster manager's, about 125 instructions a request, or the
// registry's). Every Manager the registry replaces or drops is closed first or at once, so
// one that is not closed and whose cluster is still the published one of its name is the
// registry's.
func (r *Registry) GetAgain(name string, last *Manager) *Manager {
	if last != nil && last.Current() && last.cfg.Name == name {
		return last
	}
	return r.Get(name)
}

// Current reports whether m is still the registry's Manager of its cluster's name (see
// GetAgain), for a caller that knows the name it wants is m's without comparing them.
func (m *Manager) Current() bool { return !m.gone.Load() && m.cluster.Published() }

// Get returns the pools of the active cluster named name, or nil when there is no such
// cluster.
func (r *Registry) Get(name string) *Manager {
	c := r.cfg.Clusters.Get(name)
	if c == nil {
		return nil
	}
	if v, ok := r.managers.Load(name); ok && v.(*Manager).cluster == c {
		return v.(*Manager)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	if v, ok := r.managers.Load(name); ok {
		old := v.(*Manager)
		if old.cluster == c {
			return old
		}
		old.Close()
	}
	cfg := ManagerConfig{Cluster: c, Stats: r.cfg.Stats, DialInternal: r.cfg.DialInternal}
	if r.cfg.TLS != nil {
		cc := c.Config()
		cfg.TLS = func(h *host.Host) *tls.Config { return r.cfg.TLS(cc, h) }
	}
	if r.cfg.AuthorityTLS != nil {
		cc := c.Config()
		cfg.AuthorityTLS = func(h *host.Host, name string) *tls.Config { return r.cfg.AuthorityTLS(cc, h, name) }
	}
	if r.cfg.SocketTLS != nil {
		cc := c.Config()
		cfg.SocketTLS = func(h *host.Host, socket int) *tls.Config { return r.cfg.SocketTLS(cc, h, socket) }
	}
	if r.cfg.TLSStats != nil {
		cc := c.Config()
		cfg.TLSStats = func() *tlsutil.Stats { return r.cfg.TLSStats(cc) }
	}
	m, err := NewManager(cfg)
	if err != nil {
		return nil // the configuration was validated when the cluster was built
	}
	// The key is the cluster's own name: name may view a request (a cluster_header route's
	// header value), whose bytes the connection's next request overwrites.
	r.managers.Store(c.Name(), m)
	if c.Retired() {
		// Retired while the Manager was built: the OnRetire event may have come first.
		r.managers.Delete(c.Name())
		m.Close()
	}
	return m
}

// Sync drains the Managers of removed or replaced clusters and syncs the others (see
// Manager.Sync). The cluster manager's events do this as clusters change; Sync is for callers
// that want the state reconciled now.
func (r *Registry) Sync() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.managers.Range(func(k, v any) bool {
		m := v.(*Manager)
		if r.cfg.Clusters.Get(k.(string)) != m.cluster {
			r.managers.Delete(k)
			m.Close()
			return true
		}
		m.Sync()
		return true
	})
}

// HostFailed passes a host health failure to every cluster's pools (see Manager.HostFailed);
// its signature matches the cluster manager's OnHostHealthFailure subscription.
func (r *Registry) HostFailed(h *host.Host, closeConnections bool) {
	r.managers.Range(func(_, v any) bool {
		v.(*Manager).HostFailed(h, closeConnections)
		return true
	})
}

// Run waits for ctx to end, then closes the registry.
func (r *Registry) Run(ctx context.Context) error {
	<-ctx.Done()
	r.Close()
	return nil
}

// Close ends the subscriptions and drains every Manager; later Gets return nil.
func (r *Registry) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, cancel := range r.cancel {
		cancel()
	}
	r.cancel = nil
	r.closed = true
	r.managers.Range(func(k, v any) bool {
		r.managers.Delete(k)
		v.(*Manager).Close()
		return true
	})
}

// Dial opens a connection to a host of the cluster named name for one of Legate's own gRPC
// channels (the xDS client, the gRPC access-log service): the control plane is reached with
// the data plane's dialer, so it gets the cluster's connect_timeout, upstream_bind_config,
// upstream_connection_options, TLS (offering h2 by ALPN) and connection stats, and counts
// against its max_connections, as Envoy's own gRPC clients do.
func (r *Registry) Dial(ctx context.Context, name string) (net.Conn, error) {
	m := r.Get(name)
	if m == nil {
		return nil, fmt.Errorf("cluster %q not found", name)
	}
	h, err := m.Cluster().Pick(&lb.Context{})
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", name, err)
	}
	return m.ConnectALPN(ctx, h, config.PriorityDefault, []string{"h2"})
}
