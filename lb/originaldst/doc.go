// Package originaldst implements the ORIGINAL_DST_LB (CLUSTER_PROVIDED) policy of ORIGINAL_DST
// clusters: the host is the one whose address equals the request's original destination
// (Context.OverrideHost). The cluster creates hosts on demand; when the address is not in the
// snapshot, Pick reports ErrUnknownDestination so the cluster can add it.
//
// Concurrency: a Balancer is an immutable snapshot; Pick is one map lookup, lock-free and
// allocation-free.
package originaldst
