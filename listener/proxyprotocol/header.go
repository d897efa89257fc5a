package proxyprotocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/legateproxy/legate/internal/proxyproto"
)

// Header is a parsed PROXY protocol header.
type Header struct {
	// Version is 1 or 2.
	Version int
	// Local is set when the header carries no addresses to use: a v2 LOCAL command (a health
	// check of the load balancer) or a v1 UNKNOWN line. The socket's addresses stand.
	Local bool
	// Source and Destination are the client's address and the address it connected to.
	Source, Destination netip.AddrPort
	// TLVs are the v2 type-length-value extensions, in order; they alias the parsed bytes.
	TLVs []TLV
	// Len is the length of the whole header on the wire.
	Len int
}

// TLV is one v2 extension.
type TLV = proxyproto.TLV

var (
	// errNeedMore: the bytes so far are a valid prefix of a header.
	errNeedMore = errors.New("proxy protocol: incomplete header")
	// errNotFound: the bytes cannot start a PROXY protocol header of either version.
	errNotFound = errors.New("proxy protocol: no header")
)

// parseError is a malformed header of a known version.
type parseError struct {
	version int
	reason  string
}

func (e *parseError) Error() string {
	return fmt.Sprintf("proxy protocol v%d: %s", e.version, e.reason)
}

const (
	// maxV1 is the longest v1 line Envoy accepts, CRLF included (the specification's 107,
	// plus one byte of slack as in Envoy).
	maxV1    = 108
	v2Fixed  = 16 // signature, version and command, family, length
	v2Inet   = 12 // two IPv4 addresses and two ports
	v2Inet6  = 36 // two IPv6 addresses and two ports
	v1Prefix = "PROXY "
)

var v2Signature = proxyproto.V2Signature

// prefixOf reports whether b is a prefix of sig or starts with it.
func prefixOf(b, sig []byte) bool {
	n := min(len(b), len(sig))
	return bytes.Equal(b[:n], sig[:n])
}

// Parse reads the PROXY protocol header at the start of b. It returns errNeedMore while b is
// a valid but incomplete header, errNotFound when b cannot start one, and a *parseError for
// a malformed header.
func Parse(b []byte) (Header, error) {
	switch {
	case len(b) == 0:
		return Header{}, errNeedMore
	case prefixOf(b, v2Signature):
		return parseV2(b)
	case prefixOf(b, []byte(v1Prefix)):
		return parseV1(b)
	}
	return Header{}, errNotFound
}

func parseV1(b []byte) (Header, error) {
	end := bytes.Index(b[:min(len(b), maxV1)], []byte("\r\n"))
	if end < 0 {
		if len(b) >= maxV1 {
			return Header{}, &parseError{1, "no CRLF in the first 108 bytes"}
		}
		return Header{}, errNeedMore
	}
	h := Header{Version: 1, Len: end + 2}
	parts := bytes.Split(bytes.TrimRight(b[:end], " \t"), []byte(" "))
	if len(parts) < 2 {
		return Header{}, &parseError{1, "no protocol"}
	}
	var want int // address length in bytes
	switch string(parts[1]) {
	case "UNKNOWN":
		h.Local = true
		return h, nil
	case "TCP4":
		want = 4
	case "TCP6":
		want = 16
	default:
		return Header{}, &parseError{1, fmt.Sprintf("unknown protocol %q", parts[1])}
	}
	if len(parts) != 6 {
		return Header{}, &parseError{1, fmt.Sprintf("%d fields; want 6", len(parts))}
	}
	var err error
	if h.Source, err = v1Address(parts[2], parts[4], want); err != nil {
		return Header{}, err
	}
	if h.Destination, err = v1Address(parts[3], parts[5], want); err != nil {
		return Header{}, err
	}
	return h, nil
}

