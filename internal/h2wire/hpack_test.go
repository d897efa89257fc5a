package h2wire

import (
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// TestLiteralNameLowered: a literal field's name is written with A-Z lowered and every other
// byte as it is.
func TestLiteralNameLowered(t *testing.T) {
	name := make([]byte, 256)
	for i := range name {
		name[i] = byte(i)
	}
	b := AppendLiteral(nil, string(name), "v")
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

// TestLowerASCIIEveryAlignment: names of every length up to 40 at every offset, from every
// byte value, come out as a byte-by-byte loop lowers them (A-Z only).
func TestLowerASCIIEveryAlignment(t *testing.T) {
	for n := range 41 {
		for off := range 9 {
			for start := 0; start < 256; start += 7 {
				buf := make([]byte, off+n)
				name := buf[off:]
				for i := range name {
					name[i] = byte(start + 13*i)
				}
				want := []byte(string(name))
				for i, c := range want {
					if 'A' <= c && c <= 'Z' {
						want[i] = c + 'a' - 'A'
					}
				}
				lowerASCII(name)
				if string(name) != string(want) {
					t.Fatalf("length %d offset %d from %d: lowered to %q; want %q", n, off, start, name, want)
				}
			}
		}
	}
}

// TestStaticNamesAndStatusDecode: every name StaticName indexes, and every status code,
// decodes with x/net's HPACK decoder to the lower-case name (the code) written.
func TestStaticNamesAndStatusDecode(t *testing.T) {
	names := []string{"Accept-Ranges", "Access-Control-Allow-Origin", "Age", "Allow", "Cache-Control",
		"Content-Disposition", "Content-Encoding", "Content-Language", "Content-Length", "Content-Location",
		"Content-Range", "Content-Type", "Date", "Etag", "Expires", "Last-Modified", "Link", "Location",
		"Retry-After", "Server", "Set-Cookie", "Strict-Transport-Security", "Vary", "Via", "Www-Authenticate"}
	var b []byte
	var want []string
	for _, n := range names {
		idx := StaticName(n)
		if idx == 0 {
			t.Fatalf("StaticName(%q) = 0", n)
		}
		b = AppendIndexedName(b, idx, "v")
		want = append(want, strings.ToLower(n)+": v")
	}
	if StaticName("X-Other") != 0 {
		t.Error("StaticName(X-Other) != 0")
	}
	b = AppendLiteral(b, "X-Other", "w")
	want = append(want, "x-other: w")
	for code := 100; code <= 999; code++ {
		b = AppendStatus(b, code)
		want = append(want, ":status: "+strconv.Itoa(code))
	}
	var got []string
	d := hpack.NewDecoder(4096, func(f hpack.HeaderField) { got = append(got, f.Name+": "+f.Value) })
	if _, err := d.Write(append([]byte{TableSizeZero}, b...)); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d fields decoded; want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("field %d = %q; want %q", i, got[i], want[i])
		}
	}
}
