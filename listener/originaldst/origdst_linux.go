package originaldst

import (
	"encoding/binary"
	"net"
	"net/netip"
	"syscall"
)

// soOriginalDst is SO_ORIGINAL_DST (and IP6T_SO_ORIGINAL_DST, the same number): netfilter's
// socket option that returns a connection's destination before NAT rewrote it.
const soOriginalDst = 80

// originalDestination returns the destination nc had before an iptables REDIRECT or DNAT, as
// Envoy's original_dst listener filter reads it; false when nc is not a TCP socket or netfilter
// has no record of it (no conntrack entry).
func originalDestination(nc net.Conn) (netip.AddrPort, bool) {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return netip.AddrPort{}, false
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, false
	}
	local, _ := tc.LocalAddr().(*net.TCPAddr)
	var out netip.AddrPort
	var found bool
	raw.Control(func(fd uintptr) {
		if local != nil && local.IP.To4() != nil {
			out, found = originalDestination4(int(fd))
		}
		if !found {
			out, found = originalDestination6(int(fd))
		}
	})
	return out, found
}

// originalDestination4 reads a sockaddr_in (16 bytes) through the 20-byte IPv6Mreq getter:
// family (2 bytes, host order), port (2, network order), address (4).
func originalDestination4(fd int) (netip.AddrPort, bool) {
	m, err := syscall.GetsockoptIPv6Mreq(fd, syscall.SOL_IP, soOriginalDst)
	if err != nil || binary.NativeEndian.Uint16(m.Multiaddr[0:2]) != syscall.AF_INET {
		return netip.AddrPort{}, false
	}
	addr := netip.AddrFrom4([4]byte(m.Multiaddr[4:8]))
	return netip.AddrPortFrom(addr, binary.BigEndian.Uint16(m.Multiaddr[2:4])), true
}

// originalDestination6 reads a sockaddr_in6 through the IPv6MTUInfo getter, whose first field
// is one.
func originalDestination6(fd int) (netip.AddrPort, bool) {
	info, err := syscall.GetsockoptIPv6MTUInfo(fd, syscall.SOL_IPV6, soOriginalDst)
	if err != nil || info.Addr.Family != syscall.AF_INET6 {
		return netip.AddrPort{}, false
	}
	// Port holds the two bytes of the network-order port as the kernel wrote them.
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], info.Addr.Port)
	port := binary.BigEndian.Uint16(b[:])
	return netip.AddrPortFrom(netip.AddrFrom16(info.Addr.Addr).Unmap(), port), true
}
