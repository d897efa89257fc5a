package stats

import (
	"fmt"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/stats/histogram"
	"github.com/legateproxy/legate/stats/tags"
)

// Config configures a Store. The zero value is Envoy's default stats_config:
// default tag extractors, every stat accepted, default histogram buckets,
// 5 s flush interval.
type Config struct {
	// Tags configures tag extraction (stats_config.stats_tags,
	// use_all_default_tags, --stats-tag).
	Tags tags.Config
	// Matcher is stats_config.stats_matcher; nil accepts everything.
	Matcher *Matcher
	// Buckets is stats_config.histogram_bucket_settings, first match wins.
	Buckets []BucketSetting
	// FakeSymbolTable is --use-fake-symbol-table. When true, recent-lookup
	// tracking cannot be enabled (Envoy's fake symbol table has no lookup
	// recorder).
	FakeSymbolTable bool
	// FlushInterval is stats_flush_interval; 0 means 5 s.
	FlushInterval time.Duration
	// FlushOnAdmin is stats_flush_on_admin: no timer, flush on admin reads.
	FlushOnAdmin bool
	// Clock drives the flush timer; nil means the system clock.
	Clock clock.Clock
}

// Store holds every registered stat. Safe for concurrent use: see the package
// comment for what is lock-free and what takes mu.
type Store struct {
	cfg    Config
	tagger *tags.Producer

	// mu guards layouts, regs, roots, order and the per-registration
	// dynamic maps. It is never held while a stat is read for rendering.
	mu      sync.Mutex
	layouts map[reflect.Type]*layout
	regs    []*Registration // unordered; Registration.index is the position
	root    *Registration   // stats created by name with Store.Counter etc.
	order   *order          // sorted view, nil when regs changed since it was built

	lookups recentLookups
	names   names // interned tag-extracted names

	// histSinks are the sinks that receive histogram values as they are recorded.
	histSinks atomic.Pointer[[]HistogramSink]
	sinksMu   sync.Mutex // guards sinks and hooks
	sinks     []Sink
	hooks     []func()
	flushMu   sync.Mutex // serialises Flush
}

// New validates cfg and builds a Store.
func New(cfg Config) (*Store, error) {
	tp, err := tags.New(cfg.Tags)
	if err != nil {
		return nil, fmt.Errorf("stats_config: %w", err)
	}
	for i := range cfg.Buckets {
		b := append([]float64(nil), cfg.Buckets[i].Bounds...)
		if len(b) == 0 {
			return nil, fmt.Errorf("stats_config.histogram_bucket_settings[%d].buckets: empty; must have at least one bound", i)
		}
		sort.Float64s(b)
		cfg.Buckets[i].Bounds = b
	}
	if cfg.FlushInterval < 0 {
		return nil, fmt.Errorf("stats_flush_interval = %v; must be positive", cfg.FlushInterval)
	}
	if cfg.FlushInterval == 0 {
		cfg.FlushInterval = 5 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	s := &Store{cfg: cfg, tagger: tp, layouts: make(map[reflect.Type]*layout)}
	s.root = &Registration{store: s, index: -1, layout: &layout{}}
	s.root.dynamic = make(map[string]*Registration)
	return s, nil
}

// Registration is one registered stats struct. Unregister removes its stats
// (and the dynamic stats created through it) from the listing; the fields keep
// working. Safe for concurrent use.
type Registration struct {
	store    *Store
	prefix   string
	base     unsafe.Pointer
	layout   *layout
	rejected []uint64 // bit i set: layout.fields[i] is rejected by the matcher; nil if none
	index    int      // position in store.regs, -1 when not listed
	parent   *Registration
	dynamic  map[string]*Registration // by full name; only on parents, guarded by store.mu
	mode     ImportMode               // dynamic gauges: their import mode
	tags     atomic.Pointer[regTags]  // tag extraction cache, built on first use
	// deferred, when set, keeps the registration out of every listing until
	// one of its stats is used; it is then set to 1 (see RegisterDeferred).
	deferred atomic.Pointer[Gauge]
}

// shown reports whether r's stats are listed: always, unless r is deferred
// and none of its stats has been used. The first listing that finds one
// used marks the deferred stats created.
func (r *Registration) shown() bool {
	d := r.deferred.Load()
	if d == nil || d.Value() != 0 {
		return true
	}
	for fi := range r.layout.fields {
		st := Stat{reg: r, f: &r.layout.fields[fi], fi: fi}
		if st.Used() {
			d.Set(1)
			return true
		}
	}
	return false
}

// Prefix returns the registration's name prefix.
func (r *Registration) Prefix() string { return r.prefix }

// Register is TryRegister for stats structs declared in code: a malformed
// struct type (a missing or invalid `stat` tag) is a programming error, not an
// input error, and panics.
func (s *Store) Register(prefix string, statsStruct any) *Registration {
	r, err := s.TryRegister(prefix, statsStruct)
	if err != nil {
		panic(err)
	}
	return r
}

// TryRegister lists the stats of the struct pointed to by statsStruct under
// prefix (for example "cluster.web."). Every Counter, Gauge, Histogram and
// TextReadout field needs a `stat:"name"` tag; see the package example. The
// struct must stay in place (it is addressed through the pointer) and is kept
// alive until Unregister. Histogram fields are given their bucket bounds here.
func (s *Store) TryRegister(prefix string, statsStruct any) (*Registration, error) {
	return s.register(prefix, statsStruct, nil)
}

// RegisterDeferred is Register with Envoy's deferred stat creation
// (deferred_stat_options.enable_deferred_creation_stats): the stats are left
// out of /stats, the sinks and every other listing until one of them is
// used, as if they did not exist yet, and initialized (Envoy's hidden
// "<StatsStruct>.initialized" gauge) reads 0 until then and 1 after.
func (s *Store) RegisterDeferred(prefix string, statsStruct any, initialized *Gauge) *Registration {
	r, err := s.register(prefix, statsStruct, initialized)
	if err != nil {
		panic(err)
	}
	return r
}

func (s *Store) register(prefix string, statsStruct any, deferred *Gauge) (*Registration, error) {
	v := reflect.ValueOf(statsStruct)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("stats: Register(%q, %T): want a non-nil pointer to a struct", prefix, statsStruct)
	}
	t := v.Elem().Type()
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.layouts[t]
	if !ok {
		var err error
		if l, err = buildLayout(t); err != nil {
			return nil, err
		}
		s.layouts[t] = l
	}
	r := &Registration{store: s, prefix: prefix, base: v.UnsafePointer(), layout: l}
	r.rejected = s.rejections(prefix, l)
	for i := range l.fields {
		f := &l.fields[i]
		if f.kind == KindHistogram {
			at[Histogram](r.base, f).init(f.unit, s.bounds(prefix+f.name))
		}
	}
	r.deferred.Store(deferred)
	s.list(r)
	for i := range l.fields {
		if f := &l.fields[i]; f.kind == KindHistogram && r.listed(i) {
			s.observe(at[Histogram](r.base, f), prefix+f.name)
		}
	}
	return r, nil
}

