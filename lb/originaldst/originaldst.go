package originaldst

import (
	"errors"
	"fmt"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/lb"
)

// ErrNoDestination: the context carries no original destination address.
var ErrNoDestination = fmt.Errorf("%w: no original destination address", lb.ErrNoHealthyHost)

// ErrUnknownDestination: the original destination is not (yet) a host of the cluster.
var ErrUnknownDestination = fmt.Errorf("%w: original destination not in the host set", lb.ErrNoHealthyHost)

// Balancer is an ORIGINAL_DST_LB snapshot. Safe for concurrent use.
type Balancer struct {
	byAddress map[string]*host.Host
}

// New indexes the hosts of every priority by address. Health is ignored, as in Envoy: the
// destination was chosen by the client.
func New(p lb.Params, cfg *lb.Config) (*Balancer, error) {
	if p.PrioritySet == nil {
		return nil, errors.New("load balancer: nil priority set")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &Balancer{byAddress: map[string]*host.Host{}}
	for _, s := range p.PrioritySet.Sets() {
		for _, h := range s.Hosts() {
			b.byAddress[h.Address()] = h
		}
	}
	return b, nil
}

// Factory adapts New to lb.Factory.
func Factory(p lb.Params, cfg *lb.Config) (lb.Balancer, error) { return New(p, cfg) }

// Pick returns the host of ctx.OverrideHost.
func (b *Balancer) Pick(ctx *lb.Context) (*host.Host, error) {
	if ctx == nil || ctx.OverrideHost == "" {
		return nil, ErrNoDestination
	}
	if h, ok := b.byAddress[ctx.OverrideHost]; ok {
		return h, nil
	}
	return nil, ErrUnknownDestination
}
