package lb

import (
	"container/heap"
	"math"
	"sync/atomic"
)

// maxSequenceLen bounds the memory of a precomputed schedule (4 bytes per entry).
const maxSequenceLen = 1 << 22

// Sequence is a precomputed weighted round-robin schedule with Envoy's EDF (earliest deadline
// first) semantics: entry i, of weight w, is due at times k/w (k = 1, 2, …); picks follow the
// deadlines, ties going to the lower index. One period holds exactly w picks of each entry,
// spread as smoothly as EDF spreads them. Next walks the period with an atomic counter, so
// picking is lock-free, O(1) and allocation-free. With equal weights there is no table and Next
// is a plain rotation.
//
// Like Envoy, which starts each scheduler after a random number of picks, the walk starts at a
// random offset given to NewSequence.
//
// Sequence is safe for concurrent use; its zero value is not usable.
type Sequence struct {
	_     [64]byte // keep the counter off the cache line of neighbouring data
	next  atomic.Uint64
	_     [56]byte
	order []uint32
	n     uint64
	start uint64
}

// NewSequence builds the schedule of len(weights) entries. Entries of weight 0 are never picked.
// It returns nil when every weight is 0.
func NewSequence(weights []uint32, seed uint64) *Sequence {
	ws := reduceWeights(weights)
	if ws == nil {
		return nil
	}
	s := &Sequence{}
	if allEqual(weights) {
		s.n = uint64(len(weights))
		s.start = seed % s.n
		return s
	}
	var total uint64
	for _, w := range ws {
		total += uint64(w)
	}
	s.order = make([]uint32, 0, total)
	h := make(edfHeap, 0, len(ws))
	for i, w := range ws {
		if w > 0 {
			h = append(h, edfEntry{k: 1, w: uint64(w), idx: uint32(i)})
		}
	}
	heap.Init(&h)
	for uint64(len(s.order)) < total {
		e := &h[0]
		s.order = append(s.order, e.idx)
		e.k++
		heap.Fix(&h, 0)
	}
	s.n = uint64(len(s.order))
	s.start = seed % s.n
	return s
}

// NewFloatSequence is NewSequence for fractional weights (effective locality weights): weights
// are quantized to 1/1000 of the largest before scheduling.
func NewFloatSequence(weights []float64, seed uint64) *Sequence {
	maxW := 0.0
	for _, w := range weights {
		if w > maxW {
			maxW = w
		}
	}
	if maxW <= 0 {
		return nil
	}
	q := make([]uint32, len(weights))
	for i, w := range weights {
		if w > 0 {
			q[i] = uint32(max(1, math.Round(w/maxW*1000)))
		}
	}
	return NewSequence(q, seed)
}

// Next returns the index of the next entry.
func (s *Sequence) Next() int {
	i := (s.next.Add(1) - 1 + s.start) % s.n
	if s.order == nil {
		return int(i)
	}
	return int(s.order[i])
}

// Len returns the length of one period.
func (s *Sequence) Len() int { return int(s.n) }

func allEqual(ws []uint32) bool {
	for _, w := range ws {
		if w != ws[0] {
			return false
		}
	}
	return ws[0] > 0
}

// reduceWeights divides the weights by their greatest common divisor (the schedule is the same,
// only shorter) and scales them down when the period would exceed maxSequenceLen.
func reduceWeights(weights []uint32) []uint32 {
	var g uint32
	var total uint64
	for _, w := range weights {
		g = gcd(g, w)
		total += uint64(w)
	}
	if g == 0 {
		return nil
	}
	out := make([]uint32, len(weights))
	for i, w := range weights {
		out[i] = w / g
	}
	total /= uint64(g)
	if total > maxSequenceLen {
		scale := float64(maxSequenceLen) / float64(total)
		for i, w := range out {
			if w > 0 {
				out[i] = uint32(max(1, math.Floor(float64(w)*scale)))
			}
		}
	}
	return out
}

func gcd(a, b uint32) uint32 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

type edfEntry struct {
	k, w uint64 // next deadline is k/w
	idx  uint32
}

type edfHeap []edfEntry

func (h edfHeap) Len() int { return len(h) }
func (h edfHeap) Less(i, j int) bool {
	a, b := h[i].k*h[j].w, h[j].k*h[i].w
	if a != b {
		return a < b
	}
	return h[i].idx < h[j].idx
}
func (h edfHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *edfHeap) Push(x any)   { *h = append(*h, x.(edfEntry)) }
func (h *edfHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
