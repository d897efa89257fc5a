package proxyprotocol

import (
	"fmt"
	"net"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ppv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/proxy_protocol/v3"
	upppv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/proxy_protocol/v3"

	"github.com/legateproxy/legate/internal/proxyproto"
	"github.com/legateproxy/legate/stats"
)

// TestRulesAndPassThrough: rules put a TLV's value under their key and namespace (the
// filter's by default; invalid UTF-8 replaced, or base64), a later rule for a type wins, and
// pass_through_tlvs keeps copies of the selected TLVs only.
func TestRulesAndPassThrough(t *testing.T) {
	st, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	kv := func(ns, key string, b64 bool) *ppv3.ProxyProtocol_KeyValuePair {
		p := &ppv3.ProxyProtocol_KeyValuePair{MetadataNamespace: ns, Key: key}
		if b64 {
			p.ValueStringEncoding = ppv3.ProxyProtocol_KeyValuePair_BASE64
		}
		return p
	}
	f, err := New(&ppv3.ProxyProtocol{
		Rules: []*ppv3.ProxyProtocol_Rule{
			{TlvType: 0xE0, OnTlvPresent: kv("", "tenant", false)},
			{TlvType: 0xE1, OnTlvPresent: kv("lb", "raw", true)},
			{TlvType: 0xE2, OnTlvPresent: kv("lb", "old", false)},
			{TlvType: 0xE2, OnTlvPresent: kv("lb", "bytes", false)},
		},
		PassThroughTlvs: &corev3.ProxyProtocolPassThroughTLVs{MatchType: corev3.ProxyProtocolPassThroughTLVs_INCLUDE, TlvType: []uint32{0xE0, 0xE3}},
	}, st)
	if err != nil {
		t.Fatal(err)
	}
	in := []byte{'a', 0xff, 'b'}
	h := Header{Version: 2, TLVs: []TLV{{Type: 0xE0, Value: []byte("acme")}, {Type: 0xE1, Value: []byte{0, 1, 2}}, {Type: 0xE2, Value: in}, {Type: 0xE3, Value: []byte("x")}, {Type: 0xE4, Value: []byte("y")}}}
	md := f.Metadata(h)
	if got := md[Name].GetFields()["tenant"].GetStringValue(); got != "acme" {
		t.Errorf("%s/tenant = %q; want acme", Name, got)
	}
	lb := md["lb"].GetFields()
	if got := lb["raw"].GetStringValue(); got != "AAEC" {
		t.Errorf("lb/raw = %q; want base64 AAEC", got)
	}
	if got := lb["bytes"].GetStringValue(); got != "a!b" || lb["old"] != nil {
		t.Errorf("lb = %v; want bytes a!b from the later rule only", lb)
	}
	pass := f.PassThrough(h)
	if len(pass) != 2 || pass[0].Type != 0xE0 || string(pass[0].Value) != "acme" || pass[1].Type != 0xE3 {
		t.Fatalf("PassThrough = %v; want E0 and E3", pass)
	}
	h.TLVs[0].Value[0] = 'X'
	if string(pass[0].Value) != "acme" {
		t.Error("PassThrough aliases the header's bytes; want copies")
	}
	if md := f.Metadata(Header{Version: 2}); md != nil {
		t.Errorf("Metadata of a header without TLVs = %v; want nil", md)
	}
}

