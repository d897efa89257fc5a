package filter

import (
	"reflect"
	"sync"

	"github.com/legateproxy/legate/stats"
)

// Stats lists the filters' stats structs in the stats store, one struct per name prefix and
// type shared by every filter that asks for it: two connection managers with one stat_prefix,
// or a configuration and its replacement while the old one drains, count in the same stats,
// as Envoy's scopes share a name. Safe for concurrent use.
type Stats struct {
	store *stats.Store
	mu    sync.Mutex
	byKey map[statsKey]*sharedStats
}

type statsKey struct {
	prefix string
	t      reflect.Type
}

type sharedStats struct {
	v    any // a pointer to the stats struct
	reg  *stats.Registration
	refs int
}

// NewStats returns the filters' stats of store; a nil store keeps them unlisted.
func NewStats(store *stats.Store) *Stats {
	return &Stats{store: store, byKey: map[statsKey]*sharedStats{}}
}

// AcquireStats returns the stats struct T listed under prefix, and the release that drops
// the caller's hold (the struct is unlisted when the last hold goes). With a nil s the struct
// is the caller's own and release does nothing.
func AcquireStats[T any](s *Stats, prefix string) (st *T, release func()) {
	if s == nil {
		return new(T), func() {}
	}
	key := statsKey{prefix, reflect.TypeFor[T]()}
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.byKey[key]
	if sh == nil {
		v := new(T)
		sh = &sharedStats{v: v}
		if s.store != nil {
			sh.reg = s.store.Register(prefix, v)
		}
		s.byKey[key] = sh
	}
	sh.refs++
	var once sync.Once
	return sh.v.(*T), func() { once.Do(func() { s.release(key) }) }
}

func (s *Stats) release(key statsKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.byKey[key]
	if sh == nil {
		return
	}
	if sh.refs--; sh.refs == 0 {
		if sh.reg != nil {
			sh.reg.Unregister()
		}
		delete(s.byKey, key)
	}
}

// Counter returns the counter called name, listed for as long as the process runs: for stats
// whose names come from requests (Envoy's per-downstream-cluster fault stats). Without a
// store it is a counter of the caller's own.
func (s *Stats) Counter(name string) *stats.Counter {
	if s == nil || s.store == nil {
		return new(stats.Counter)
	}
	return s.store.Counter(name)
}
