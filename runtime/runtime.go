package runtime

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/logging"
)

// Runtime is Envoy's Runtime::Loader for a layered_runtime. Safe for
// concurrent use: lookups go through Snapshot, which never blocks.
type Runtime struct {
	cfg    Config
	stats  *Stats
	log    *logging.Logger
	random func() uint64
	// static holds each static layer's entries, built once (by layer index).
	static map[int]map[string]entry

	mu    sync.Mutex                  // serialises reloads; guards admin and rtds
	admin map[string]entry            // replaced, never mutated, on Modify
	rtds  map[string]map[string]entry // by layer name; replaced on update

	snap atomic.Pointer[Snapshot]
}

// New validates cfg, loads every layer and publishes the first snapshot. A
// disk layer whose directory is missing is skipped, and one that cannot be
// read counts runtime.load_error; neither fails New.
func New(cfg Config) (*Runtime, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &Runtime{
		cfg:    cfg,
		stats:  cfg.Stats,
		log:    cfg.Log,
		random: cfg.Random,
		static: map[int]map[string]entry{},
		admin:  map[string]entry{},
		rtds:   map[string]map[string]entry{},
	}
	if r.stats == nil {
		r.stats = &Stats{}
	}
	if r.random == nil {
		r.random = rand.Uint64
	}
	for i, l := range cfg.Layers {
		if l.Static == nil {
			continue
		}
		values, err := flattenStatic(l.Static)
		if err != nil {
			return nil, fmt.Errorf("layered_runtime.layers[%d] (%q).static_layer: %w", i, l.Name, err)
		}
		r.static[i] = values
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reloadLocked()
	return r, nil
}

// Snapshot returns the current snapshot. Hold it for the duration of one
// decision so that related lookups agree.
func (r *Runtime) Snapshot() *Snapshot { return r.snap.Load() }

// Changed returns a channel closed when the next snapshot is published.
func (r *Runtime) Changed() <-chan struct{} { return r.snap.Load().Changed() }

// HasAdminLayer reports whether an admin layer is configured.
func (r *Runtime) HasAdminLayer() bool {
	for _, l := range r.cfg.Layers {
		if l.Admin {
			return true
		}
	}
	return false
}

// Modify merges values into the admin layer (POST /runtime_modify): each
// value is parsed as YAML and kept as its raw string; an empty value removes
// an earlier admin override (values from other layers, such as disk, can be
// overridden but not deleted). All values are checked before any is applied.
// Without an admin layer it returns ErrNoAdminLayer.
func (r *Runtime) Modify(values map[string]string) error {
	if !r.HasAdminLayer() {
		return ErrNoAdminLayer
	}
	parsed := make(map[string]entry, len(values))
	for k, v := range values {
		if v == "" {
			continue
		}
		e, err := stringEntry(v)
		if err != nil {
			return fmt.Errorf("runtime_modify: key %q: %w", k, err)
		}
		parsed[k] = e
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	next := make(map[string]entry, len(r.admin)+len(parsed))
	for k, e := range r.admin {
		next[k] = e
	}
	for k, v := range values {
		if v == "" {
			delete(next, k)
		} else {
			next[k] = parsed[k]
		}
	}
	r.admin = next
	if len(next) == 0 {
		r.stats.AdminOverridesActive.Set(0)
	} else {
		r.stats.AdminOverridesActive.Set(1)
	}
	r.reloadLocked()
	return nil
}

// SetRTDSLayer replaces the values of the RTDS layer whose resource name is
// name, from the Runtime resource's layer Struct (as structpb.Struct.AsMap
// returns it); nil clears the layer (resource removed). It is the hook the
// xDS client calls after decoding an update.
func (r *Runtime) SetRTDSLayer(name string, layer map[string]any) error {
	found := false
	for _, l := range r.cfg.Layers {
		if l.RTDS != nil && l.RTDS.Name == name {
			found = true
		}
	}
	if !found {
		return fmt.Errorf("rtds_layer %q: no such layer in layered_runtime", name)
	}
	values, err := flattenStatic(layer)
	if err != nil {
		return fmt.Errorf("rtds runtime %q: %w", name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rtds[name] = values
	r.reloadLocked()
	return nil
}

// Reload reloads every layer and publishes a new snapshot.
func (r *Runtime) Reload() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reloadLocked()
}

// reloadLocked is Envoy's createNewSnapshot: it rebuilds the layer list
// (re-reading disk layers), updates the load stats and publishes. Requires mu.
func (r *Runtime) reloadLocked() {
	var layers []layer
	diskLayers, errorLayers := 0, 0
	for i, l := range r.cfg.Layers {
		switch {
		case l.Static != nil:
			layers = append(layers, layer{name: l.Name, values: r.static[i]})
		case l.Disk != nil:
			path := r.diskPath(l.Disk)
			if !dirExists(path) {
				continue
			}
			values, err := readDiskLayer(path)
			if err != nil {
				errorLayers++
				r.log.Debugf("error loading runtime values for layer %s from disk: %v", l.Name, err)
				continue
			}
			diskLayers++
			layers = append(layers, layer{name: l.Name, values: values})
		case l.Admin:
			layers = append(layers, layer{name: l.Name, values: r.admin})
		case l.RTDS != nil:
			layers = append(layers, layer{name: l.Name, values: r.rtds[l.RTDS.Name]})
		}
	}
	r.stats.NumLayers.Set(uint64(len(layers)))
	if errorLayers == 0 {
		r.stats.LoadSuccess.Inc()
	} else {
		r.stats.LoadError.Inc()
	}
	// Envoy counts an override directory when more than one disk layer
	// loaded (the legacy root plus override layout).
	if diskLayers > 1 {
		r.stats.OverrideDirExists.Inc()
	} else {
		r.stats.OverrideDirNotExists.Inc()
	}
	s := newSnapshot(layers, r.random, r.stats)
	r.stats.NumKeys.Set(uint64(len(s.values)))
	if old := r.snap.Swap(s); old != nil {
		close(old.superseded)
	}
}

func (r *Runtime) diskPath(d *DiskLayer) string {
	path := d.SymlinkRoot + "/" + d.Subdirectory
	if d.AppendServiceCluster {
		path += "/" + r.cfg.ServiceCluster
	}
	return path
}

// Run watches the symlink roots of the disk layers and reloads when one is
// swapped (replaced by a rename, re-pointed, created or removed), the way
// Envoy reloads on a moved-to event. It polls every PollInterval and returns
// when ctx is done. Without disk layers it just waits for ctx.
func (r *Runtime) Run(ctx context.Context) error {
	roots := r.symlinkRoots()
	if len(roots) == 0 {
		<-ctx.Done()
		return nil
	}
	interval := r.cfg.PollInterval
	if interval <= 0 {
		interval = time.Second
	}
	clk := r.cfg.Clock
	if clk == nil {
		clk = clock.Real()
	}
	ticker := clk.NewTicker(interval)
	defer ticker.Stop()
	seen := make([]linkState, len(roots))
	for i, root := range roots {
		seen[i] = statLink(root)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
		changed := false
		for i, root := range roots {
			if now := statLink(root); now != seen[i] {
				seen[i] = now
				changed = true
			}
		}
		if changed {
			r.log.Debugf("runtime symlink root changed; reloading")
			r.Reload()
		}
	}
}

func (r *Runtime) symlinkRoots() []string {
	set := map[string]bool{}
	for _, l := range r.cfg.Layers {
		if l.Disk != nil {
			set[l.Disk.SymlinkRoot] = true
		}
	}
	roots := make([]string, 0, len(set))
	for root := range set {
		roots = append(roots, root)
	}
	sort.Strings(roots)
	return roots
}
