package histogram

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/legateproxy/legate/internal/procpin"
)

// Options configure a Histogram.
type Options struct {
	// Unit is the unit of recorded values; the zero value is Unspecified.
	Unit Unit
	// Bounds are the supported bucket bounds reported by cumulative and
	// disjoint output, from the first stats_config.histogram_bucket_settings
	// entry that matches the stat name. nil means DefaultBuckets. A sorted
	// slice is kept as given, so one slice can be shared by many histograms
	// and must not be modified afterwards; an unsorted one is copied and
	// sorted, as Envoy sorts configured buckets.
	Bounds []float64
}

// Histogram is one Envoy histogram: a lock-free recorder plus the interval
// and cumulative statistics of its last Flush. It implements the
// ThreadLocalHistogram/ParentHistogram pair of Envoy's thread-local store,
// with per-P shards in place of per-worker histograms.
//
// Record is safe from any number of goroutines at once and never blocks.
// Flush is safe from any goroutine; concurrent calls are serialized. The
// Snapshots it publishes are immutable. A Histogram must not be copied; its
// zero value is ready to use, with Unspecified unit and default bounds.
//
// A histogram that was never recorded into holds no shards; the first
// Record allocates the shard table, and each shard allocates a block of
// counters for a decade of values the first time one lands in it.
type Histogram struct {
	unit   Unit
	bounds []float64 // nil: defaultBounds

	table atomic.Pointer[shardTable]
	// negative holds the bins of values >= 2^63, which Envoy's int64
	// conversion turns negative. They are never expected, so they are not
	// sharded.
	negative atomic.Pointer[decadeSet]

	flushMu sync.Mutex // serializes Flush; the data it guards is published through stats
	stats   atomic.Pointer[statistics]
}

// statistics is the pair published by one Flush, kept together so readers
// never mix an interval from one flush with a cumulative from another.
type statistics struct {
	interval, cumulative *Snapshot
}

// shardTable has one slot per P, each filled on the first Record made on
// that P. It is made for GOMAXPROCS at the first Record and made again,
// larger, when a P beyond it records (GOMAXPROCS raised by the program, or
// by the runtime following a container's CPU limit), holding the same
// shards: a P beyond the table never records on another P's shard.
type shardTable struct {
	shards []atomic.Pointer[shard]
}

// decade counts the 90 bins sharing one exponent.
type decade [binsPerDecade]atomic.Uint64

// decadeSet holds a lazily allocated decade per exponent.
type decadeSet [decades]atomic.Pointer[decade]

// shard is the recording state of one P. Its size is a whole number of
// cache lines, and allocations of that size class are line aligned, so two
// Ps never write to the same line.
type shard struct {
	zero atomic.Uint64
	decadeSet
	_ [32]byte
}

// New returns an empty histogram.
func New(opts Options) *Histogram {
	h := &Histogram{unit: opts.Unit}
	if opts.Bounds != nil {
		h.bounds = opts.Bounds
		if !slices.IsSorted(h.bounds) {
			h.bounds = slices.Clone(h.bounds)
			slices.Sort(h.bounds)
		}
	}
	return h
}

// Unit returns the unit given to New.
func (h *Histogram) Unit() Unit { return h.unit }

// Bounds returns the supported bucket bounds, ascending. The slice is shared
// and must not be modified.
func (h *Histogram) Bounds() []float64 {
	if h.bounds == nil {
		return defaultBounds[:]
	}
	return h.bounds
}

// Record adds one sample, as Envoy's Histogram::recordValue. It takes no
// lock and, once the bins it touches exist, allocates nothing.
func (h *Histogram) Record(v uint64) {
	pid := procpin.Pin()
	procpin.Unpin()
	h.RecordOn(v, pid)
}

