package h2client

import (
	"testing"

	"golang.org/x/net/http2/hpack"
)

// TestRequestHeadDecodes: the encoded head decodes with x/net's HPACK decoder to the fields
// given, names in lower case, framing and connection fields left out.
func TestRequestHeadDecodes(t *testing.T) {
	r := &Request{Method: "PATCH", Scheme: "https", Authority: "example.com", Path: "/a?b", ContentLength: 300,
		Header:  []Field{{Name: "X-Long", Value: string(make([]byte, 300))}, {Name: "Connection", Value: "close"}, {Name: "TE", Value: "trailers"}, {Name: "Host", Value: "h"}},
		Trailer: map[string][]string{"Grpc-Status": nil}}
	var got []string
	d := hpack.NewDecoder(4096, func(f hpack.HeaderField) { got = append(got, f.Name+": "+f.Value) })
	if _, err := d.Write(appendRequestHead(nil, r)); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{":method: PATCH", ":scheme: https", ":path: /a?b", ":authority: example.com", "x-long: " + string(make([]byte, 300)), "te: trailers", "trailer: Grpc-Status", "content-length: 300"}
	if len(got) != len(want) {
		t.Fatalf("fields %q; want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("field %d = %q; want %q", i, got[i], want[i])
		}
	}
}

// TestLiteralNameLowered: a literal field's name is written with A-Z lowered and every other
// byte as it is.
func TestLiteralNameLowered(t *testing.T) {
	name := make([]byte, 256)
	for i := range name {
		name[i] = byte(i)
	}
	b := appendLiteral(nil, string(name), "v")
	got := b[4 : 4+256] // 0x00, then the length 256 as a 7-bit-prefix integer (3 bytes)
	for i, c := range got {
		want := byte(i)
		if want >= 'A' && want <= 'Z' {
			want += 'a' - 'A'
		}
		if c != want {
			t.Fatalf("byte %d written as %d; want %d", i, c, want)
		}
	}
}
