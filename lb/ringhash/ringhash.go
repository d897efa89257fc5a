package ringhash

import (
	"math"
	mathbits "math/bits"
	"slices"

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
	entries []entry // sorted by hash
	hosts   []*host.Host
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
		buf = append(buf, '_', '0')
		target += scale * wh.Weight
		var i uint64
		for current < target {
			// buf is the host's key, "_" and i in decimal (Envoy's ring key).
			var h uint64
			if fn == lb.MurmurHash2 {
				h = MurmurHash2(buf, StdHashSeed)
			} else {
				h = xxhash.Sum64(buf)
			}
			entries = append(entries, entry{hash: h, owner: uint32(hi)})
			buf = incrementDecimal(buf)
			i++
			current++
		}
		r.MinHashesPerHost = min(r.MinHashesPerHost, i)
		r.MaxHashesPerHost = max(r.MaxHashesPerHost, i)
	}
	r.entries = sortEntries(entries)
	return r
}

// incrementDecimal adds one to the decimal number that ends buf (after the key's '_'), in
// place: usually one byte changes, where formatting the number anew cost more than hashing.
func incrementDecimal(buf []byte) []byte {
	for i := len(buf) - 1; ; i-- {
		switch c := buf[i]; {
		case c == '9':
			buf[i] = '0'
		case c >= '0' && c < '9':
			buf[i] = c + 1
			return buf
		default: // the '_' before the number: all its digits were 9
			buf = append(buf, '0')
			buf[i+1] = '1'
			return buf
		}
	}
}

// Len returns the number of ring entries.
func (r *Ring) Len() int { return len(r.entries) }

// Choose returns the owner of the first entry whose hash is >= h (wrapping), moved by attempt.
func (r *Ring) Choose(h uint64, attempt uint32) *host.Host {
	n := len(r.entries)
	if n == 0 {
		return nil
	}
	// Lower bound: the first index whose hash is >= h.
	lo, hi := 0, n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if r.entries[mid].hash < h {
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
	return r.hosts[r.entries[i].owner]
}

// sortEntries returns es sorted by hash (ties by owner), in es or in a new slice. Ring hashes
// are xxHash or MurmurHash2 outputs, uniform over 64 bits, so large rings are bucket-sorted on
// their top bits (about four entries a bucket, one counting pass and one scatter pass) and each
// bucket is then sorted in place; a bucket that is unexpectedly large still sorts correctly,
// only slower.
func sortEntries(es []entry) []entry {
	if len(es) < 1<<12 {
		slices.SortFunc(es, compareEntries)
		return es
	}
	bits := uint(mathbits.Len(uint(len(es)/4)) - 1)
	shift := 64 - bits
	starts := make([]int, 1<<bits+1)
	for i := range es {
		starts[es[i].hash>>shift+1]++
	}
	for i := 1; i < len(starts); i++ {
		starts[i] += starts[i-1]
	}
	out := make([]entry, len(es))
	next := slices.Clone(starts[:len(starts)-1])
	for i := range es {
		b := es[i].hash >> shift
		out[next[b]] = es[i]
		next[b]++
	}
	for b := 0; b+1 < len(starts); b++ {
		bucket := out[starts[b]:starts[b+1]]
		if len(bucket) > 32 {
			slices.SortFunc(bucket, compareEntries)
			continue
		}
		for i := 1; i < len(bucket); i++ {
			for j := i; j > 0 && compareEntries(bucket[j-1], bucket[j]) > 0; j-- {
				bucket[j-1], bucket[j] = bucket[j], bucket[j-1]
			}
		}
	}
	return out
}

func compareEntries(a, b entry) int {
	switch {
	case a.hash < b.hash:
		return -1
	case a.hash > b.hash:
		return 1
	default:
		return int(a.owner) - int(b.owner)
	}
}
