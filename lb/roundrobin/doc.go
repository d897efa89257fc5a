// Package roundrobin implements Envoy's ROUND_ROBIN policy: weighted round robin with EDF
// semantics, plain rotation from a random start when all weights are equal.
//
// Concurrency: a Balancer is an immutable snapshot; Pick is lock-free (a position per host list,
// one per P once Ps take turns, walks a precomputed schedule: lb.Sequence) and allocation-free.
package roundrobin
