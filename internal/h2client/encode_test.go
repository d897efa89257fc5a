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