func (s *Store) rejections(prefix string, l *layout) []uint64 {
	if s.cfg.Matcher == nil {
		return nil
	}
	var bits []uint64
	for i := range l.fields {
		if s.cfg.Matcher.Rejects(prefix + l.fields[i].name) {
			if bits == nil {
				bits = make([]uint64, (len(l.fields)+63)/64)
			}
			bits[i/64] |= 1 << (i % 64)
		}
	}
	return bits
}

func (s *Store) bounds(name string) []float64 {
	for i := range s.cfg.Buckets {
		if s.cfg.Buckets[i].Match.Match(name) {
			return s.cfg.Buckets[i].Bounds
		}
	}
	return nil
}

// list adds r to regs; s.mu is held.
func (s *Store) list(r *Registration) {
	r.index = len(s.regs)
	s.regs = append(s.regs, r)
	s.order = nil
}

// unlist removes r from regs; s.mu is held.
func (s *Store) unlist(r *Registration) {
	if r.index < 0 {
		return
	}
	last := s.regs[len(s.regs)-1]
	s.regs[r.index] = last
	last.index = r.index
	s.regs[len(s.regs)-1] = nil
	s.regs = s.regs[:len(s.regs)-1]
	r.index = -1
	s.order = nil
}

// Unregister removes r's stats, and the stats created through r by name, from
// the listing. Calling it twice is harmless.
func (r *Registration) Unregister() {
	s := r.store
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unlist(r)
	for _, d := range r.dynamic {
		s.unlist(d)
	}
	r.dynamic = nil
}

// single layouts describe a dynamic stat: one field with an empty relative
// name, so the full name is the registration prefix. A dynamic counter is a
// HotCounter (its Counter first, so Counter callers share it): the per-code
// counters every response adds to are dynamic, and its lines cost nothing
// until Inc is called on it as a HotCounter.
var singleLayouts = func() map[Kind]*layout {
	m := make(map[Kind]*layout)
	for _, k := range []Kind{KindCounter, KindGauge, KindHistogram, KindTextReadout} {
		m[k] = &layout{fields: []field{{kind: k, hot: k == KindCounter}}, sorted: []uint32{0}}
	}
	return m
}()

