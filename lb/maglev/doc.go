// Package maglev implements Envoy's MAGLEV policy (Maglev consistent hashing, section 3.4 of
// the Maglev paper) with Envoy's table construction, so the same hosts produce the same table:
// hosts are sorted by hash key (envoy.lb hash_key metadata, hostname with
// use_hostname_for_hashing, else the address); a host's permutation starts at
// xxHash64(key, seed 0) mod M and steps by xxHash64(key, seed 1) mod (M−1) + 1; rounds fill the
// table, a host taking a slot in a round only when round×weight reaches its running target
// (which grows by the largest weight each time it takes one). A pick is table[hash mod M]; retry
// attempt n first xors the hash with 2^64−n.
//
// Concurrency: a Balancer is an immutable snapshot; Pick is one lock-free, allocation-free
// table lookup.
package maglev
