//go:build !linux

package originaldst

import (
	"net"
	"net/netip"
)

// originalDestination: only Linux's netfilter records the destination before a redirect, so
// elsewhere no connection has one and its local address stays as accepted.
func originalDestination(net.Conn) (netip.AddrPort, bool) { return netip.AddrPort{}, false }
