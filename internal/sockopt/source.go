package sockopt

import (
	"context"
	"net"
	"net/netip"
	"syscall"
)

// Source is where an upstream connection made for one downstream connection binds: the
// original_src listener filter asks for the downstream's own source address, so that the
// upstream host sees the client rather than Legate.
type Source struct {
	// Addr is the address to bind; its port is 0 unless bind_port asked for the client's.
	Addr netip.AddrPort
	// Mark is the SO_MARK of the upstream socket (0: none), which the operator's policy
	// routing uses to deliver the replies, addressed to the client, back to Legate.
	Mark uint32
}

type sourceKey struct{}

// WithSource returns ctx carrying s for the upstream connection dialled with it; a nil s
// returns ctx.
func WithSource(ctx context.Context, s *Source) context.Context {
	if s == nil {
		return ctx
	}
	return context.WithValue(ctx, sourceKey{}, s)
}

// SourceFrom returns the Source of ctx, nil when it has none.
func SourceFrom(ctx context.Context) *Source {
	s, _ := ctx.Value(sourceKey{}).(*Source)
	return s
}

// Dialer returns a copy of d that binds to s: IP_TRANSPARENT (the address is not Legate's),
// SO_MARK when s has a mark, then d's own Control.
func (s *Source) Dialer(d *net.Dialer) *net.Dialer {
	out := *d
	out.LocalAddr = net.TCPAddrFromAddrPort(s.Addr)
	ctl := d.Control
	out.Control = func(network, address string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) { err = s.set(fd) }); cerr != nil {
			return cerr
		}
		if err != nil || ctl == nil {
			return err
		}
		return ctl(network, address, c)
	}
	return &out
}
