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
// mixed families as IPv6), v2 carries the passed-through TLVs its own selection keeps with
// added_tlvs replacing a passed one of the same type, and non-IP addresses give a header
// without addresses.
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

	h, err := Parse(up(corev3.ProxyProtocolConfig_V1, nil).Header(d))
	if err != nil || h.Version != 1 || h.Source.String() != "203.0.113.7:4000" || h.Destination.String() != "198.51.100.1:443" {
		t.Errorf("v1: %+v, %v", h, err)
	}
	include := &corev3.ProxyProtocolPassThroughTLVs{MatchType: corev3.ProxyProtocolPassThroughTLVs_INCLUDE, TlvType: []uint32{0xE0, 0xE1}}
	u := up(corev3.ProxyProtocolConfig_V2, include, &corev3.TlvEntry{Type: 0xE1, Value: []byte("new")}, &corev3.TlvEntry{Type: 0xF0, Value: []byte("added")})
	h, err = Parse(u.Header(d))
	if err != nil || h.Version != 2 || h.Local || h.Source.String() != "203.0.113.7:4000" {
		t.Fatalf("v2: %+v, %v", h, err)
	}
	want := []string{"e0=acme", "e1=new", "f0=added"}
	if len(h.TLVs) != len(want) {
		t.Fatalf("v2 TLVs = %v; want %v", h.TLVs, want)
	}
	for i, tlv := range h.TLVs {
		if got := fmt.Sprintf("%x=%s", tlv.Type, tlv.Value); got != want[i] {
			t.Errorf("v2 TLV %d = %s; want %s", i, got, want[i])
		}
	}
	if h, _ := Parse(up(corev3.ProxyProtocolConfig_V2, nil).Header(d)); len(h.TLVs) != 0 {
		t.Errorf("v2 without pass_through_tlvs passed %v; want none", h.TLVs)
	}
	mixed := &proxyproto.Downstream{Source: tcp("203.0.113.7:1"), Destination: tcp("[2001:db8::1]:2")}
	for _, v := range []corev3.ProxyProtocolConfig_Version{corev3.ProxyProtocolConfig_V1, corev3.ProxyProtocolConfig_V2} {
		h, err := Parse(up(v, nil).Header(mixed))
		if err != nil || h.Source.String() != "[::ffff:203.0.113.7]:1" || h.Destination.String() != "[2001:db8::1]:2" {
			t.Errorf("v%d mixed families: %+v, %v", v+1, h, err)
		}
		h, err = Parse(up(v, nil).Header(&proxyproto.Downstream{Source: &net.UnixAddr{Name: "x"}, Destination: tcp("127.0.0.1:1")}))
		if err != nil || !h.Local {
			t.Errorf("v%d without IP addresses: %+v, %v; want a header without addresses", v+1, h, err)
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
		{&upppv3.ProxyProtocolUpstreamTransport{TlvAsPoolKey: true}, "ts.tlv_as_pool_key: not implemented by Legate"},
		{&upppv3.ProxyProtocolUpstreamTransport{AllowUnspecifiedAddress: true}, "ts.allow_unspecified_address: not implemented by Legate"},
		{&upppv3.ProxyProtocolUpstreamTransport{Config: &corev3.ProxyProtocolConfig{AddedTlvs: []*corev3.TlvEntry{{Type: 1, FormatString: &corev3.SubstitutionFormatString{}}}}}, "ts.config.added_tlvs[0].format_string: not implemented by Legate"},
		{&upppv3.ProxyProtocolUpstreamTransport{Config: &corev3.ProxyProtocolConfig{AddedTlvs: []*corev3.TlvEntry{{Type: 256}}}}, "ts.config.added_tlvs[0].type: 256"},
	} {
		if _, err := proxyproto.UpstreamFromProto("ts", tc.pb); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("UpstreamFromProto(%v) = %v; want %q", tc.pb, err, tc.want)
		}
	}
}
