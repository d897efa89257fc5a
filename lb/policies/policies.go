package policies

import (
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/lb/leastrequest"
	"github.com/legateproxy/legate/lb/maglev"
	"github.com/legateproxy/legate/lb/originaldst"
	"github.com/legateproxy/legate/lb/random"
	"github.com/legateproxy/legate/lb/ringhash"
	"github.com/legateproxy/legate/lb/roundrobin"
)

// Registry returns a registry with ROUND_ROBIN, LEAST_REQUEST, RING_HASH, RANDOM, MAGLEV,
// ORIGINAL_DST_LB and CLUSTER_PROVIDED (the v3 spelling for ORIGINAL_DST clusters).
func Registry() *lb.Registry {
	r := lb.NewRegistry()
	for name, f := range map[string]lb.Factory{
		lb.RoundRobin:      roundrobin.Factory,
		lb.LeastRequest:    leastrequest.Factory,
		lb.RingHash:        ringhash.Factory,
		lb.Random:          random.Factory,
		lb.Maglev:          maglev.Factory,
		lb.OriginalDst:     originaldst.Factory,
		lb.ClusterProvided: originaldst.Factory,
	} {
		// Names are distinct constants, so Register cannot fail here.
		_ = r.Register(name, f)
	}
	return r
}
