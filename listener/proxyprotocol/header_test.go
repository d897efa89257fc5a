package proxyprotocol

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ppv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/proxy_protocol/v3"

	"github.com/legateproxy/legate/stats"
)

// TestParse: headers of both versions parse to their addresses, TLVs and length; prefixes
// ask for more; anything else is not found or malformed with the version it claimed.
func TestParse(t *testing.T) {
	v2 := func(verCmd, fam byte, body ...byte) []byte {
		b := append([]byte(nil), v2Signature...)
		b = append(b, verCmd, fam, byte(len(body)>>8), byte(len(body)))
		return append(b, body...)
	}
	inet := []byte{203, 0, 113, 1, 198, 51, 100, 2, 0x1f, 0x90, 0x01, 0xbb}
	withTLV := append(append([]byte(nil), inet...), 0x02, 0, 3, 'a', '.', 'b', 0xEE, 0, 0)
	ok := []struct {
		name string
		in   string
		want Header
	}{
		{"v1 tcp4", "PROXY TCP4 203.0.113.1 198.51.100.2 8080 443\r\nrest", Header{Version: 1, Source: netip.MustParseAddrPort("203.0.113.1:8080"), Destination: netip.MustParseAddrPort("198.51.100.2:443"), Len: 46}},
		{"v1 unknown", "PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n", Header{Version: 1, Local: true, Len: 35}},
		{"v2 local", string(v2(0x20, 0x00, 1, 2, 3)), Header{Version: 2, Local: true, Len: 19}},
		{"v2 inet", string(v2(0x21, 0x11, inet...)), Header{Version: 2, Source: netip.MustParseAddrPort("203.0.113.1:8080"), Destination: netip.MustParseAddrPort("198.51.100.2:443"), Len: 28}},
	}
	for _, tc := range ok {
		got, err := Parse([]byte(tc.in))
		if err != nil || got.Version != tc.want.Version || got.Local != tc.want.Local || got.Source != tc.want.Source || got.Destination != tc.want.Destination || got.Len != tc.want.Len {
			t.Errorf("%s: Parse = %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	h, err := Parse(v2(0x21, 0x12, withTLV...)) // DGRAM is accepted as in Envoy
	if err != nil || len(h.TLVs) != 2 || h.TLVs[0].Type != 2 || string(h.TLVs[0].Value) != "a.b" || h.TLVs[1].Type != 0xEE || len(h.TLVs[1].Value) != 0 {
		t.Errorf("v2 with TLVs: %+v, %v", h, err)
	}
	for _, prefix := range []string{"P", "PROXY", "PROXY TCP4 1.2.3.4", "\r\n\r\n\x00", string(v2(0x21, 0x11, inet...)[:20])} {
		if _, err := Parse([]byte(prefix)); !errors.Is(err, errNeedMore) {
			t.Errorf("Parse(%q) = %v; want errNeedMore", prefix, err)
		}
	}
	for _, in := range []string{"GET / HTTP/1.1\r\n", "PROXX", "\r\n\r\n\x01"} {
		if _, err := Parse([]byte(in)); !errors.Is(err, errNotFound) {
			t.Errorf("Parse(%q) = %v; want errNotFound", in, err)
		}
	}
	bad := []struct {
		in      string
		version int
		reason  string
	}{
		{"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n", 1, "7 fields"},
		{"PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n", 1, "7 fields"},
		{"PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n", 1, "unknown protocol"},
		{"PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n", 1, "malformed address"},
		{"PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n", 1, "malformed port"},
		{"PROXY TCP4 0.0.0.0 5.6.7.8 1 2\r\n", 1, "not a unicast"},
		{"PROXY TCP4 1.2.3.4 255.255.255.255 1 2\r\n", 1, "not a unicast"},
		{"PROXY \r\n", 1, "no protocol"},
		{"PROXY " + strings.Repeat("x", 200), 1, "no CRLF"},
		{string(v2(0x21, 0x31)), 2, "address family 3"},
		{string(v2(0x21, 0x01)), 2, "address family 0"},
		{string(v2(0x21, 0x13, inet...)), 2, "transport 3"},
		{string(v2(0x22, 0x11, inet...)), 2, "unknown command 2"},
		{string(v2(0x11, 0x11, inet...)), 2, "version 1"},
		{string(v2(0x21, 0x21, inet...)), 2, "shorter than the 36 bytes"},
		{string(v2(0x21, 0x11, append(append([]byte(nil), inet...), 1, 0)...)), 2, "has no length"},
		{string(v2(0x21, 0x11, append(append([]byte(nil), inet...), 1, 0, 5, 'x')...)), 2, "5 bytes long"},
		{string(v2(0x21, 0x11, 224, 0, 0, 1, 198, 51, 100, 2, 0, 1, 0, 2)), 2, "not a unicast"},
	}
	for _, tc := range bad {
		_, err := Parse([]byte(tc.in))
		var pe *parseError
		if !errors.As(err, &pe) || pe.version != tc.version || !strings.Contains(pe.reason, tc.reason) {
			t.Errorf("Parse(%q) = %v; want a v%d error containing %q", tc.in, err, tc.version, tc.reason)
		}
	}
}

// FuzzParse: no input makes Parse panic, and a header it accepts fits in its input.
func FuzzParse(f *testing.F) {
	f.Add([]byte("PROXY TCP4 203.0.113.1 198.51.100.2 8080 443\r\n"))
	f.Add(append(append([]byte(nil), v2Signature...), 0x21, 0x11, 0, 15, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 0, 2, 1, 0, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Parse(b)
		if err == nil && (h.Len > len(b) || h.Len <= 0) {
			t.Fatalf("Parse accepted a %d-byte header in %d bytes", h.Len, len(b))
		}
	})
}

// TestNewRefusesBadFields: an unknown tlv_location, rules without a key, out-of-range TLV
// types and an impossible version list are errors.
func TestNewRefusesBadFields(t *testing.T) {
	st, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pb   *ppv3.ProxyProtocol
		want string
	}{
		{&ppv3.ProxyProtocol{Rules: []*ppv3.ProxyProtocol_Rule{{TlvType: 2}}}, "rules[0].on_tlv_present.key: required"},
		{&ppv3.ProxyProtocol{Rules: []*ppv3.ProxyProtocol_Rule{{TlvType: 256, OnTlvPresent: &ppv3.ProxyProtocol_KeyValuePair{Key: "k"}}}}, "rules[0].tlv_type: 256"},
		{&ppv3.ProxyProtocol{PassThroughTlvs: &corev3.ProxyProtocolPassThroughTLVs{MatchType: corev3.ProxyProtocolPassThroughTLVs_INCLUDE, TlvType: []uint32{1, 300}}}, "pass_through_tlvs.tlv_type[1]: 300"},
		{&ppv3.ProxyProtocol{TlvLocation: 7}, "tlv_location: unknown location 7"},
		{&ppv3.ProxyProtocol{DisallowedVersions: []corev3.ProxyProtocolConfig_Version{corev3.ProxyProtocolConfig_V1, corev3.ProxyProtocolConfig_V2}}, "disallows both v1 and v2"},
	} {
		if _, err := New(tc.pb, st); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%v) = %v; want an error containing %q", tc.pb, err, tc.want)
		}
	}
}
