package cluster

// Batch runs fn and publishes the active cluster map once when fn returns, instead of once per
// Remove and once per cluster that finishes warming while fn runs. Rebuilding the aggregate
// clusters whose members changed, and marking the init target ready, are deferred to the end as
// well. A 10,000-cluster CDS update otherwise copies the whole active map 20,000 times.
//
// fn may call AddOrUpdate, Remove, ApplyAssignment and every other Manager or Cluster method:
// Batch holds no lock while fn runs. Until the batch ends, Get and Snapshot return the active
// map as it was before the batch (plus changes published by other means); Warming is current.
// Batches nest and may run on several goroutines at once; the map is published when the last
// one ends. Safe for concurrent use.
func (m *Manager) Batch(fn func()) {
	m.mu.Lock()
	m.batching++
	m.mu.Unlock()
	defer m.endBatch()
	fn()
}

// endBatch closes one batch; the last one publishes what the batch deferred.
func (m *Manager) endBatch() {
	m.mu.Lock()
	m.batching--
	if m.batching > 0 {
		m.mu.Unlock()
		return
	}
	if m.publishPending {
		m.publishLocked()
	}
	members := m.deferredMembers
	m.deferredMembers = nil
	m.mu.Unlock()
	for name := range members {
		m.memberChanged(name)
	}
	m.checkInit()
}

// publishSoonLocked publishes the active map now, or at the end of the current batch.
func (m *Manager) publishSoonLocked() {
	if m.batching > 0 {
		m.publishPending = true
		return
	}
	m.publishLocked()
}

// deferMemberLocked records that the clusters memberChanged would rebuild for name must be
// rebuilt at the end of the current batch; false outside a batch.
func (m *Manager) deferMemberLocked(name string) bool {
	if m.batching == 0 {
		return false
	}
	if len(m.dependents[name]) == 0 && name != m.localCluster {
		return true
	}
	if m.deferredMembers == nil {
		m.deferredMembers = map[string]bool{}
	}
	m.deferredMembers[name] = true
	return true
}
