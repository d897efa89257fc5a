// Package random implements Envoy's RANDOM policy: one random number chooses the priority (and
// locality state) and then the host, uniformly; like Envoy it ignores host weights.
//
// Concurrency: a Balancer is an immutable snapshot; Pick is lock-free and allocation-free.
package random
