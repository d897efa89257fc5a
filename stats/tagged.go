package stats

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/legateproxy/legate/stats/tags"
)

// regTags caches the tag extraction of a registration's fields: per field an
// id into the store's table of tag-extracted names and an index into a short
// list of distinct tag sets (a cluster's fields usually share one). Built the
// first time Prometheus output needs it. When the registration's extraction
// comes from a shared template (splitTags), nameIDs and setIdx are shared
// with every registration of the same shape and only sets is its own;
// otherwise they cost about 5 bytes per stat.
type regTags struct {
	nameIDs []uint32
	setIdx  []uint8
	sets    [][]tags.Tag
}

// names interns tag-extracted names. It only grows: a name is shared by every
// instance of a stat (the cluster name is a tag), so it stays small.
type names struct {
	mu  sync.Mutex // guards ids and all
	ids map[string]uint32
	all []string
}

func (n *names) id(s string) uint32 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if id, ok := n.ids[s]; ok {
		return id
	}
	if n.ids == nil {
		n.ids = make(map[string]uint32)
	}
	id := uint32(len(n.all))
	n.ids[s] = id
	n.all = append(n.all, s)
	return id
}

func (n *names) snapshot() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.all[:len(n.all):len(n.all)]
}

// tagCache returns r's extraction cache, building it on first use. Racing
// builders compute the same result; one wins.
func (r *Registration) tagCache() *regTags {
	if t := r.tags.Load(); t != nil {
		return t
	}
	if t := r.splitTags(); t != nil {
		r.tags.CompareAndSwap(nil, t)
		return r.tags.Load()
	}
	s := r.store
	n := len(r.layout.fields)
	t := &regTags{nameIDs: make([]uint32, n), setIdx: make([]uint8, n)}
	var buf []tags.Tag
	var name []byte
	local := make(map[string]uint32)
	for i := range r.layout.fields {
		// name is reused; Extract's results may point into it, so anything
		// kept is cloned.
		name = append(append(name[:0], r.prefix...), r.layout.fields[i].name...)
		var extracted string
		extracted, buf = s.tagger.Extract(unsafe.String(unsafe.SliceData(name), len(name)), buf[:0])
		id, ok := local[extracted]
		if !ok {
			extracted = strings.Clone(extracted)
			id = s.names.id(extracted)
			local[extracted] = id
		}
		t.nameIDs[i] = id
		set := -1
		for j := range t.sets {
			if slices.Equal(t.sets[j], buf) {
				set = j
				break
			}
		}
		if set < 0 {
			kept := make([]tags.Tag, len(buf))
			for k, tg := range buf {
				kept[k] = tags.Tag{Name: strings.Clone(tg.Name), Value: strings.Clone(tg.Value)}
			}
			set = min(len(t.sets), 255) // more than 256 distinct tag sets in one struct does not happen
			if set == len(t.sets) {
				t.sets = append(t.sets, kept)
			} else {
				t.sets[set] = kept
			}
		}
		t.setIdx[i] = uint8(set)
	}
	r.tags.CompareAndSwap(nil, t)
	return r.tags.Load()
}

// splitTags builds r's cache from the prefix and the layout's shared
// per-field work (tags.Fields), without extracting each full name, or
// returns nil when that does not apply (dynamic stats, prefixes an
// extractor could match across). The result equals per-name extraction.
func (r *Registration) splitTags() *regTags {
	if r.parent != nil {
		// Dynamic stats share package-level single-field layouts; they
		// are extracted by name.
		return nil
	}
	s := r.store
	tmpl, sets, ok := r.layout.fieldsFor(s.tagger).Extract(r.prefix)
	if !ok {
		return nil
	}
	return &regTags{nameIDs: r.layout.templateIDs(tmpl, &s.names), setIdx: tmpl.SetIndexes(), sets: sets}
}

// TaggedStat is a Stat with its tag extraction, as EachTagged passes it.
type TaggedStat struct {
	Stat
	// TagExtractedName is the name with the tag values cut out.
	TagExtractedName string
	// Tags are in extraction order (Prometheus label order).
	Tags []tags.Tag
}

