// Package proxyproto writes HAProxy PROXY protocol headers for Envoy's upstream
// envoy.transport_sockets.proxy_protocol socket and holds what the downstream listener
// filter (listener/proxyprotocol) hands it: the TLVs of a v2 header and their selections. It
// sits low so that package config can check the socket at load and the pools can write it.
package proxyproto

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	upppv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/proxy_protocol/v3"
)

// TLV is one PROXY protocol v2 extension.
type TLV struct {
	Type  byte
	Value []byte
}

// V2Signature starts every v2 header.
var V2Signature = []byte("\r\n\r\n\x00\r\nQUIT\n")

// UpstreamName is the Envoy name of the upstream transport socket that sends a PROXY
// protocol header before the connection's bytes; UpstreamTypeURL its typed_config type.
const (
	UpstreamName    = "envoy.transport_sockets.proxy_protocol"
	UpstreamTypeURL = "type.googleapis.com/envoy.extensions.transport_sockets.proxy_protocol.v3.ProxyProtocolUpstreamTransport"
)

// TLVSet is a pass_through_tlvs selection (config.core.v3.ProxyProtocolPassThroughTLVs):
// no TLV when unset, every TLV with INCLUDE_ALL, the listed types with INCLUDE.
type TLVSet struct {
	all   bool
	types *[256]bool // nil: none listed
}

// NewTLVSet builds the selection of pb (nil selects nothing); path names the field.
func NewTLVSet(path string, pb *corev3.ProxyProtocolPassThroughTLVs) (TLVSet, error) {
	if pb == nil {
		return TLVSet{}, nil
	}
	switch pb.GetMatchType() {
	case corev3.ProxyProtocolPassThroughTLVs_INCLUDE_ALL:
		return TLVSet{all: true}, nil
	case corev3.ProxyProtocolPassThroughTLVs_INCLUDE:
	default:
		return TLVSet{}, fmt.Errorf("%s.match_type: unknown value %d", path, pb.GetMatchType())
	}
	s := TLVSet{types: new([256]bool)}
	for i, t := range pb.GetTlvType() {
		if t > 255 {
			return TLVSet{}, fmt.Errorf("%s.tlv_type[%d]: %d; TLV types are one byte (0-255)", path, i, t)
		}
		s.types[t] = true
	}
	return s, nil
}

// Has reports whether the set selects TLVs of type t.
func (s TLVSet) Has(t byte) bool { return s.all || (s.types != nil && s.types[t]) }

// Select returns copies of the TLVs of tlvs the set selects, in order; nil for none.
func (s TLVSet) Select(tlvs []TLV) []TLV {
	var out []TLV
	for _, t := range tlvs {
		if s.Has(t.Type) {
			out = append(out, TLV{Type: t.Type, Value: bytes.Clone(t.Value)})
		}
	}
	return out
}

// Upstream is one configured envoy.transport_sockets.proxy_protocol: the header it writes at
// the start of each upstream connection. It is immutable.
type Upstream struct {
	version int
	pass    TLVSet
	added   []TLV
}

// UpstreamFromProto builds the socket's header settings; path names the typed_config. Fields
// Legate does not implement are refused with their path.
func UpstreamFromProto(path string, pb *upppv3.ProxyProtocolUpstreamTransport) (*Upstream, error) {
	switch {
	case pb.GetAllowUnspecifiedAddress():
		return nil, fmt.Errorf("%s.allow_unspecified_address: not implemented by Legate", path)
	case pb.GetTlvAsPoolKey():
		// Legate's HTTP pools are per host, not per downstream header.
		return nil, fmt.Errorf("%s.tlv_as_pool_key: not implemented by Legate", path)
	}
	cfg := pb.GetConfig()
	u := &Upstream{version: 1}
	if cfg.GetVersion() == corev3.ProxyProtocolConfig_V2 {
		u.version = 2
	} else if cfg.GetVersion() != corev3.ProxyProtocolConfig_V1 {
		return nil, fmt.Errorf("%s.config.version: unknown value %d", path, cfg.GetVersion())
	}
	var err error
	if u.pass, err = NewTLVSet(path+".config.pass_through_tlvs", cfg.GetPassThroughTlvs()); err != nil {
		return nil, err
	}
	for i, e := range cfg.GetAddedTlvs() {
		at := fmt.Sprintf("%s.config.added_tlvs[%d]", path, i)
		if e.GetFormatString() != nil {
			return nil, fmt.Errorf("%s.format_string: not implemented by Legate (use value)", at)
		}
		if e.GetType() > 255 {
			return nil, fmt.Errorf("%s.type: %d; TLV types are one byte (0-255)", at, e.GetType())
		}
		u.added = append(u.added, TLV{Type: byte(e.GetType()), Value: e.GetValue()})
	}
	return u, nil
}

