package sockopt

import (
	"fmt"
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
