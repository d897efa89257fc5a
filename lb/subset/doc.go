// Package subset implements Envoy's subset load balancing (Cluster.LbSubsetConfig) as a wrapper
// around any policy: for every selector, hosts having all of its keys in their envoy.lb
// metadata are grouped by their values, each group getting its own balancer of the cluster's
// policy built over the group's hosts (same priorities and health). A request whose metadata
// match criteria equal a group's keys and values picks from that group; otherwise the fallback
// policy applies: NO_FALLBACK fails, ANY_ENDPOINT uses the whole cluster, DEFAULT_SUBSET uses the
// hosts matching default_subset (none matching behaves like NO_FALLBACK), and panic_mode_any
// falls back to the whole cluster whenever the subset or the fallback yields no host (an empty
// default subset included).
//
// Concurrency: a Balancer is an immutable snapshot; Pick hashes the criteria without
// allocating, finds the group in a prebuilt map, delegates to the group's balancer and counts
// lb_subsets_selected or _fallback on the P's own line (stats.HotCounter).
package subset