// v1Address parses a v1 address and port of the family whose addresses are size bytes long.
func v1Address(ip, port []byte, size int) (netip.AddrPort, error) {
	a, err := netip.ParseAddr(string(ip))
	if err != nil || a.Zone() != "" || len(a.AsSlice()) != size {
		return netip.AddrPort{}, &parseError{1, fmt.Sprintf("malformed address %q", ip)}
	}
	p, err := strconv.ParseUint(string(port), 10, 16)
	if err != nil || len(port) == 0 || port[0] == '+' {
		return netip.AddrPort{}, &parseError{1, fmt.Sprintf("malformed port %q", port)}
	}
	ap := netip.AddrPortFrom(a, uint16(p))
	if !unicast(a) {
		return netip.AddrPort{}, &parseError{1, fmt.Sprintf("%s is not a unicast address", a)}
	}
	return ap, nil
}

// unicast is Envoy's check of PROXY addresses: not the any address, not broadcast, not
// multicast.
func unicast(a netip.Addr) bool {
	return !a.IsUnspecified() && !a.IsMulticast() && a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

func parseV2(b []byte) (Header, error) {
	if len(b) < v2Fixed {
		return Header{}, errNeedMore
	}
	verCmd, family := b[12], b[13]
	if verCmd>>4 != 2 {
		return Header{}, &parseError{2, fmt.Sprintf("version %d in the version byte", verCmd>>4)}
	}
	length := int(binary.BigEndian.Uint16(b[14:16]))
	h := Header{Version: 2, Len: v2Fixed + length}
	var addrLen int
	switch verCmd & 0xf {
	case 0: // LOCAL
		h.Local = true
	case 1: // PROXY
		if t := family & 0xf; t != 1 && t != 2 {
			return Header{}, &parseError{2, fmt.Sprintf("unsupported transport %d", t)}
		}
		switch family >> 4 {
		case 1:
			addrLen = v2Inet
		case 2:
			addrLen = v2Inet6
		default:
			return Header{}, &parseError{2, fmt.Sprintf("unsupported address family %d", family>>4)}
		}
		if length < addrLen {
			return Header{}, &parseError{2, fmt.Sprintf("length %d is shorter than the %d bytes of its addresses", length, addrLen)}
		}
	default:
		return Header{}, &parseError{2, fmt.Sprintf("unknown command %d", verCmd&0xf)}
	}
	if len(b) < h.Len {
		return Header{}, errNeedMore
	}
	if h.Local {
		return h, nil // the addresses and TLVs of a LOCAL header are ignored
	}
	a := b[v2Fixed:]
	if addrLen == v2Inet {
		h.Source = netip.AddrPortFrom(netip.AddrFrom4([4]byte(a[0:4])), binary.BigEndian.Uint16(a[8:10]))
		h.Destination = netip.AddrPortFrom(netip.AddrFrom4([4]byte(a[4:8])), binary.BigEndian.Uint16(a[10:12]))
	} else {
		h.Source = netip.AddrPortFrom(netip.AddrFrom16([16]byte(a[0:16])), binary.BigEndian.Uint16(a[32:34]))
		h.Destination = netip.AddrPortFrom(netip.AddrFrom16([16]byte(a[16:32])), binary.BigEndian.Uint16(a[34:36]))
	}
	for _, ap := range []netip.AddrPort{h.Source, h.Destination} {
		if !unicast(ap.Addr()) {
			return Header{}, &parseError{2, fmt.Sprintf("%s is not a unicast address", ap.Addr())}
		}
	}
	tlvs, err := parseTLVs(b[v2Fixed+addrLen : h.Len])
	if err != nil {
		return Header{}, err
	}
	h.TLVs = tlvs
	return h, nil
}

// parseTLVs splits the v2 extensions; one that runs past the header is an error.
func parseTLVs(b []byte) ([]TLV, error) {
	var out []TLV
	for len(b) > 0 {
		if len(b) < 3 {
			return nil, &parseError{2, fmt.Sprintf("TLV of type %#x has no length", b[0])}
		}
		n := int(binary.BigEndian.Uint16(b[1:3]))
		if len(b) < 3+n {
			return nil, &parseError{2, fmt.Sprintf("TLV of type %#x is %d bytes long; %d remain in the header", b[0], n, len(b)-3)}
		}
		out = append(out, TLV{Type: b[0], Value: b[3 : 3+n]})
		b = b[3+n:]
	}
	return out, nil
}
