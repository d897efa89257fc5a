// Package sockopt applies Envoy's socket options (config.core.v3.SocketOption) to Legate's
// sockets: listening sockets (a listener's socket_options and tcp_keepalive) and upstream
// connections (a cluster's upstream_bind_config.socket_options). Options are set with
// setsockopt on Linux; elsewhere a socket with options is refused, since the numbers are
// Linux's.
package sockopt

import (
	"errors"
	"fmt"
	"syscall"
)

// State is SocketOption.SocketState: when an option is set.
type State uint8

// The states of a socket at which options are set.
const (
	// Prebind options are set on the new socket before bind (STATE_PREBIND).
	Prebind State = iota
	// Bound options are set once the socket is bound (STATE_BOUND).
	Bound
	// Listening options are set once a listening socket listens (STATE_LISTENING); an
	// upstream connection never listens, so they are not set on it.
	Listening
)

// Option is one SocketOption.
type Option struct {
	// Path names the option in the configuration ("socket_options[1]") for errors.
	Path string
	// Description is description, repeated in errors.
	Description string
	// Level and Name are the setsockopt level and option name.
	Level, Name int
	// Int is int_value; Buf is buf_value, set (even empty) when IsBuf.
	Int   int
	Buf   []byte
	IsBuf bool
	State State
	// IPVersion is ip_version: 0 for every socket, 4 or 6 for sockets of that family only.
	IPVersion int
	// Datagram is type.datagram: the option is for UDP sockets only, so never set on Legate's
	// TCP sockets. An option whose type is unset or stream applies to them.
	Datagram bool
}

// String names the option in errors.
func (o Option) String() string {
	s := fmt.Sprintf("%s (level %d, name %d", o.Path, o.Level, o.Name)
	if o.Description != "" {
		s += ", " + o.Description
	}
	return s + ")"
}

// appliesTo reports whether o is set on a stream socket of family (4 or 6) at state.
func (o Option) appliesTo(state State, family int) bool {
	return o.State == state && !o.Datagram && (o.IPVersion == 0 || o.IPVersion == family)
}

// Apply sets the options of opts meant for state on the stream socket c of family (4 or 6).
// The first option the kernel refuses ends it with an error naming the option.
func Apply(c syscall.RawConn, opts []Option, state State, family int) error {
	var err error
	if cerr := c.Control(func(fd uintptr) { err = applyFD(fd, opts, state, family) }); cerr != nil {
		return cerr
	}
	return err
}

func applyFD(fd uintptr, opts []Option, state State, family int) error {
	for _, o := range opts {
		if !o.appliesTo(state, family) {
			continue
		}
		if err := set(fd, o); err != nil {
			return fmt.Errorf("%s: setsockopt: %w", o, err)
		}
	}
	return nil
}

// Control returns a net.Dialer or net.ListenConfig Control function that sets the options of
// opts for the states a socket passes before it connects or listens: Prebind, then Bound (Go
// binds and connects, or binds and listens, in one step, so a Bound option is set just before
// it). nil when opts is empty.
func Control(opts []Option) func(network, address string, c syscall.RawConn) error {
	if len(opts) == 0 {
		return nil
	}
	return func(network, _ string, c syscall.RawConn) error {
		family := 4
		if network == "tcp6" || network == "udp6" {
			family = 6
		}
		if err := Apply(c, opts, Prebind, family); err != nil {
			return err
		}
		return Apply(c, opts, Bound, family)
	}
}

// errUnsupported is returned where setsockopt's numbers mean nothing (not Linux).
var errUnsupported = errors.New("socket options are not implemented by Legate on this system")
