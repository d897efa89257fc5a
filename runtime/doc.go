// Package runtime implements Envoy's layered runtime (bootstrap
// layered_runtime): static layers from the bootstrap, disk layers read from a
// symlinked directory tree and reloaded when the link is swapped, the admin
// layer changed by POST /runtime_modify, and RTDS layers whose values the xDS
// client sets. Typed lookups (Uint64, Double, Bool, FeatureEnabled,
// FractionalPercent) read immutable snapshots.
//
// Concurrency: a Runtime is safe for concurrent use. Reloads (admin changes,
// RTDS updates, disk swaps seen by Run) are serialised by one mutex and
// publish a new immutable Snapshot through an atomic.Pointer, so lookups take
// no lock and never block on a reload. Run owns the only goroutine the
// package needs (the disk watcher) and returns when its context ends.
package runtime
