package cluster

import (
	"maps"
	"slices"
	"sync"
)

// subs is a set of subscribers to one kind of cluster event. mu guards next and fns.
type subs[T any] struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(T)
}

func (s *subs[T]) add(fn func(T)) (cancel func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fns == nil {
		s.fns = map[int]func(T){}
	}
	id := s.next
	s.next++
	s.fns[id] = fn
	return func() {
		s.mu.Lock()
		delete(s.fns, id)
		s.mu.Unlock()
	}
}

func (s *subs[T]) notify(v T) {
	s.mu.Lock()
	fns := slices.Collect(maps.Values(s.fns))
	s.mu.Unlock()
	for _, fn := range fns {
		fn(v)
	}
}

// OnSnapshot subscribes fn to a cluster publishing a new host set (hosts, weights, health from
// discovery): the connection pools drain the pools of hosts that left at once, rather than
// finding out by polling. fn runs with the cluster's lock held, after the snapshot is
// published; it must not block or call back into the cluster. The returned function cancels
// the subscription.
func (m *Manager) OnSnapshot(fn func(*Cluster)) (cancel func()) { return m.snapshotSubs.add(fn) }

// OnRetire subscribes fn to a cluster leaving the manager: removed by CDS, or replaced by a
// warmed new version. What was built for it (its connection pools, its upstream TLS context)
// is closed with it. fn runs without the manager's locks held, after the cluster is closed
// (Cluster.Retired reports true).
func (m *Manager) OnRetire(fn func(*Cluster)) (cancel func()) { return m.retireSubs.add(fn) }

// notifyRetired delivers the clusters released under m.mu since the last call to the OnRetire
// subscribers. Callers call it after unlocking m.mu.
func (m *Manager) notifyRetired() {
	m.mu.Lock()
	retired := m.retired
	m.retired = nil
	m.mu.Unlock()
	for _, c := range retired {
		m.retireSubs.notify(c)
	}
}

// Retired reports whether the cluster has left its manager (see OnRetire).
func (c *Cluster) Retired() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}