// dynamicStat returns the stat called name under r, creating it. It is the
// slow path: it takes s.mu and counts a recent lookup.
func (r *Registration) dynamicStat(kind Kind, name string, mode ImportMode, unit Unit) (unsafe.Pointer, error) {
	s := r.store
	full := r.prefix + name
	s.lookups.record(full)
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := r.dynamic[full]; ok {
		if d.layout.fields[0].kind != kind {
			return nil, fmt.Errorf("stats: %q already exists as a %s, not a %s", full, d.layout.fields[0].kind, kind)
		}
		return d.base, nil
	}
	var p unsafe.Pointer
	switch kind {
	case KindCounter:
		p = unsafe.Pointer(new(HotCounter))
	case KindGauge:
		p = unsafe.Pointer(new(Gauge))
	case KindHistogram:
		h := new(Histogram)
		h.init(unit, s.bounds(full))
		p = unsafe.Pointer(h)
	case KindTextReadout:
		p = unsafe.Pointer(new(TextReadout))
	}
	if s.cfg.Matcher.Rejects(full) {
		return p, nil // works, never listed, and not remembered (as Envoy's null stats)
	}
	d := &Registration{store: s, prefix: full, base: p, layout: singleLayouts[kind], parent: r, mode: mode}
	if r.dynamic == nil {
		if r.index < 0 && r != s.root {
			return p, nil // r was unregistered: do not list
		}
		r.dynamic = make(map[string]*Registration)
	}
	r.dynamic[full] = d
	s.list(d)
	if kind == KindHistogram {
		s.observe((*Histogram)(p), full)
	}
	return p, nil
}

// Counter returns the counter called r's prefix + name, creating it on first
// use (Envoy's Scope::counterFromString). This is the slow path for stats
// whose names are only known at run time (per response code); keep the
// returned pointer. If name exists with another kind, a detached counter is
// returned.
func (r *Registration) Counter(name string) *Counter {
	p, err := r.dynamicStat(KindCounter, name, 0, 0)
	if err != nil {
		return new(Counter)
	}
	return (*Counter)(p)
}

// HotCounter is Counter for a counter that every core increments at once (a
// cluster's upstream_rq_<code>): the same stat, whose increments through the
// returned HotCounter go to the calling P's line.
func (r *Registration) HotCounter(name string) *HotCounter {
	p, err := r.dynamicStat(KindCounter, name, 0, 0)
	if err != nil {
		return new(HotCounter)
	}
	return (*HotCounter)(p)
}

// Gauge is Counter for gauges; mode applies when the gauge is created.
func (r *Registration) Gauge(name string, mode ImportMode) *Gauge {
	p, err := r.dynamicStat(KindGauge, name, mode, 0)
	if err != nil {
		return new(Gauge)
	}
	return (*Gauge)(p)
}

// Histogram is Counter for histograms.
func (r *Registration) Histogram(name string, unit Unit) *Histogram {
	p, err := r.dynamicStat(KindHistogram, name, 0, unit)
	if err != nil {
		h := new(Histogram)
		h.init(unit, nil)
		return h
	}
	return (*Histogram)(p)
}

// TextReadout is Counter for text readouts.
func (r *Registration) TextReadout(name string) *TextReadout {
	p, err := r.dynamicStat(KindTextReadout, name, 0, 0)
	if err != nil {
		return new(TextReadout)
	}
	return (*TextReadout)(p)
}

// Counter returns the root-scope counter called name, creating it. See
// Registration.Counter. Stats created here live as long as the Store.
func (s *Store) Counter(name string) *Counter { return s.root.Counter(name) }

// Gauge returns the root-scope gauge called name, creating it with mode.
func (s *Store) Gauge(name string, mode ImportMode) *Gauge { return s.root.Gauge(name, mode) }

// Histogram returns the root-scope histogram called name, creating it.
func (s *Store) Histogram(name string, unit Unit) *Histogram { return s.root.Histogram(name, unit) }

// TextReadout returns the root-scope text readout called name, creating it.
func (s *Store) TextReadout(name string) *TextReadout { return s.root.TextReadout(name) }

// snapshotRegs copies the listed registrations.
func (s *Store) snapshotRegs() []*Registration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Registration(nil), s.regs...)
}

// ResetCounters implements POST /reset_counters: every listed counter reads 0
// afterwards (deltas reported to sinks are not disturbed) and the
// recent-lookup list is cleared.
func (s *Store) ResetCounters() {
	for _, r := range s.snapshotRegs() {
		for i := range r.layout.fields {
			if f := &r.layout.fields[i]; f.kind == KindCounter {
				counterAt(r.base, f).reset()
			}
		}
	}
	s.lookups.clearList()
}

// Tagger returns the store's tag producer.
func (s *Store) Tagger() *tags.Producer { return s.tagger }

// BucketBounds returns the configured bucket bounds for the histogram called
// name: the first histogram_bucket_settings match, else Envoy's defaults.
// The result must not be modified.
func (s *Store) BucketBounds(name string) []float64 {
	if b := s.bounds(name); b != nil {
		return b
	}
	return defaultBuckets
}

var defaultBuckets = histogram.DefaultBuckets()
