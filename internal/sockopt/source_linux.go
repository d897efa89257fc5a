package sockopt

import (
	"fmt"
	"net/netip"
	"syscall"
)

// set sets the options that let the socket bind to a foreign address and carry the mark.
func (s *Source) set(fd uintptr) error {
	level, name, desc := syscall.SOL_IP, syscall.IP_TRANSPARENT, "IP_TRANSPARENT"
	if !s.Addr.Addr().Is4() {
		level, name, desc = syscall.SOL_IPV6, ipv6Transparent, "IPV6_TRANSPARENT"
	}
	if err := syscall.SetsockoptInt(int(fd), level, name, 1); err != nil {
		return fmt.Errorf("original_src: setsockopt %s: %w", desc, err)
	}
	if s.Mark != 0 {
		if err := syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_MARK, int(s.Mark)); err != nil {
			return fmt.Errorf("original_src: setsockopt SO_MARK: %w", err)
		}
	}
	return nil
}

// ipv6Transparent is IPV6_TRANSPARENT, which package syscall does not name.
const ipv6Transparent = 75

// CheckSource sets what an original source's dialer sets on a throwaway socket, so that a
// process without CAP_NET_ADMIN (or CAP_NET_RAW) is refused when the configuration loads rather than failing
// every upstream connection.
func CheckSource(mark uint32) error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	s := Source{Addr: netip.AddrPortFrom(netip.IPv4Unspecified(), 0), Mark: mark}
	return s.set(uintptr(fd))
}
