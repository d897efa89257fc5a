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
// Active requests are counted per P (host.Host.ActiveRequestsOn): a pick weighs each candidate
// by the requests in flight that the P it runs on started, where Envoy reads the host's
// rq_active, one count all workers write. A count every core writes per request is the cache
// line issue 22 removes, and summing every P's line for each candidate would read as many
// lines as there are Ps. Each P's requests are a uniform share of the host's (picks on every P
// sample the same hosts with the same odds), so a host that is slow or busy accumulates
// requests in flight on every P and every P steers away from it, and each P keeping its own
// share balanced keeps the sum balanced. With one P this is exactly Envoy's pick; with many
// Ps and few requests in flight per P, counts tie more often than the global ones would and
// such ties keep the first sampled host, so light load spreads closer to uniform than Envoy's
// (TestPerPAvoidsSlowHost shows a slow host avoided on four Ps).
//
// Concurrency: a Balancer is an immutable snapshot; Pick is lock-free and allocation-free and
// reads only the calling P's lines of the hosts' active request counts.
package leastrequest