type taggedEntry struct {
	reg int32
	fi  int32
}

// EachTagged lists the stats of one kind for which keep returns true in
// Envoy's Prometheus order: grouped by tag-extracted name, groups ordered by
// comparing the names token by token, and inside a group by the full names
// compared the same way. fn gets first=true for the first stat of each group
// and returns false to stop. It holds no lock while reading stats.
//
// It makes two passes over the stats: the first calls keep and counts each
// group, the second places the kept stats in one array of the exact size,
// so a 1M-stat listing allocates 8 bytes per stat once instead of growing
// a slice per group.
func (s *Store) EachTagged(kind Kind, keep func(st *Stat) bool, fn func(st *TaggedStat, first bool) bool) {
	// Decided once, so that both passes see the same stats.
	regs := slices.DeleteFunc(s.snapshotRegs(), func(r *Registration) bool { return !r.shown() })
	sort.SliceStable(regs, func(i, j int) bool {
		return compareSplit(regs[i].prefix, "", regs[j].prefix, "", true) < 0
	})
	// Pass 1: keep, cache, and count per name id.
	var kept []uint64 // bit per visited stat, in visiting order
	var counts []int
	visited := 0
	var st Stat
	caches := make([]*regTags, len(regs))
	for ri, r := range regs {
		l := r.layout
		for _, fi32 := range l.tokenOrder() {
			fi := int(fi32)
			f := &l.fields[fi]
			if f.kind != kind || !r.listed(fi) {
				continue
			}
			if visited/64 >= len(kept) {
				kept = append(kept, 0)
			}
			st = Stat{reg: r, f: f, fi: fi}
			if keep(&st) {
				kept[visited/64] |= 1 << (visited % 64)
				if caches[ri] == nil {
					caches[ri] = r.tagCache()
				}
				id := int(caches[ri].nameIDs[fi])
				if id >= len(counts) {
					counts = append(counts, make([]int, id+1-len(counts))...)
				}
				counts[id]++
			}
			visited++
		}
	}
	all := s.names.snapshot()
	var ids []uint32
	for id, n := range counts {
		if n > 0 {
			ids = append(ids, uint32(id))
		}
	}
	sort.Slice(ids, func(i, j int) bool { return compareSplit(all[ids[i]], "", all[ids[j]], "", true) < 0 })
	// start[id] is where the group goes in entries.
	start := make([]int, len(counts))
	total := 0
	for _, id := range ids {
		start[id] = total
		total += counts[id]
	}
	// Pass 2: place the kept stats, in registration then field order.
	entries := make([]taggedEntry, total)
	at := start // advanced in place; start is not needed afterwards
	visited = 0
	for ri, r := range regs {
		l := r.layout
		for _, fi32 := range l.tokenOrder() {
			fi := int(fi32)
			if l.fields[fi].kind != kind || !r.listed(fi) {
				continue
			}
			if kept[visited/64]&(1<<(visited%64)) != 0 {
				id := caches[ri].nameIDs[fi]
				entries[at[id]] = taggedEntry{reg: int32(ri), fi: int32(fi)}
				at[id]++
			}
			visited++
		}
	}
	less := func(a, b taggedEntry) int {
		ra, rb := regs[a.reg], regs[b.reg]
		return compareSplit(ra.prefix, ra.layout.fields[a.fi].name, rb.prefix, rb.layout.fields[b.fi].name, true)
	}
	var ts TaggedStat
	end := 0
	for _, id := range ids {
		g := entries[end : end+counts[id]]
		end += counts[id]
		for i := 1; i < len(g); i++ {
			if less(g[i-1], g[i]) > 0 {
				sort.SliceStable(g, func(x, y int) bool { return less(g[x], g[y]) < 0 })
				break
			}
		}
		for i, e := range g {
			r := regs[e.reg]
			cache := caches[e.reg]
			ts = TaggedStat{
				Stat:             Stat{reg: r, f: &r.layout.fields[e.fi], fi: int(e.fi)},
				TagExtractedName: all[id],
				Tags:             cache.sets[cache.setIdx[e.fi]],
			}
			if !fn(&ts, i == 0) {
				return
			}
		}
	}
}
