package maglev

import (
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/lb"
)

// Balancer is a MAGLEV snapshot: one table per priority level. Safe for concurrent use.
type Balancer struct {
	*lb.HashBalancer
}

// New builds the tables; cfg.Maglev.TableSize (default 65537, prime) sets their size.
func New(p lb.Params, cfg *lb.Config) (*Balancer, error) {
	if cfg == nil {
		cfg = &lb.Config{}
	}
	size := cfg.MaglevTableSize()
	hb, err := lb.NewHashBalancer(p, cfg, func(ws []lb.WeightedHost, _, maxW float64) lb.HashTable {
		return NewTable(ws, maxW, size, cfg.UseHostnameForHashing)
	})
	if err != nil {
		return nil, err
	}
	return &Balancer{hb}, nil
}

// Factory adapts New to lb.Factory.
func Factory(p lb.Params, cfg *lb.Config) (lb.Balancer, error) { return New(p, cfg) }

// Table is one level's Maglev lookup table. Immutable.
type Table struct {
	slots []uint32
	hosts []*host.Host
	// MinEntriesPerHost and MaxEntriesPerHost are Envoy's maglev_lb.min/max_entries_per_host.
	MinEntriesPerHost, MaxEntriesPerHost uint64
}

type buildEntry struct {
	key            string
	host           *host.Host
	weight, target float64
	skip           uint64
	pos, count     uint64 // pos = (offset + skip×next) mod size, advanced without division
}

// NewTable builds a table of size slots (a prime) from normalized weights.
func NewTable(ws []lb.WeightedHost, maxW float64, size uint64, useHostname bool) *Table {
	t := &Table{}
	if len(ws) == 0 || size == 0 {
		return t
	}
	es := make([]buildEntry, len(ws))
	for i, wh := range ws {
		es[i] = buildEntry{key: lb.HashKey(wh.Host, useHostname), host: wh.Host, weight: wh.Weight}
	}
	slices.SortStableFunc(es, func(a, b buildEntry) int { return strings.Compare(a.key, b.key) })
	t.hosts = make([]*host.Host, len(es))
	seeded := xxhash.NewWithSeed(1)
	for i := range es {
		e := &es[i]
		t.hosts[i] = e.host
		e.pos = xxhash.Sum64String(e.key) % size
		seeded.ResetWithSeed(1)
		_, _ = seeded.WriteString(e.key)
		e.skip = seeded.Sum64()%(size-1) + 1
	}
	t.slots = make([]uint32, size)
	// taken marks the filled slots: probing reads this bitmap (8 KB for the default size, in L1)
	// instead of the 256 KB slot table.
	taken := make([]uint64, (size+63)/64)
	var filled uint64
	for round := uint64(1); filled < size; round++ {
		for i := range es {
			if filled >= size {
				break
			}
			e := &es[i]
			if float64(round)*e.weight < e.target {
				continue
			}
			e.target += maxW
			pos := e.pos
			for taken[pos/64]&(1<<(pos%64)) != 0 {
				pos = advance(pos, e.skip, size)
			}
			taken[pos/64] |= 1 << (pos % 64)
			t.slots[pos] = uint32(i)
			e.pos = advance(pos, e.skip, size)
			e.count++
			filled++
		}
	}
	t.MinEntriesPerHost = size
	for _, e := range es {
		t.MinEntriesPerHost = min(t.MinEntriesPerHost, e.count)
		t.MaxEntriesPerHost = max(t.MaxEntriesPerHost, e.count)
	}
	return t
}

// advance returns the slot after pos in a permutation of step skip (skip < size, so one
// subtraction replaces the modulo; written so the compiler emits a conditional move, as the
// wrap is unpredictable).
func advance(pos, skip, size uint64) uint64 {
	pos += skip
	wrapped := pos - size
	if pos >= size {
		pos = wrapped
	}
	return pos
}

// Size returns the number of slots (0 for an empty table).
func (t *Table) Size() int { return len(t.slots) }

// Choose returns the slot owner for hash, perturbing the hash on retry attempts as Envoy does.
func (t *Table) Choose(hash uint64, attempt uint32) *host.Host {
	if len(t.slots) == 0 {
		return nil
	}
	if attempt > 0 {
		hash ^= ^uint64(0) - uint64(attempt) + 1
	}
	return t.hosts[t.slots[hash%uint64(len(t.slots))]]
}
