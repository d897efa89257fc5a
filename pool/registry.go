package pool

import (
	"context"
	"crypto/tls"
	"errors"
	"sync"
	"time"

	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/tlsutil"
)

// DefaultSyncInterval is how often Registry.Run reconciles pools with cluster snapshots.
const DefaultSyncInterval = time.Second

// RegistryConfig configures a Registry.
type RegistryConfig struct {
	// Clusters is the cluster manager. Required.
	Clusters *cluster.Manager
	// Stats is the server's stats store (see ManagerConfig.Stats); may be nil.
	Stats *stats.Store
	// TLS returns the client TLS configuration for a host of cluster c; nil, or a nil result,
	// means plain TCP.
	TLS func(c *config.Cluster, h *host.Host) *tls.Config
	// TLSStats returns the cluster.<name>.ssl.* stats the handshakes of cluster c count in
	// (see ManagerConfig.TLSStats); nil, or a nil result, counts nothing.
	TLSStats func(c *config.Cluster) *tlsutil.Stats
	// IdleTimeout returns the HTTP idle timeout of a cluster
	// (common_http_protocol_options.idle_timeout, see ManagerConfig.IdleTimeout); nil means
	// DefaultIdleTimeout for every cluster.
	IdleTimeout func(c *config.Cluster) time.Duration
	// SyncInterval is how often Run calls Sync; zero means DefaultSyncInterval.
	SyncInterval time.Duration
}

// Registry owns one Manager per active cluster, for the router and the TCP proxy. A cluster
// replaced by CDS gets a new Manager and the old one drains; a removed cluster's Manager is
// drained by the next Sync.
//
// Concurrency: Get is lock-free when the cluster's Manager exists (a sync.Map read and a
// pointer comparison); creation, Sync and Close take mu.
type Registry struct {
	cfg      RegistryConfig
	managers sync.Map   // cluster name -> *Manager
	mu       sync.Mutex // serialises creation, Sync and Close; guards closed
	closed   bool
}

// NewRegistry builds an empty registry.
func NewRegistry(cfg RegistryConfig) (*Registry, error) {
	if cfg.Clusters == nil {
		return nil, errors.New("pool: RegistryConfig.Clusters is required")
	}
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = DefaultSyncInterval
	}
	return &Registry{cfg: cfg}, nil
}

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
	cfg := ManagerConfig{Cluster: c, Stats: r.cfg.Stats}
	if r.cfg.TLS != nil {
		cc := c.Config()
		cfg.TLS = func(h *host.Host) *tls.Config { return r.cfg.TLS(cc, h) }
	}
	if r.cfg.TLSStats != nil {
		cc := c.Config()
		cfg.TLSStats = func() *tlsutil.Stats { return r.cfg.TLSStats(cc) }
	}
	if r.cfg.IdleTimeout != nil {
		cfg.IdleTimeout = r.cfg.IdleTimeout(c.Config())
	}
	m, err := NewManager(cfg)
	if err != nil {
		return nil // the configuration was validated when the cluster was built
	}
	r.managers.Store(name, m)
	return m
}

// Sync drains the Managers of removed or replaced clusters and syncs the others (see
// Manager.Sync).
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

// Run calls Sync every SyncInterval until ctx ends, then closes the registry.
func (r *Registry) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			r.Close()
			return nil
		case <-t.C:
			r.Sync()
		}
	}
}

// Close drains every Manager; later Gets return nil.
func (r *Registry) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	r.managers.Range(func(k, v any) bool {
		r.managers.Delete(k)
		v.(*Manager).Close()
		return true
	})
}
