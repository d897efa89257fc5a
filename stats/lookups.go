package stats

import (
	"errors"
	"sort"
	"sync"
	"sync/atomic"
)

// recentCapacity is the number of distinct names kept while tracking is on
// (Envoy's /stats/recentlookups/enable sets capacity 100).
const recentCapacity = 100

// recentLookups is Envoy's RecentLookups: a count of every by-name lookup and,
// when enabled, the most recently used names with their counts.
type recentLookups struct {
	total   atomic.Uint64
	enabled atomic.Bool

	mu    sync.Mutex // guards seq and names
	seq   uint64
	names map[string]*lookup
}

type lookup struct{ count, last uint64 }

// Lookup is one line of /stats/recentlookups.
type Lookup struct {
	Name  string
	Count uint64
}

func (l *recentLookups) record(name string) {
	l.total.Add(1)
	if !l.enabled.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.names == nil {
		return // disabled in between
	}
	l.seq++
	if e, ok := l.names[name]; ok {
		e.count++
		e.last = l.seq
		return
	}
	if len(l.names) >= recentCapacity {
		var oldest string
		var min uint64 = ^uint64(0)
		for n, e := range l.names {
			if e.last < min {
				oldest, min = n, e.last
			}
		}
		delete(l.names, oldest)
	}
	l.names[name] = &lookup{count: 1, last: l.seq}
}

func (l *recentLookups) clearList() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.names != nil {
		l.names = make(map[string]*lookup)
	}
	l.total.Store(0)
}

// ErrLookupsUnavailable is returned by EnableRecentLookups when the store was
// built with the fake symbol table (--use-fake-symbol-table 1), which has no
// lookup recorder.
var ErrLookupsUnavailable = errors.New("stats: recent lookups need --use-fake-symbol-table 0")

// EnableRecentLookups implements POST /stats/recentlookups/enable: names of
// by-name lookups are kept (up to 100 distinct, least recently used dropped).
func (s *Store) EnableRecentLookups() error {
	if s.cfg.FakeSymbolTable {
		return ErrLookupsUnavailable
	}
	l := &s.lookups
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.names == nil {
		l.names = make(map[string]*lookup)
	}
	l.enabled.Store(true)
	return nil
}

// DisableRecentLookups implements POST /stats/recentlookups/disable: the list
// is dropped; the total keeps counting.
func (s *Store) DisableRecentLookups() {
	l := &s.lookups
	l.mu.Lock()
	defer l.mu.Unlock()
	l.enabled.Store(false)
	l.names = nil
}

// ClearRecentLookups implements POST /stats/recentlookups/clear: the list and
// the total are cleared; tracking stays as it was.
func (s *Store) ClearRecentLookups() { s.lookups.clearList() }

// RecentLookupsTotal is the number of by-name lookups since the last clear
// (gauge server.stats_recent_lookups).
func (s *Store) RecentLookupsTotal() uint64 { return s.lookups.total.Load() }

// RecentLookups returns whether tracking is on and the tracked names sorted by
// ascending count, then name, as /stats/recentlookups lists them.
func (s *Store) RecentLookups() (enabled bool, list []Lookup) {
	l := &s.lookups
	l.mu.Lock()
	defer l.mu.Unlock()
	for n, e := range l.names {
		list = append(list, Lookup{Name: n, Count: e.count})
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].Count != list[j].Count {
			return list[i].Count < list[j].Count
		}
		return list[i].Name < list[j].Name
	})
	return l.enabled.Load(), list
}
