//go:build !linux

package listener

import "net"

// takeQueued takes nothing off the queue where the non-blocking accept is not wired: closing
// the socket may reset what the kernel queued.
func takeQueued(net.Listener) []net.Conn { return nil }