// Downstream is what an upstream PROXY protocol header describes: the downstream
// connection's client and the address it reached, and the TLVs its own PROXY header
// carried that the listener filter's pass_through_tlvs kept.
type Downstream struct {
	Source, Destination net.Addr
	TLVs                []TLV
}

type downstreamKey struct{}

// WithDownstream returns ctx carrying d, for the upstream connection a proxy opens on a
// downstream connection's behalf (the TCP proxy's).
func WithDownstream(ctx context.Context, d *Downstream) context.Context {
	return context.WithValue(ctx, downstreamKey{}, d)
}

// DownstreamFrom returns the Downstream of ctx; nil for none.
func DownstreamFrom(ctx context.Context) *Downstream {
	d, _ := ctx.Value(downstreamKey{}).(*Downstream)
	return d
}

// Header returns the header to write on an upstream connection for d. Addresses that are
// not IP (an internal listener's) give a header without addresses: v1's UNKNOWN, v2's LOCAL
// command. The v2 TLVs are those of d that both the socket's pass_through_tlvs selects and
// its added_tlvs do not replace, then the added ones.
func (u *Upstream) Header(d *Downstream) []byte {
	src, okS := ipPort(d.Source)
	dst, okD := ipPort(d.Destination)
	known := okS && okD
	if known && src.Addr().Is4() != dst.Addr().Is4() {
		// One family per header: carry both as IPv6 (an IPv4 address mapped).
		src = netip.AddrPortFrom(netip.AddrFrom16(src.Addr().As16()), src.Port())
		dst = netip.AddrPortFrom(netip.AddrFrom16(dst.Addr().As16()), dst.Port())
	}
	if u.version == 1 {
		return v1Header(src, dst, known)
	}
	return u.v2Header(src, dst, known, d.TLVs)
}

func v1Header(src, dst netip.AddrPort, known bool) []byte {
	if !known {
		return []byte("PROXY UNKNOWN\r\n")
	}
	proto := "TCP4"
	if !src.Addr().Is4() {
		proto = "TCP6"
	}
	b := []byte("PROXY " + proto + " " + src.Addr().String() + " " + dst.Addr().String() + " ")
	b = strconv.AppendUint(b, uint64(src.Port()), 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(dst.Port()), 10)
	return append(b, '\r', '\n')
}

func (u *Upstream) v2Header(src, dst netip.AddrPort, known bool, tlvs []TLV) []byte {
	b := append([]byte(nil), V2Signature...)
	if !known {
		return append(b, 0x20, 0x00, 0, 0) // LOCAL, UNSPEC, no body
	}
	body := make([]byte, 0, 36)
	family := byte(0x11) // INET, STREAM
	if src.Addr().Is4() {
		s, d := src.Addr().As4(), dst.Addr().As4()
		body = append(append(body, s[:]...), d[:]...)
	} else {
		family = 0x21 // INET6, STREAM
		s, d := src.Addr().As16(), dst.Addr().As16()
		body = append(append(body, s[:]...), d[:]...)
	}
	body = binary.BigEndian.AppendUint16(body, src.Port())
	body = binary.BigEndian.AppendUint16(body, dst.Port())
	var replaced [256]bool
	for _, t := range u.added {
		replaced[t.Type] = true
	}
	for _, t := range tlvs {
		if u.pass.Has(t.Type) && !replaced[t.Type] {
			body = appendTLV(body, t)
		}
	}
	for _, t := range u.added {
		body = appendTLV(body, t)
	}
	b = append(b, 0x21, family)
	b = binary.BigEndian.AppendUint16(b, uint16(len(body)))
	return append(b, body...)
}

// appendTLV appends t to a v2 header's body unless the body would outgrow the 16-bit length.
func appendTLV(b []byte, t TLV) []byte {
	if len(b)+3+len(t.Value) > 0xffff {
		return b
	}
	b = append(b, t.Type)
	b = binary.BigEndian.AppendUint16(b, uint16(len(t.Value)))
	return append(b, t.Value...)
}

// ipPort returns a TCP address's IP and port (an IPv4-mapped IPv6 address as IPv4).
func ipPort(a net.Addr) (netip.AddrPort, bool) {
	ta, ok := a.(*net.TCPAddr)
	if !ok || ta == nil {
		return netip.AddrPort{}, false
	}
	ap := ta.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), ap.Addr().IsValid()
}
