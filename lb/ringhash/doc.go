// Package ringhash implements Envoy's RING_HASH policy (ketama consistent hashing).
//
// The ring is built exactly as Envoy builds it, so the same hosts land on the same ring
// positions: hosts are normalized to weights summing to 1, the scale
// min(ceil(minWeight×minimum_ring_size)/minWeight, maximum_ring_size) gives each host
// scale×weight entries (running sums keep fractional shares stable), entry i of a host hashes
// "<key>_<i>" where key is the envoy.lb hash_key metadata, the hostname
// (use_hostname_for_hashing) or the address, with xxHash64 (seed 0) or libstdc++'s MurmurHash2.
// A pick is the first entry whose hash is >= the request hash, wrapping to the first entry;
// retry attempt n moves n entries further.
//
// Concurrency: a Balancer is an immutable snapshot; Pick is a lock-free, allocation-free binary
// search.
package ringhash
