// Package ringhash implements Envoy's RING_HASH policy (ketama consistent hashing).
//
// The ring is built exactly as Envoy builds it, so the same hosts land on the same ring
// positions: hosts are normalized to weights summing to 1, the scale
// min(ceil(minWeight×minimum_ring_size)/minWeight, maximum_ring_size) gives each host
// scale×weight entries (running sums keep fractional shares stable), entry i of a host hashes
// "<key>_<i>" where key is the envoy.lb hash_key metadata, the hostname
// (use_hostname_for_hashing) or the address, with xxHash64 (seed 0) or libstdc++'s MurmurHash2.
// A pick is the first entry whose hash is >= the request hash, wrapping to the first entry;
// retry attempt n moves n entries further.
//
// Concurrency: a Balancer is an immutable snapshot; Pick is a lock-free, allocation-free binary
// search.
package ringhash

import (
	"math"
	"slices"
	"strconv"

	"github.com/cespare/xxhash/v2"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/lb"
)

// Balancer is a RING_HASH snapshot: one ring per priority level. Safe for concurrent use.
type Balancer struct {
	*lb.HashBalancer
}

// New builds the rings. cfg.RingHash gives the ring bounds and hash function,
// cfg.UseHostnameForHashing the key.
func New(p lb.Params, cfg *lb.Config) (*Balancer, error) {
	if cfg == nil {
		cfg = &lb.Config{}
	}
	minSize, maxSize := cfg.RingSizes()
	hb, err := lb.NewHashBalancer(p, cfg, func(ws []lb.WeightedHost, minW, _ float64) lb.HashTable {
		return NewRing(ws, minW, minSize, maxSize, cfg.RingHash.HashFunction, cfg.UseHostnameForHashing)
	})
	if err != nil {
		return nil, err
	}
	return &Balancer{hb}, nil
}

// Factory adapts New to lb.Factory.
func Factory(p lb.Params, cfg *lb.Config) (lb.Balancer, error) { return New(p, cfg) }

// Ring is one level's sorted hash ring. Immutable.
type Ring struct {
	hashes []uint64
	owners []uint32
	hosts  []*host.Host
	// MinHashesPerHost and MaxHashesPerHost are Envoy's ring_hash_lb.min/max_hashes_per_host.
	MinHashesPerHost, MaxHashesPerHost uint64
}

type entry struct {
	hash  uint64
	owner uint32
}

// NewRing builds the ring for normalized weights (see lb.NormalizedWeights).
func NewRing(ws []lb.WeightedHost, minW float64, minSize, maxSize uint64, fn lb.HashFunction, useHostname bool) *Ring {
	r := &Ring{}
	if len(ws) == 0 {
		return r
	}
	scale := min(math.Ceil(minW*float64(minSize))/minW, float64(maxSize))
	size := uint64(math.Ceil(scale))
	entries := make([]entry, 0, size)
	r.hosts = make([]*host.Host, len(ws))
	r.MinHashesPerHost = size
	var buf []byte
	var current, target float64
	for hi, wh := range ws {
		r.hosts[hi] = wh.Host
		buf = append(buf[:0], lb.HashKey(wh.Host, useHostname)...)
		buf = append(buf, '_')
		prefix := len(buf)
		target += scale * wh.Weight
		var i uint64
		for current < target {
			buf = strconv.AppendUint(buf[:prefix], i, 10)
			var h uint64
			if fn == lb.MurmurHash2 {
				h = MurmurHash2(buf, StdHashSeed)
			} else {
				h = xxhash.Sum64(buf)
			}
			entries = append(entries, entry{hash: h, owner: uint32(hi)})
			i++
			current++
		}
		r.MinHashesPerHost = min(r.MinHashesPerHost, i)
		r.MaxHashesPerHost = max(r.MaxHashesPerHost, i)
	}
	sortEntries(entries)
	r.hashes = make([]uint64, len(entries))
	r.owners = make([]uint32, len(entries))
	for i, e := range entries {
		r.hashes[i], r.owners[i] = e.hash, e.owner
	}
	return r
}

// Len returns the number of ring entries.
func (r *Ring) Len() int { return len(r.hashes) }

// Choose returns the owner of the first entry whose hash is >= h (wrapping), moved by attempt.
func (r *Ring) Choose(h uint64, attempt uint32) *host.Host {
	n := len(r.hashes)
	if n == 0 {
		return nil
	}
	// Lower bound: the first index whose hash is >= h.
	lo, hi := 0, n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if r.hashes[mid] < h {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	i := lo
	if i == n {
		i = 0
	}
	if attempt > 0 {
		i = (i + int(attempt)) % n
	}
	return r.hosts[r.owners[i]]
}

// sortEntries sorts by hash: a comparison sort for small rings, an LSD radix sort (four 16-bit
// digits) for large ones, where it is several times faster.
func sortEntries(es []entry) {
	if len(es) < 1<<14 {
		slices.SortFunc(es, func(a, b entry) int {
			switch {
			case a.hash < b.hash:
				return -1
			case a.hash > b.hash:
				return 1
			default:
				return int(a.owner) - int(b.owner)
			}
		})
		return
	}
	tmp := make([]entry, len(es))
	src, dst := es, tmp
	var counts [1 << 16]int
	for shift := uint(0); shift < 64; shift += 16 {
		clear(counts[:])
		for _, e := range src {
			counts[(e.hash>>shift)&0xffff]++
		}
		sum := 0
		for i, c := range counts {
			counts[i] = sum
			sum += c
		}
		for _, e := range src {
			d := (e.hash >> shift) & 0xffff
			dst[counts[d]] = e
			counts[d]++
		}
		src, dst = dst, src
	}
	// Four passes: the sorted data is back in es.
}
