package roundrobin

import (
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/lb"
)

// Balancer is a ROUND_ROBIN snapshot. Safe for concurrent use.
type Balancer struct {
	base  *lb.Base
	sched *lb.SourceTable[*lb.Sequence]
}

// New builds the balancer: one schedule per host list (all, healthy, degraded, per locality) of
// every priority, from the hosts' weights at build time.
func New(p lb.Params, cfg *lb.Config) (*Balancer, error) {
	base, err := lb.NewBase(p, cfg)
	if err != nil {
		return nil, err
	}
	rnd := base.Rand()
	// Envoy seeds every host list's index with the same random value.
	seed := rnd()
	sched := lb.NewSourceTable(base, func(hosts []*host.Host) *lb.Sequence {
		if len(hosts) == 0 {
			return nil
		}
		return lb.NewSequence(Weights(hosts), seed)
	})
	return &Balancer{base: base, sched: sched}, nil
}

// Factory adapts New to lb.Factory.
func Factory(p lb.Params, cfg *lb.Config) (lb.Balancer, error) { return New(p, cfg) }

// Weights returns the hosts' current weights.
func Weights(hosts []*host.Host) []uint32 {
	ws := make([]uint32, len(hosts))
	for i, h := range hosts {
		ws[i] = h.Weight()
	}
	return ws
}

// Pick returns the next host of the schedule chosen by priority, panic and locality state.
func (b *Balancer) Pick(ctx *lb.Context) (*host.Host, error) {
	if ctx.MaxPicks() == 1 {
		return lb.Picked(b.pickOnce(ctx))
	}
	return lb.PickWithRetries(ctx, func(uint32) *host.Host { return b.pickOnce(ctx) })
}

func (b *Balancer) pickOnce(ctx *lb.Context) *host.Host {
	var hosts []*host.Host
	var seq *lb.Sequence
	if b.base.Plain(ctx) {
		// What ChooseRandomSource would choose, without its call.
		hosts, seq = b.base.PlainHosts(), *b.sched.Plain()
	} else {
		src, ok := b.base.ChooseRandomSource(ctx)
		if !ok {
			return nil
		}
		hosts, seq = b.base.Hosts(src), *b.sched.Get(src)
	}
	if len(hosts) == 0 || seq == nil {
		return nil
	}
	return hosts[seq.Next()]
}