// RecordOn is Record on the shard of P pid, which a caller that knows its P (it read it
// moments ago) passes instead of Record finding it again. The shards' counters are atomics,
// so any pid is correct, a stale one (a goroutine since moved to another P) costs only
// some cache traffic; an id beyond the table grows it.
func (h *Histogram) RecordOn(v uint64, pid int) {
	if t := h.table.Load(); t != nil && int64(v) >= 0 {
		if s := t.shard(pid); s != nil {
			if v == 0 {
				s.zero.Add(1)
				return
			}
			// binOf, with the common two-digit case written out here
			// because the compiler will not inline it.
			exp, idx := 1, int(v)-10
			if v < 10 {
				exp, idx = 0, int(v)*10-10
			} else if v >= 100 {
				exp, idx = binOfLarge(v)
			}
			if d := s.decadeSet[exp].Load(); d != nil {
				d[idx].Add(1)
				return
			}
		}
	}
	h.recordSlow(v, pid)
}

// recordSlow installs whatever Record found missing, then counts v on P
// pid's shard. It is not pinned because it may allocate; a goroutine that
// moves to another P in between only costs some cache traffic.
func (h *Histogram) recordSlow(v uint64, pid int) {
	if int64(v) < 0 {
		negative := h.negative.Load()
		if negative == nil {
			negative = installed(&h.negative)
		}
		exp, idx := binOf(negativeMagnitude(v))
		negative.get(exp)[idx].Add(1)
		return
	}
	t := h.table.Load()
	if t == nil || pid >= len(t.shards) {
		t = h.grow(t, pid)
	}
	slot := &t.shards[pid]
	s := slot.Load()
	if s == nil {
		s = installed(slot)
	}
	if v == 0 {
		s.zero.Add(1)
		return
	}
	exp, idx := binOf(v)
	s.get(exp)[idx].Add(1)
}

// shard returns P pid's shard, nil when it has none yet or is beyond the
// table.
func (t *shardTable) shard(pid int) *shard {
	if uint(pid) < uint(len(t.shards)) {
		return t.shards[pid].Load()
	}
	return nil
}

// grow replaces the table old (nil: none yet) with one of a slot for P pid
// and for every P of GOMAXPROCS now, holding old's shards, and returns the
// table installed (this one or a concurrent caller's). It first fills every
// empty slot of old: a Record that loaded old may install a shard there at
// any time, which the new table would miss, but a filled slot is never
// written again, so every count stays in a shard Flush reads.
func (h *Histogram) grow(old *shardTable, pid int) *shardTable {
	for {
		var kept []atomic.Pointer[shard]
		if old != nil {
			kept = old.shards
		}
		t := &shardTable{shards: make([]atomic.Pointer[shard], max(procpin.Slots(), pid+1, len(kept)))}
		for i := range kept {
			t.shards[i].Store(installed(&kept[i]))
		}
		if h.table.CompareAndSwap(old, t) {
			return t
		}
		if old = h.table.Load(); pid < len(old.shards) {
			return old
		}
	}
}

// get returns the decade for exp, allocating it on first use.
func (ds *decadeSet) get(exp int) *decade {
	if d := ds[exp].Load(); d != nil {
		return d
	}
	return installed(&ds[exp])
}

// installed stores a new T in an empty slot, or returns the one another
// goroutine stored first.
func installed[T any](slot *atomic.Pointer[T]) *T {
	fresh := new(T)
	if slot.CompareAndSwap(nil, fresh) {
		return fresh
	}
	return slot.Load()
}

// Flush moves everything recorded since the previous Flush into a new
// interval Snapshot and adds it to the cumulative one, as Envoy's
// ParentHistogramImpl::merge does on each stats flush. A histogram never
// recorded into stays unused and keeps no statistics. Flush may be called
// from any goroutine; calls are serialized.
func (h *Histogram) Flush() {
	h.flushMu.Lock()
	defer h.flushMu.Unlock()
	t, negative := h.table.Load(), h.negative.Load()
	if t == nil && negative == nil {
		return
	}
	prev := h.stats.Load()
	bins := h.drain(t, negative)

	var interval, cumulative *Snapshot
	switch {
	case prev == nil:
		interval = newSnapshot(h.unit, bins)
		cumulative = interval
	case len(bins) == 0 && prev.interval.Count() == 0:
		return // nothing new, and the published pair already says so
	case len(bins) == 0:
		interval = newSnapshot(h.unit, nil)
		cumulative = prev.cumulative
	default:
		interval = newSnapshot(h.unit, bins)
		cumulative = newSnapshot(h.unit, mergeBins(prev.cumulative.bins, bins))
	}
	h.stats.Store(&statistics{interval: interval, cumulative: cumulative})
}

