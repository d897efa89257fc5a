package random

import (
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/lb"
)

// Balancer is a RANDOM snapshot. Safe for concurrent use.
type Balancer struct {
	base *lb.Base
}

// New builds the balancer.
func New(p lb.Params, cfg *lb.Config) (*Balancer, error) {
	base, err := lb.NewBase(p, cfg)
	if err != nil {
		return nil, err
	}
	return &Balancer{base: base}, nil
}

// Factory adapts New to lb.Factory.
func Factory(p lb.Params, cfg *lb.Config) (lb.Balancer, error) { return New(p, cfg) }

// Pick returns a uniformly random host of the chosen host list.
func (b *Balancer) Pick(ctx *lb.Context) (*host.Host, error) {
	if ctx.MaxPicks() == 1 {
		return lb.Picked(b.pickOnce(ctx))
	}
	return lb.PickWithRetries(ctx, func(uint32) *host.Host { return b.pickOnce(ctx) })
}

func (b *Balancer) pickOnce(ctx *lb.Context) *host.Host {
	r := b.base.Rand()()
	src, ok := b.base.ChooseSource(ctx, r)
	if !ok {
		return nil
	}
	hosts := b.base.Hosts(src)
	if len(hosts) == 0 {
		return nil
	}
	return hosts[r%uint64(len(hosts))]
}
