package lb

import (
	"container/heap"
	"math"
	"sync/atomic"

	"github.com/legateproxy/legate/internal/procpin"
)

// maxSequenceLen bounds the memory of a precomputed schedule (4 bytes per entry).
const maxSequenceLen = 1 << 22

// Sequence is a precomputed weighted round-robin schedule with the semantics of Envoy's
// EdfScheduler (earliest deadline first) as Envoy's round robin builds it:
//
//   - the entries are queued in index order, entry i due at 1/(w_i + 1e-13) (Envoy's
//     EdfScheduler::createWithPicks adds that epsilon to the first deadlines);
//   - a pick takes the entry with the earliest deadline, moves the scheduler's time to it and
//     queues the entry again at time + 1/w_i, in float64 as Envoy computes it;
//   - equal deadlines go to the entry queued first (Envoy's order_offset), not to the lower
//     index.
//
// One period is the first total/gcd picks of that scheduler (one pick per unit of the reduced
// weights); the schedule is periodic with that length and the period holds each entry exactly
// w_i/gcd times. Like Envoy, which starts each scheduler after uint32(seed) mod 429496729
// picks, the walk starts that many picks into the period. (Envoy's createWithPicks places a
// started scheduler arithmetically and may order entries of equal weight differently from
// picking one by one; Legate's start is the one-by-one position.) With equal weights there is no
// table and Next is a plain rotation starting at seed mod n, as in Envoy.
//
// Next walks the period with a position counter, so picking is lock-free, O(1) and
// allocation-free. There is one shared position, which gives exactly the order of one Envoy
// worker, while one picker at a time uses it; once two pickers take turns on it, each P keeps
// its own position (Envoy keeps a scheduler per worker), the positions spread evenly over the
// period, so that picks on different cores never write the same cache line. Taking turns is
// two pickers colliding on the position, or a pick on one P coming less than spreadWindow
// picks after the position last moved to it from another: a shared position written from two
// cores moves its cache line between them on every pick even when no two picks overlap, and
// two cores picking at once rarely make the compare-and-swap fail (it follows its load within
// a few instructions), so a collision alone could leave every pick of two busy cores on the
// shared line for millions of picks. One picker that moves to another P now and then keeps the
// shared position. Each P's walk is still the whole period in order, so the split by weight is
// exact over every period of every P.
//
// Sequence is safe for concurrent use; its zero value is not usable.
type Sequence struct {
	_ [64]byte // keep the shared position off the cache line of neighbouring data
	// next is the shared position while perP is nil: the index of the next pick (bits 32 to
	// 63), how many picks were made since the position last moved to another P (bits 16 to
	// 31, saturating; saturated before the first pick) and that P's tag (bits 0 to 15; see
	// nextOn).
	next  atomic.Uint64
	_     [56]byte
	perP  atomic.Pointer[positions] // nil until two pickers took turns on next
	order []uint32
	n     uint64
	start uint64
	_     [16]byte // 192 bytes, a multiple of 64: the fields a pick reads share no line with other objects
}

// positions holds one position per P: slot[id] is P id's, each allocated on its own (a 64-byte
// object, so a cache line of its own). The table grows when a P beyond it picks (GOMAXPROCS
// was raised: by the program, or by the runtime following a container's CPU limit) and keeps
// the positions it had, so no P's walk restarts and no two Ps ever share a position, as they
// did when a table made while GOMAXPROCS was 1 was indexed by a mask afterwards. Every pick
// reads the header and the slot pointers: the header is padded to a line and the pointers
// fill whole lines (slotsCap), so neither shares a line with an object other cores write.
type positions struct {
	slot []*position
	_    [40]byte
}

type position struct {
	v atomic.Uint64
	_ [56]byte
}

// spreadWindow is how many picks after the shared position moved to another P a move back
// (or on to a third) makes each P keep its own position: one picker that migrates seldom stays
// on the shared position, two that take turns leave it within a few picks.
const spreadWindow = 64

// maxInitialPicks bounds the initial picks (Envoy's UINT_MAX/10 in createWithPicks).
const maxInitialPicks = 429496729

// NewSequence builds the schedule of len(weights) entries. Entries of weight 0 are never picked
// (Envoy does not queue them). It returns nil when every weight is 0.
func NewSequence(weights []uint32, seed uint64) *Sequence {
	ws, scaled := reduceWeights(weights)
	if ws == nil {
		return nil
	}
	s := &Sequence{}
	if allEqual(weights) {
		s.n = uint64(len(weights))
		s.start = seed % s.n
		s.next.Store(s.start<<32 | runMask)
		return s
	}
	var total uint64
	for _, w := range ws {
		total += uint64(w)
	}
	// Envoy schedules with the hosts' own weights; the reduced ones only give the period. When
	// the period had to be scaled down, the scaled weights are scheduled instead.
	sched := weights
	if scaled {
		sched = ws
	}
	h, queued := startEDF(sched)
	s.order = make([]uint32, 0, total)
	for uint64(len(s.order)) < total {
		s.order = append(s.order, h.pick(&queued))
	}
	s.n = uint64(len(s.order))
	s.start = uint64(uint32(seed)%maxInitialPicks) % s.n
	s.next.Store(s.start<<32 | runMask)
	return s
}

// startEDF returns the scheduler of the non-zero weights as Envoy's createWithPicks builds it
// before any pick, and the next queueing order.
func startEDF(weights []uint32) (edfHeap, uint64) {
	const epsilon = 1e-13 // Envoy's guard against weights that are multiples of each other
	h := make(edfHeap, 0, len(weights))
	for i, w := range weights {
		if w > 0 {
			h = append(h, edfEntry{deadline: 1 / (float64(w) + epsilon), queued: uint64(len(h)), inverse: 1.0 / float64(w), idx: uint32(i)})
		}
	}
	heap.Init(&h)
	return h, uint64(len(h))
}

