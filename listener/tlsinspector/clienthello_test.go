package tlsinspector

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/listener/tlsinspector/hellotest"
)

func TestParseClientHello(t *testing.T) {
	tests := []struct {
		name string
		sni  string
		alpn []string
		want clientHello
	}{
		{"sni and alpn", "www.Example.com", []string{"h2", "http/1.1"}, clientHello{serverName: "www.example.com", alpn: []string{"h2", "http/1.1"}}},
		{"sni only", "a.b.example.com", nil, clientHello{serverName: "a.b.example.com"}},
		{"neither", "", []string{"x"}, clientHello{alpn: []string{"x"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := hellotest.Bytes(t, tc.sni, tc.alpn...)
			got, err := parseClientHello(b)
			if err != nil {
				t.Fatalf("parseClientHello() error = %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(clientHello{})); diff != "" {
				t.Errorf("parseClientHello() (-want +got):\n%s", diff)
			}
			for n := 0; n < len(b); n++ {
				if _, err := parseClientHello(b[:n]); !errors.Is(err, errNeedMore) {
					t.Fatalf("parseClientHello(first %d of %d bytes) error = %v; want errNeedMore", n, len(b), err)
				}
			}
			split := splitRecord(b, 3)
			got, err = parseClientHello(split)
			if err != nil {
				t.Fatalf("parseClientHello(split in records) error = %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(clientHello{})); diff != "" {
				t.Errorf("parseClientHello(split in records) (-want +got):\n%s", diff)
			}
		})
	}
}

// splitRecord re-frames the single handshake record of b as two records, the first carrying
// n bytes of the handshake message.
func splitRecord(b []byte, n int) []byte {
	body := b[5 : 5+int(binary.BigEndian.Uint16(b[3:5]))]
	out := append([]byte{0x16, 3, 1, 0, byte(n)}, body[:n]...)
	rest := body[n:]
	out = append(out, 0x16, 3, 1, byte(len(rest)>>8), byte(len(rest)))
	return append(out, rest...)
}

func TestParseClientHelloRejects(t *testing.T) {
	hello := hellotest.Bytes(t, "example.com")
	huge := []byte{0x16, 3, 1, 0, 4, 1, 0x01, 0x00, 0x01} // a 65537-byte ClientHello
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"http request", []byte("GET / HTTP/1.1\r\n"), errNotTLS},
		{"h2 preface", []byte("PRI * HTTP/2.0\r\n"), errNotTLS},
		{"one byte", []byte{'x'}, errNotTLS},
		{"bad record version", []byte{0x16, 2, 0, 0, 1}, errNotTLS},
		{"empty record", []byte{0x16, 3, 1, 0, 0}, errNotTLS},
		{"server hello", []byte{0x16, 3, 1, 0, 4, 2, 0, 0, 0}, errNotTLS},
		{"too large", huge, errHelloTooLarge},
		{"alert after a handshake fragment", append(append([]byte{}, splitRecord(hello, 10)[:15]...), 0x15, 3, 1, 0, 2, 2, 40), errNotTLS},
		{"truncated body", []byte{0x16, 3, 1, 0, 6, 1, 0, 0, 2, 3, 3}, errNotTLS},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parseClientHello(tc.in); !errors.Is(err, tc.want) {
				t.Errorf("parseClientHello(%q) error = %v; want %v", tc.in, err, tc.want)
			}
		})
	}
}

func FuzzParseClientHello(f *testing.F) {
	f.Add(hellotest.Bytes(f, "www.example.com", "h2", "http/1.1"))
	f.Add(hellotest.Bytes(f, ""))
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	f.Add([]byte{0x16, 3, 1, 0, 4, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseClientHello(b)
		if err == nil {
			for _, p := range h.alpn {
				if p == "" {
					t.Errorf("empty ALPN protocol accepted")
				}
			}
		}
	})
}