// drain takes every count out of the shards, leaving them at zero, and
// returns the non-empty bins in ascending order, summed across shards.
func (h *Histogram) drain(t *shardTable, negative *decadeSet) []bin {
	var buf [64]bin
	out := buf[:0]
	var acc [binsPerDecade]uint64
	if negative != nil {
		for exp := decades - 1; exp >= 0; exp-- {
			if !takeDecade(&acc, negative[exp].Load()) {
				continue
			}
			for idx := binsPerDecade - 1; idx >= 0; idx-- {
				if acc[idx] != 0 {
					out = append(out, bin{key: keyOf(exp, idx, true), count: acc[idx]})
				}
			}
			acc = [binsPerDecade]uint64{}
		}
	}
	if t == nil {
		return exactCopy(out)
	}
	var zero uint64
	for i := range t.shards {
		if s := t.shards[i].Load(); s != nil && s.zero.Load() != 0 {
			zero = addSaturating(zero, s.zero.Swap(0))
		}
	}
	if zero != 0 {
		out = append(out, bin{key: 0, count: zero})
	}
	for exp := range decades {
		found := false
		for i := range t.shards {
			if s := t.shards[i].Load(); s != nil && takeDecade(&acc, s.decadeSet[exp].Load()) {
				found = true
			}
		}
		if !found {
			continue
		}
		for idx, c := range acc {
			if c != 0 {
				out = append(out, bin{key: keyOf(exp, idx, false), count: c})
			}
		}
		acc = [binsPerDecade]uint64{}
	}
	return exactCopy(out)
}

// exactCopy moves bins off drain's stack buffer (slices.Clone would make
// the buffer escape to the heap). No bins gives nil.
func exactCopy(bins []bin) []bin {
	if len(bins) == 0 {
		return nil
	}
	out := make([]bin, len(bins))
	copy(out, bins)
	return out
}

// takeDecade adds the counts of d to acc and zeroes them, reporting
// whether any was non-zero. A nil d adds nothing.
func takeDecade(acc *[binsPerDecade]uint64, d *decade) bool {
	if d == nil {
		return false
	}
	found := false
	for i := range d {
		if d[i].Load() != 0 {
			acc[i] = addSaturating(acc[i], d[i].Swap(0))
			found = true
		}
	}
	return found
}

// addSaturating adds as circllhist does, sticking at the maximum instead of
// wrapping.
func addSaturating(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return ^uint64(0)
}

// mergeBins returns the bin-wise sum of two ascending bin lists, as
// hist_accumulate.
func mergeBins(a, b []bin) []bin {
	out := make([]bin, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		switch {
		case a[0].key < b[0].key:
			out, a = append(out, a[0]), a[1:]
		case a[0].key > b[0].key:
			out, b = append(out, b[0]), b[1:]
		default:
			out = append(out, bin{key: a[0].key, count: addSaturating(a[0].count, b[0].count)})
			a, b = a[1:], b[1:]
		}
	}
	out = append(out, a...)
	return slices.Clip(append(out, b...))
}

// Used reports whether a Flush has merged recorded data, Envoy's notion of
// a used histogram: until then, text output shows "No recorded values" and
// usedonly hides it.
func (h *Histogram) Used() bool { return h.stats.Load() != nil }

// Interval returns the statistics of the samples recorded between the last
// two Flushes (empty before the first).
func (h *Histogram) Interval() *Snapshot {
	interval, _ := h.Snapshots()
	return interval
}

// Cumulative returns the statistics of every sample flushed so far.
func (h *Histogram) Cumulative() *Snapshot {
	_, cumulative := h.Snapshots()
	return cumulative
}

// Snapshots returns the interval and cumulative statistics published by the
// same Flush. Before the first Flush both are empty.
func (h *Histogram) Snapshots() (interval, cumulative *Snapshot) {
	if st := h.stats.Load(); st != nil {
		return st.interval, st.cumulative
	}
	empty := newSnapshot(h.unit, nil)
	return empty, empty
}