// pick takes the entry with the earliest deadline and queues it again 1/weight later, behind
// every entry already queued; *queued is the next queueing order.
func (h edfHeap) pick(queued *uint64) uint32 {
	e := h[0]
	idx := e.idx
	// The scheduler's time is now e.deadline.
	e.deadline += e.inverse
	e.queued = *queued
	*queued++
	// Sift the entry down from the root (container/heap.Fix without the interface calls).
	i, n := 0, len(h)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h.before(r, c) {
			c = r
		}
		if !edfBefore(&h[c], &e) {
			break
		}
		h[i] = h[c]
		i = c
	}
	h[i] = e
	return idx
}

func (h edfHeap) before(i, j int) bool { return edfBefore(&h[i], &h[j]) }

// edfBefore orders by deadline, then by queueing order.
func edfBefore(a, b *edfEntry) bool {
	if a.deadline != b.deadline {
		return a.deadline < b.deadline
	}
	return a.queued < b.queued
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
	if s.n == 1 {
		// One entry (a cluster of one host): every pick is it. No position is moved, which
		// spares each pick finding its P and a compare-and-swap on a line every core writes.
		if s.order == nil {
			return 0
		}
		return int(s.order[0])
	}
	return s.nextOn(-1)
}

// The fields of the shared position next.
const (
	runShift = 16
	runMask  = 0xffff << runShift
	tagMask  = 0xffff
)

// nextOn is Next for a picker on P id, or on the P running it when id is negative (the P only
// tells which position to move: a goroutine that moves to another P meanwhile moves that P's,
// still atomically). A P's tag in the shared position is id+1 in 16 bits: Ps 65536 apart
// share it, and the P whose tag is 0 is taken for a new picker.
func (s *Sequence) nextOn(id int) int {
	if id < 0 {
		id = procpin.Pin()
		procpin.Unpin()
	}
	var i uint64
	if p := s.perP.Load(); p != nil {
		if uint(id) >= uint(len(p.slot)) {
			p = s.grow(p, id)
		}
		// Positions are kept reduced by n, so that a pick divides nothing.
		pos := &p.slot[id].v
		for {
			i = pos.Load()
			j := i + 1
			if j == s.n {
				j = 0
			}
			if pos.CompareAndSwap(i, j) {
				break
			}
		}
	} else {
		v := s.next.Load()
		w, tag := v, uint64(id+1)&tagMask
		if v&tagMask != tag {
			if v&runMask < spreadWindow<<runShift {
				return s.spread(id)
			}
			w &^= runMask
		} else if v&runMask != runMask {
			w += 1 << runShift
		}
		i = v >> 32
		j := i + 1
		if j == s.n {
			j = 0
		}
		if !s.next.CompareAndSwap(v, j<<32|w&runMask|tag) {
			return s.spread(id)
		}
	}
	if s.order == nil {
		return int(i)
	}
	return int(s.order[i])
}

// spread gives each P its own position once pickers took turns on the shared one, then picks
// for P id.
func (s *Sequence) spread(id int) int {
	s.grow(nil, id)
	return s.nextOn(id)
}

// grow replaces the per-P table old (nil: none yet) with one that has a position for P id and
// for every P of GOMAXPROCS now, keeping old's positions, and returns the table installed
// (this one or a concurrent picker's). The new positions start evenly spread over the period,
// slot k of n at k/n of it, as a table made at that size from the start would have them.
func (s *Sequence) grow(old *positions, id int) *positions {
	for {
		var kept []*position
		if old != nil {
			kept = old.slot
		}
		n := max(procpin.Slots(), id+1, len(kept))
		p := &positions{slot: make([]*position, n, slotsCap(n))}
		copy(p.slot, kept)
		for k := len(kept); k < n; k++ {
			p.slot[k] = new(position)
			p.slot[k].v.Store((s.start + s.n*uint64(k)/uint64(n)) % s.n)
		}
		if s.perP.CompareAndSwap(old, p) {
			return p
		}
		if old = s.perP.Load(); id < len(old.slot) {
			return old
		}
	}
}

// slotsCap rounds n slot pointers up to whole 64-byte lines.
func slotsCap(n int) int { return (n + 7) &^ 7 }

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
// only shorter) and scales them down when the period would exceed maxSequenceLen (scaled).
func reduceWeights(weights []uint32) (out []uint32, scaled bool) {
	var g uint32
	var total uint64
	for _, w := range weights {
		g = gcd(g, w)
		total += uint64(w)
	}
	if g == 0 {
		return nil, false
	}
	out = make([]uint32, len(weights))
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
		scaled = true
	}
	return out, scaled
}

func gcd(a, b uint32) uint32 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// edfEntry is one queued entry of the EDF simulation (Envoy's EdfEntry).
type edfEntry struct {
	deadline float64 // scheduler time of the next pick
	queued   uint64  // queueing order, the tie-break for equal deadlines (Envoy's order_offset)
	inverse  float64 // 1/weight
	idx      uint32
}

type edfHeap []edfEntry

func (h edfHeap) Len() int           { return len(h) }
func (h edfHeap) Less(i, j int) bool { return h.before(i, j) }
func (h edfHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *edfHeap) Push(x any)        { *h = append(*h, x.(edfEntry)) }
func (h *edfHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
