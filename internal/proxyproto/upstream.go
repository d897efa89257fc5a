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
	// tlvKey is tlv_as_pool_key: the downstream's TLVs are part of the pool key.
	tlvKey bool
	// unspecified is allow_unspecified_address: a downstream whose addresses are not IP is
	// described with AF_UNSPEC (and its TLVs), and its addresses are not in the pool key.
	unspecified bool
}

// UpstreamFromProto builds the socket's header settings; path names the typed_config. Fields
// Legate does not implement are refused with their path.
func UpstreamFromProto(path string, pb *upppv3.ProxyProtocolUpstreamTransport) (*Upstream, error) {
	cfg := pb.GetConfig()
	u := &Upstream{version: 1, tlvKey: pb.GetTlvAsPoolKey(), unspecified: pb.GetAllowUnspecifiedAddress()}
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
			// The access-log formatter formats a stream's entry; the pool opens a connection
			// without one, so the commands would have nothing to read.
			return nil, fmt.Errorf("%s.format_string: not implemented by Legate (use value)", at)
		}
		t, err := tlvOf(at, e)
		if err != nil {
			return nil, err
		}
		u.added = append(u.added, t)
	}
	return u, nil
}

// HostTLVsFromProto returns the added_tlvs of an endpoint's PerHostConfig (its
// typed_filter_metadata under UpstreamName), which its connections' v2 headers carry before
// the socket's own; path names the entry. As in Envoy only their values are read (a
// format_string is not evaluated).
func HostTLVsFromProto(path string, pb *corev3.PerHostConfig) ([]TLV, error) {
	var out []TLV
	for i, e := range pb.GetAddedTlvs() {
		t, err := tlvOf(fmt.Sprintf("%s.added_tlvs[%d]", path, i), e)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// tlvOf converts one TlvEntry's type and value.
func tlvOf(path string, e *corev3.TlvEntry) (TLV, error) {
	if e.GetType() > 255 {
		return TLV{}, fmt.Errorf("%s.type: %d; TLV types are one byte (0-255)", path, e.GetType())
	}
	return TLV{Type: byte(e.GetType()), Value: e.GetValue()}, nil
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

// Header returns the header to write on an upstream connection made for d, with host's TLVs
// (its endpoint's PerHostConfig). Addresses that are not IP (an internal listener's) give a
// header without addresses: v1's UNKNOWN, and v2's LOCAL command, or with
// allow_unspecified_address a PROXY command of family AF_UNSPEC that carries the TLVs. The v2
// TLVs are host's, then the socket's added_tlvs of a type host does not set, then those of d
// that the socket's pass_through_tlvs selects and none of the former replaces, as Envoy
// orders them.
func (u *Upstream) Header(d *Downstream, host []TLV) []byte {
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
	if !known && !u.unspecified {
		return localV2()
	}
	return u.v2Header(src, dst, known, d.TLVs, host)
}

// LocalHeader returns the header of a connection made for no downstream (a request of
// Legate's own): v1 describes the connection itself, from local to remote; v2 is the LOCAL
// command, as Envoy's socket writes without PROXY protocol state.
func (u *Upstream) LocalHeader(local, remote net.Addr) []byte {
	if u.version == 2 {
		return localV2()
	}
	src, okS := ipPort(local)
	dst, okD := ipPort(remote)
	return v1Header(src, dst, okS && okD)
}

// PoolKey returns what of d separates the upstream connections made for it from others', as
// Envoy hashes the PROXY protocol state into its pool key: the addresses (left out when they
// are not IP and allow_unspecified_address has them sent as AF_UNSPEC), and with
// tlv_as_pool_key every TLV of d. It is never empty.
func (u *Upstream) PoolKey(source, destination net.Addr, tlvs []TLV) string {
	b := []byte{'p'}
	src, okS := ipPort(source)
	dst, okD := ipPort(destination)
	switch {
	case okS && okD:
		b = src.AppendTo(append(b, ' '))
		b = dst.AppendTo(append(b, ' '))
	case !u.unspecified:
		b = append(append(b, ' '), addrString(source)...)
		b = append(append(b, ' '), addrString(destination)...)
	}
	if u.tlvKey {
		for _, t := range tlvs {
			b = appendTLV(append(b, ' '), t)
		}
	}
	return string(b)
}

// addrString is a's string; "" for none.
func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
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

// localV2 is the v2 LOCAL command without addresses or TLVs.
func localV2() []byte {
	return append(append([]byte(nil), V2Signature...), 0x20, 0x00, 0, 0)
}

func (u *Upstream) v2Header(src, dst netip.AddrPort, known bool, tlvs, host []TLV) []byte {
	body := make([]byte, 0, 36)
	family := byte(0x00) // UNSPEC: allow_unspecified_address, no address block
	switch {
	case !known:
	case src.Addr().Is4():
		family = 0x11 // INET, STREAM
		s, d := src.Addr().As4(), dst.Addr().As4()
		body = append(append(body, s[:]...), d[:]...)
	default:
		family = 0x21 // INET6, STREAM
		s, d := src.Addr().As16(), dst.Addr().As16()
		body = append(append(body, s[:]...), d[:]...)
	}
	if known {
		body = binary.BigEndian.AppendUint16(body, src.Port())
		body = binary.BigEndian.AppendUint16(body, dst.Port())
	}
	var custom [256]bool
	for _, t := range host {
		custom[t.Type] = true
	}
	for _, t := range host {
		body = appendTLV(body, t)
	}
	var added [256]bool
	for _, t := range u.added {
		if !custom[t.Type] {
			body = appendTLV(body, t)
			added[t.Type] = true
		}
	}
	for _, t := range tlvs {
		if u.pass.Has(t.Type) && !custom[t.Type] && !added[t.Type] {
			body = appendTLV(body, t)
		}
	}
	b := append(append([]byte(nil), V2Signature...), 0x21, family)
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
