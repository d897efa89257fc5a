// Package roundrobin implements Envoy's ROUND_ROBIN policy: weighted round robin with EDF
// semantics, plain rotation from a random start when all weights are equal.
//
// Concurrency: a Balancer is an immutable snapshot; Pick is lock-free (one atomic counter per
// host list walks a precomputed schedule) and allocation-free.
package roundrobin
