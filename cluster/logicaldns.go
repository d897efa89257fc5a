package cluster

import "net/netip"

// LOGICAL_DNS clusters share the resolution loop of STRICT_DNS (runDNS) with two differences:
// the single endpoint yields one logical host, built from the first address of each answer,
// and when the address changes the new host inherits the per-host statistics of the old one
// (matched by hostname) so that /clusters keeps counting. Existing connections to the previous
// address are not closed: the connection pools keep them until they end, as Envoy keeps the
// connections of a logical host.

// logicalAddrs keeps the first address of a resolution.
func logicalAddrs(addrs []netip.Addr) []netip.Addr {
	if len(addrs) > 1 {
		return addrs[:1]
	}
	return addrs
}
