// Package lb defines the load balancer contract (Balancer, Context, ErrNoHealthyHost), the
// registry keyed by Envoy's LbPolicy names, and the logic every policy shares: priority load
// with overprovisioning and spill-over, healthy panic threshold, degraded hosts,
// locality-weighted picking, zone-aware routing and precomputed EDF schedules.
//
// A Context carries a request's retry state into Pick: the hosts already attempted (the
// previous_hosts predicate) and the priority levels a retry priority leaves out
// (ExcludePreviousPriorities, Envoy's previous_priorities), which Base.ChoosePriority spreads
// the load without, on the stack.
//
// Policies live in subpackages (roundrobin, leastrequest, random, ringhash, maglev, originaldst)
// and subset wraps any of them.
//
// Concurrency: a Balancer is an immutable snapshot of one host.PrioritySet, built on the control
// side whenever hosts or health change and published by the cluster manager. Pick may be called
// from any number of goroutines; it takes no lock and allocates nothing. The only mutable state
// a pick writes is atomic and kept per P, so that no cache line is written by every pick: a
// schedule's position (Sequence: one shared position only while one P picks) and the lb_*
// counters (stats.HotCounter). Least request reads the P's own line of its candidates' in-flight
// counts, which the pools write.
package lb
