// Package leastrequest implements Envoy's LEAST_REQUEST policy.
//
// With equal host weights it is Envoy's power-of-choices pick: choice_count hosts are sampled
// uniformly (with replacement) and the one with the fewest active requests wins, ties keeping
// the first sampled.
//
// With unequal weights Envoy runs a mutable EDF scheduler over the effective weight
// weight / (active+1)^active_request_bias, which needs a lock. This package keeps picks
// lock-free instead: choice_count candidates are sampled in proportion to their static weight
// (Walker's alias table, O(1) each) and one of them is kept with probability proportional to
// 1/(active+1)^bias. With no requests in flight, equal loads, or bias 0, the split is exactly the
// static weights, as in Envoy; under load, traffic shifts away from busy hosts the more the
// higher the bias, but the long-run shares are not exactly Envoy's weight/(active+1)^bias.
//
// Concurrency: a Balancer is an immutable snapshot; Pick is lock-free and allocation-free and
// reads hosts' atomic active request counts.
package leastrequest
