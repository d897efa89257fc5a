// Package policies assembles the registry of every load balancing policy Legate implements,
// keyed by Envoy's Cluster.LbPolicy names. The registry it returns is new on every call and
// read-only once returned; it is safe for concurrent lookups.
package policies
