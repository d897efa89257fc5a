package leastrequest

import (
	"math"
	"math/bits"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/procpin"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/lb/roundrobin"
)

// Balancer is a LEAST_REQUEST snapshot. Safe for concurrent use.
type Balancer struct {
	base        *lb.Base
	alias       *lb.SourceTable[*aliasTable]
	lines       *lb.SourceTable[[]host.ActiveLines] // each host list's in-flight lines, in its order
	choiceCount uint32
	bias        float64
}

// New builds the balancer; cfg.LeastRequest supplies choice_count (default 2) and
// active_request_bias (default 1.0).
func New(p lb.Params, cfg *lb.Config) (*Balancer, error) {
	base, err := lb.NewBase(p, cfg)
	if err != nil {
		return nil, err
	}
	b := &Balancer{base: base, choiceCount: cfg.ChoiceCount(), bias: cfg.ActiveRequestBias()}
	b.alias = lb.NewSourceTable(base, func(hosts []*host.Host) *aliasTable {
		return newAliasTable(roundrobin.Weights(hosts))
	})
	// Host.Lines makes each host's lines (TrackActiveRequests) before any pick can return it.
	b.lines = lb.NewSourceTable(base, func(hosts []*host.Host) []host.ActiveLines {
		ls := make([]host.ActiveLines, len(hosts))
		for i, h := range hosts {
			ls[i] = h.Lines()
		}
		return ls
	})
	return b, nil
}

// Factory adapts New to lb.Factory.
func Factory(p lb.Params, cfg *lb.Config) (lb.Balancer, error) { return New(p, cfg) }

// Pick returns the least loaded of choice_count sampled hosts.
func (b *Balancer) Pick(ctx *lb.Context) (*host.Host, error) {
	if ctx.MaxPicks() == 1 {
		return lb.Picked(b.pickOnce(ctx))
	}
	return lb.PickWithRetries(ctx, func(uint32) *host.Host { return b.pickOnce(ctx) })
}

func (b *Balancer) pickOnce(ctx *lb.Context) *host.Host {
	rnd := b.base.Rand()
	src, ok := b.base.ChooseRandomSource(ctx)
	if !ok {
		return nil
	}
	hosts := b.base.Hosts(src)
	if len(hosts) == 0 {
		return nil
	}
	// The P's own requests in flight weigh the hosts: reading other Ps' lines would pull every
	// line a request writes into this core's cache (see doc.go). If the goroutine moves to
	// another P after Unpin, it reads p's lines, which is only as stale as any load.
	p := procpin.Pin()
	procpin.Unpin()
	lines := *b.lines.Get(src)
	if t := *b.alias.Get(src); t != nil {
		return hosts[b.pickWeighted(lines, t, rnd, p)]
	}
	n := uint64(len(hosts))
	best := rnd() % n
	for i := uint32(1); i < b.choiceCount; i++ {
		c := rnd() % n
		if lines[c].On(p) < lines[best].On(p) {
			best = c
		}
	}
	return hosts[best]
}

// pickWeighted samples candidates by static weight and keeps one with probability proportional
// to 1/(active+1)^bias (weighted reservoir sampling: one random number per candidate). It
// returns the kept candidate's index.
func (b *Balancer) pickWeighted(lines []host.ActiveLines, t *aliasTable, rnd func() uint64, p int) int {
	best := t.sample(rnd())
	if b.bias == 0 {
		return best
	}
	if b.choiceCount == 2 && b.bias == 1 {
		// The default settings, in integers: keep the second candidate c with probability
		// (1/(ac+1)) / (1/(ab+1) + 1/(ac+1)) = (ab+1) / (ab+ac+2), an exact 128-bit comparison
		// of a uniform 64-bit draw in place of two divisions.
		c := t.sample(rnd())
		ab, ac := uint64(max(lines[best].On(p), 0))+1, uint64(max(lines[c].On(p), 0))+1
		if hi, _ := bits.Mul64(rnd(), ab+ac); hi < ab {
			best = c
		}
		return best
	}
	total := b.loadFactor(lines[best], p)
	for i := uint32(1); i < b.choiceCount; i++ {
		c := t.sample(rnd())
		f := b.loadFactor(lines[c], p)
		total += f
		if float64(rnd()>>11)*(1.0/(1<<53))*total < f {
			best = c
		}
	}
	return best
}

// loadFactor is 1/(active+1)^bias, active being P p's requests in flight to the host of l.
func (b *Balancer) loadFactor(l host.ActiveLines, p int) float64 {
	a := float64(max(l.On(p), 0)) + 1
	if b.bias == 1 {
		return 1 / a
	}
	return 1 / math.Pow(a, b.bias)
}

// aliasTable samples an index in proportion to integer weights in O(1) (Vose's alias method).
type aliasTable struct {
	prob  []uint64 // threshold scaled to 2^32
	alias []uint32
}

// newAliasTable returns nil when all weights are equal (the unweighted path applies).
func newAliasTable(ws []uint32) *aliasTable {
	if len(ws) <= 1 {
		return nil
	}
	equal := true
	var total uint64
	for _, w := range ws {
		equal = equal && w == ws[0]
		total += uint64(w)
	}
	if equal {
		return nil
	}
	n := len(ws)
	t := &aliasTable{prob: make([]uint64, n), alias: make([]uint32, n)}
	scaled := make([]uint64, n) // weight * n, compared with total
	var small, large []int
	for i, w := range ws {
		scaled[i] = uint64(w) * uint64(n)
		if scaled[i] < total {
			small = append(small, i)
		} else {
			large = append(large, i)
		}
	}
	for len(small) > 0 && len(large) > 0 {
		s, l := small[len(small)-1], large[len(large)-1]
		small = small[:len(small)-1]
		t.prob[s] = scaled[s] << 32 / total
		t.alias[s] = uint32(l)
		scaled[l] -= total - scaled[s]
		if scaled[l] < total {
			large = large[:len(large)-1]
			small = append(small, l)
		}
	}
	for _, i := range large {
		t.prob[i] = 1 << 32
	}
	for _, i := range small {
		t.prob[i] = 1 << 32
	}
	return t
}

// sample maps one random number to an index: the high bits choose a column, the low 32 bits
// decide between the column and its alias.
func (t *aliasTable) sample(r uint64) int {
	col := (r >> 32) % uint64(len(t.prob))
	if r&0xffffffff < t.prob[col] {
		return int(col)
	}
	return int(t.alias[col])
}
