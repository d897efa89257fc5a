package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/legateproxy/legate/config"
)

// A dynamic forward proxy cluster with sub_clusters_config has no hosts of its own: each
// "name:port" requested gets a STRICT_DNS cluster, "DFPCluster:<name>:<port>", made from the
// parent's configuration (config.SubClusterConfig) and added to the manager as an API cluster
// (CDS never removes it: CDS removes only the clusters it added). The dynamic forward proxy
// filter creates it (LoadSubCluster) and holds the request until it is active; the router then
// sends the request through it (ForwardProxySubCluster). At most max_sub_clusters exist; one
// that no request used for sub_cluster_ttl is removed by the parent's sweep, which runs every
// sub_cluster_ttl, as Envoy's idle timer does; all are removed with the parent.

// ErrSubClusterOverflow: the cluster has max_sub_clusters sub-clusters already.
var ErrSubClusterOverflow = errors.New("dynamic forward proxy sub-cluster overflow")

// subClusters are the sub-clusters a parent made. mu guards entries and stop.
type subClusters struct {
	m      *Manager
	parent *Cluster
	cfg    *config.SubClustersConfig

	mu      sync.Mutex
	entries map[string]*subCluster // by cluster name
	stop    context.CancelFunc     // ends the sweep; nil before it started
	closed  bool
}

// subCluster is one sub-cluster: its configuration (which identifies the version this parent
// added) and when a request last used it (unix nanoseconds on the manager's clock).
type subCluster struct {
	cfg      *config.Cluster
	lastUsed atomic.Int64
}

// attachSubClusters makes c's sub-cluster set, its sweep and its preresolve_clusters. m.mu is
// held: the sub-clusters are added by background work.
func attachSubClusters(m *Manager, c *Cluster, cfg *config.SubClustersConfig) {
	s := &subClusters{m: m, parent: c, cfg: cfg, entries: map[string]*subCluster{}}
	c.sub = s
	m.goBackground(func(ctx context.Context) {
		for _, key := range cfg.Preresolve {
			if _, err := s.load(key); err != nil {
				m.log.Warnf("cluster %q: preresolve_clusters %s: %v", c.cfg.Name, key, err)
			}
		}
		s.sweep(ctx)
	})
}

// sweep removes, every sub_cluster_ttl, the sub-clusters unused for longer, until the parent
// is detached or the manager stops.
func (s *subClusters) sweep(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.stop = cancel
	s.mu.Unlock()
	for s.m.sleep(ctx, s.cfg.TTL) {
		now := s.m.clock.Now().UnixNano()
		var idle []string
		s.mu.Lock()
		for name, e := range s.entries {
			if now-e.lastUsed.Load() > int64(s.cfg.TTL) {
				idle = append(idle, name)
			}
		}
		s.mu.Unlock()
		for _, name := range idle {
			s.drop(name)
		}
	}
}

// drop removes the sub-cluster name this parent added.
func (s *subClusters) drop(name string) {
	s.mu.Lock()
	e := s.entries[name]
	delete(s.entries, name)
	s.mu.Unlock()
	if e != nil {
		s.m.remove(name, e.cfg)
	}
}

// detach stops the sweep and removes every sub-cluster, as Envoy's parent does when it goes.
// m.mu is held: the removals run in the background.
func (s *subClusters) detach() {
	s.mu.Lock()
	s.closed = true
	if s.stop != nil {
		s.stop()
	}
	entries := s.entries
	s.entries = map[string]*subCluster{}
	s.mu.Unlock()
	if len(entries) == 0 {
		return
	}
	s.m.goBackground(func(context.Context) {
		for name, e := range entries {
			s.m.remove(name, e.cfg)
		}
	})
}

// load returns a channel closed once the sub-cluster of key ("name:port") is active, making
// it when it does not exist, and marks it used.
func (s *subClusters) load(key string) (<-chan struct{}, error) {
	name := config.SubClusterPrefix + key
	now := s.m.clock.Now().UnixNano()
	s.mu.Lock()
	if e := s.entries[name]; e != nil {
		e.lastUsed.Store(now)
		s.mu.Unlock()
		return s.m.whenActive(name), nil
	}
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: cluster %q was removed", ErrSubClusterOverflow, s.parent.cfg.Name)
	}
	if uint32(len(s.entries)) >= s.cfg.MaxSubClusters {
		s.mu.Unlock()
		return nil, ErrSubClusterOverflow
	}
	hp, err := splitHostKey(key)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	cfg, err := config.SubClusterConfig(s.parent.cfg, name, hp.host, uint32(hp.port))
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	e := &subCluster{cfg: cfg}
	e.lastUsed.Store(now)
	s.entries[name] = e
	s.mu.Unlock()
	ready := s.m.whenActive(name)
	if _, err := s.m.AddOrUpdate(cfg, ""); err != nil {
		s.mu.Lock()
		if s.entries[name] == e {
			delete(s.entries, name)
		}
		s.mu.Unlock()
		return nil, err
	}
	return ready, nil
}

// HasSubClusters reports whether c is a dynamic forward proxy cluster with
// sub_clusters_config.
func (c *Cluster) HasSubClusters() bool { return c.sub != nil }

// LoadSubCluster returns a channel closed once the sub-cluster of key (ForwardProxyKey) is
// active, making it when it does not exist (ErrSubClusterOverflow past max_sub_clusters), and
// marks it used.
func (c *Cluster) LoadSubCluster(key string) (<-chan struct{}, error) {
	if c.sub == nil {
		return nil, fmt.Errorf("cluster %q has no sub_clusters_config", c.cfg.Name)
	}
	return c.sub.load(key)
}

// ForwardProxySubCluster returns the name of the sub-cluster a request to authority goes
// through, "" for clusters without sub_clusters_config.
func (c *Cluster) ForwardProxySubCluster(authority string) string {
	if c.sub == nil {
		return ""
	}
	return config.SubClusterPrefix + c.ForwardProxyKey(authority)
}