// TestUpstreamHeader: the upstream socket's headers parse back (v1 and v2, IPv4 and IPv6,
// mixed families as IPv6), v2 carries the host's TLVs, then added_tlvs of a type the host
// does not set, then the passed-through TLVs its own selection keeps and neither replaces,
// in Envoy's order; non-IP addresses give a header without addresses, and a connection made
// for no downstream describes itself in v1 and is v2's LOCAL command.
func TestUpstreamHeader(t *testing.T) {
	up := func(v corev3.ProxyProtocolConfig_Version, pass *corev3.ProxyProtocolPassThroughTLVs, added ...*corev3.TlvEntry) *proxyproto.Upstream {
		u, err := proxyproto.UpstreamFromProto("ts", &upppv3.ProxyProtocolUpstreamTransport{Config: &corev3.ProxyProtocolConfig{Version: v, PassThroughTlvs: pass, AddedTlvs: added}})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	tcp := func(s string) net.Addr { a, _ := net.ResolveTCPAddr("tcp", s); return a }
	d := &proxyproto.Downstream{Source: tcp("203.0.113.7:4000"), Destination: tcp("198.51.100.1:443"),
		TLVs: []proxyproto.TLV{{Type: 0xE0, Value: []byte("acme")}, {Type: 0xE1, Value: []byte("old")}, {Type: 0xE5, Value: []byte("no")}}}

	h, err := Parse(up(corev3.ProxyProtocolConfig_V1, nil).Header(d, nil))
	if err != nil || h.Version != 1 || h.Source.String() != "203.0.113.7:4000" || h.Destination.String() != "198.51.100.1:443" {
		t.Errorf("v1: %+v, %v", h, err)
	}
	include := &corev3.ProxyProtocolPassThroughTLVs{MatchType: corev3.ProxyProtocolPassThroughTLVs_INCLUDE, TlvType: []uint32{0xE0, 0xE1}}
	u := up(corev3.ProxyProtocolConfig_V2, include, &corev3.TlvEntry{Type: 0xE1, Value: []byte("new")}, &corev3.TlvEntry{Type: 0xF0, Value: []byte("added")})
	for _, tc := range []struct {
		host []proxyproto.TLV
		want []string
	}{
		{nil, []string{"e1=new", "f0=added", "e0=acme"}},
		{[]proxyproto.TLV{{Type: 0xF0, Value: []byte("host")}, {Type: 0xE0, Value: []byte("h0")}}, []string{"f0=host", "e0=h0", "e1=new"}},
	} {
		h, err = Parse(u.Header(d, tc.host))
		if err != nil || h.Version != 2 || h.Local || h.Source.String() != "203.0.113.7:4000" {
			t.Fatalf("v2: %+v, %v", h, err)
		}
		var got []string
		for _, tlv := range h.TLVs {
			got = append(got, fmt.Sprintf("%x=%s", tlv.Type, tlv.Value))
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("v2 TLVs with host TLVs %v = %v; want %v", tc.host, got, tc.want)
		}
	}
	if h, _ := Parse(up(corev3.ProxyProtocolConfig_V2, nil).Header(d, nil)); len(h.TLVs) != 0 {
		t.Errorf("v2 without pass_through_tlvs passed %v; want none", h.TLVs)
	}
	mixed := &proxyproto.Downstream{Source: tcp("203.0.113.7:1"), Destination: tcp("[2001:db8::1]:2")}
	for _, v := range []corev3.ProxyProtocolConfig_Version{corev3.ProxyProtocolConfig_V1, corev3.ProxyProtocolConfig_V2} {
		h, err := Parse(up(v, nil).Header(mixed, nil))
		if err != nil || h.Source.String() != "[::ffff:203.0.113.7]:1" || h.Destination.String() != "[2001:db8::1]:2" {
			t.Errorf("v%d mixed families: %+v, %v", v+1, h, err)
		}
		h, err = Parse(up(v, nil).Header(&proxyproto.Downstream{Source: &net.UnixAddr{Name: "x"}, Destination: tcp("127.0.0.1:1")}, nil))
		if err != nil || !h.Local {
			t.Errorf("v%d without IP addresses: %+v, %v; want a header without addresses", v+1, h, err)
		}
	}
	self := up(corev3.ProxyProtocolConfig_V1, nil).LocalHeader(tcp("10.0.0.1:5000"), tcp("10.0.0.2:80"))
	if h, err := Parse(self); err != nil || h.Local || h.Source.String() != "10.0.0.1:5000" || h.Destination.String() != "10.0.0.2:80" {
		t.Errorf("v1 for no downstream: %+v, %v; want the connection's own addresses", h, err)
	}
	if h, err := Parse(u.LocalHeader(tcp("10.0.0.1:5000"), tcp("10.0.0.2:80"))); err != nil || !h.Local || len(h.TLVs) != 0 {
		t.Errorf("v2 for no downstream: %+v, %v; want the LOCAL command without TLVs", h, err)
	}
}

// TestUpstreamUnspecified: with allow_unspecified_address a downstream whose addresses are
// not IP gets a v2 PROXY command of family AF_UNSPEC, without addresses, that still carries
// the TLVs (the spec's encoding, which some receivers, go-proxyproto and Envoy's listener
// filter among them, refuse), and v1's UNKNOWN.
func TestUpstreamUnspecified(t *testing.T) {
	want := map[corev3.ProxyProtocolConfig_Version]string{
		corev3.ProxyProtocolConfig_V1: "PROXY UNKNOWN\r\n",
		corev3.ProxyProtocolConfig_V2: string(proxyproto.V2Signature) + "\x21\x00\x00\x08\xf0\x00\x05added",
	}
	for v, w := range want {
		u, err := proxyproto.UpstreamFromProto("ts", &upppv3.ProxyProtocolUpstreamTransport{AllowUnspecifiedAddress: true,
			Config: &corev3.ProxyProtocolConfig{Version: v, AddedTlvs: []*corev3.TlvEntry{{Type: 0xF0, Value: []byte("added")}}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := u.Header(&proxyproto.Downstream{Source: &net.UnixAddr{Name: "x"}, Destination: &net.UnixAddr{Name: "y"}}, nil); string(got) != w {
			t.Errorf("v%d header = %q; want %q", v+1, got, w)
		}
	}
}

// TestUpstreamPoolKey: the key of a downstream holds its addresses (unless they are not IP
// and allow_unspecified_address leaves them out), and its TLVs only with tlv_as_pool_key.
func TestUpstreamPoolKey(t *testing.T) {
	tcp := func(s string) net.Addr { a, _ := net.ResolveTCPAddr("tcp", s); return a }
	key := func(pb *upppv3.ProxyProtocolUpstreamTransport, src, dst net.Addr, tlv string) string {
		u, err := proxyproto.UpstreamFromProto("ts", pb)
		if err != nil {
			t.Fatal(err)
		}
		return u.PoolKey(src, dst, []proxyproto.TLV{{Type: 0xE0, Value: []byte(tlv)}})
	}
	plain, byTLV, unspec := &upppv3.ProxyProtocolUpstreamTransport{}, &upppv3.ProxyProtocolUpstreamTransport{TlvAsPoolKey: true}, &upppv3.ProxyProtocolUpstreamTransport{AllowUnspecifiedAddress: true}
	a, b, dst := tcp("10.0.0.1:1000"), tcp("10.0.0.1:1001"), tcp("10.0.0.9:80")
	unix1, unix2 := &net.UnixAddr{Name: "1"}, &net.UnixAddr{Name: "2"}
	for _, tc := range []struct {
		name string
		x, y string
		same bool
	}{
		{"other source port", key(plain, a, dst, "t"), key(plain, b, dst, "t"), false},
		{"other TLV, not in the key", key(plain, a, dst, "t"), key(plain, a, dst, "u"), true},
		{"other TLV, tlv_as_pool_key", key(byTLV, a, dst, "t"), key(byTLV, a, dst, "u"), false},
		{"not IP", key(plain, unix1, unix1, "t"), key(plain, unix2, unix2, "t"), false},
		{"not IP, allow_unspecified_address", key(unspec, unix1, unix1, "t"), key(unspec, unix2, unix2, "t"), true},
	} {
		if got := tc.x == tc.y; got != tc.same || tc.x == "" {
			t.Errorf("%s: keys %q and %q; want same = %v, never empty", tc.name, tc.x, tc.y, tc.same)
		}
	}
}

// TestUpstreamRefuses: the socket's fields Legate does not implement are refused with their
// path.
func TestUpstreamRefuses(t *testing.T) {
	for _, tc := range []struct {
		pb   *upppv3.ProxyProtocolUpstreamTransport
		want string
	}{
		{&upppv3.ProxyProtocolUpstreamTransport{Config: &corev3.ProxyProtocolConfig{AddedTlvs: []*corev3.TlvEntry{{Type: 1, FormatString: &corev3.SubstitutionFormatString{}}}}}, "ts.config.added_tlvs[0].format_string: not implemented by Legate"},
		{&upppv3.ProxyProtocolUpstreamTransport{Config: &corev3.ProxyProtocolConfig{AddedTlvs: []*corev3.TlvEntry{{Type: 256}}}}, "ts.config.added_tlvs[0].type: 256"},
	} {
		if _, err := proxyproto.UpstreamFromProto("ts", tc.pb); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("UpstreamFromProto(%v) = %v; want %q", tc.pb, err, tc.want)
		}
	}
}
