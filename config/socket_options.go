package config

import (
	"fmt"
	"math"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/internal/sockopt"
)

// socketOptions converts socket_options at path. Whether the kernel takes each option is
// known only when the socket is made: the listener manager and the pools fail then, naming
// the option's path.
func socketOptions(path string, opts []*corev3.SocketOption) ([]sockopt.Option, error) {
	var out []sockopt.Option
	for i, o := range opts {
		at := fmt.Sprintf("%s[%d]", path, i)
		so := sockopt.Option{Path: at, Description: o.GetDescription(), State: sockopt.State(o.GetState())}
		if o.GetLevel() < math.MinInt32 || o.GetLevel() > math.MaxInt32 {
			return nil, fmt.Errorf("%s.level = %d; must fit a C int", at, o.GetLevel())
		}
		if o.GetName() < math.MinInt32 || o.GetName() > math.MaxInt32 {
			return nil, fmt.Errorf("%s.name = %d; must fit a C int", at, o.GetName())
		}
		so.Level, so.Name = int(o.GetLevel()), int(o.GetName())
		switch v := o.GetValue().(type) {
		case *corev3.SocketOption_IntValue:
			if v.IntValue < math.MinInt32 || v.IntValue > math.MaxInt32 {
				return nil, fmt.Errorf("%s.int_value = %d; must fit a C int", at, v.IntValue)
			}
			so.Int = int(v.IntValue)
		case *corev3.SocketOption_BufValue:
			so.Buf, so.IsBuf = v.BufValue, true
		default:
			return nil, fmt.Errorf("%s: neither int_value nor buf_value is set", at)
		}
		switch o.GetIpVersion() {
		case corev3.SocketOption_SOCKET_IP_VERSION_IPV4:
			so.IPVersion = 4
		case corev3.SocketOption_SOCKET_IP_VERSION_IPV6:
			so.IPVersion = 6
		}
		so.Datagram = o.GetType().GetDatagram() != nil
		out = append(out, so)
	}
	return out, nil
}

// keepaliveOptions are the socket options of a tcp_keepalive at path, as Envoy sets them
// before bind: SO_KEEPALIVE, and each of the probe count, idle time and interval that is
// not zero (zero leaves the system's default).
func keepaliveOptions(path string, ka *corev3.TcpKeepalive) []sockopt.Option {
	return sockopt.Keepalive(path, ka.GetKeepaliveProbes().GetValue(), ka.GetKeepaliveTime().GetValue(), ka.GetKeepaliveInterval().GetValue())
}

// keepaliveDisabled reports whether an additional address's tcp_keepalive sets one of its
// fields to zero, which turns the listener's keep-alive off for that address.
func keepaliveDisabled(ka *corev3.TcpKeepalive) bool {
	for _, v := range []*wrapperspb.UInt32Value{ka.GetKeepaliveProbes(), ka.GetKeepaliveTime(), ka.GetKeepaliveInterval()} {
		if v != nil && v.GetValue() == 0 {
			return true
		}
	}
	return false
}
