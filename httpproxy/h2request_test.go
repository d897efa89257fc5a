package httpproxy

import (
	"math/rand/v2"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestH2RequestHeaderMatchesReference builds the requests of 2,000 random header blocks on
// one reused stream and checks each request's header against one built the plain way
// (http.CanonicalHeaderKey, values in order, cookies joined with "; "): the canonical keys
// written into the stream's arena, the duplicate lookups the name filter skips and the
// clearing between requests must not change it. The filter must hold every name the header
// has (a name it hid would be missed by the connection manager's lookups), and the count and
// size of its values tooManyHeaders applies the limits to must be the header's.
func TestH2RequestHeaderMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789-"
	names := []string{"cookie", "accept", "x-forwarded-for", "content-type", "user-agent", "host", "trailer"}
	c := &h2conn{remote: "127.0.0.1:1"}
	for n := range 2000 {
		var f h2block
		f.pseudo = h2pseudo{method: "GET", path: "/", scheme: "http", authority: "x"}
		f.ended = r.IntN(2) == 0 // else a body follows, and Trailer declares trailers
		want := http.Header{}
		var cookies []string
		for i := range r.IntN(14) {
			name := names[r.IntN(len(names))]
			if r.IntN(2) == 0 {
				b := make([]byte, 1+r.IntN(20))
				for j := range b {
					b[j] = letters[r.IntN(len(letters))]
				}
				name = string(b)
			}
			switch name {
			case "te", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
				continue // refused (TestH2ConnectionSpecificFields)
			}
			value := strings.Repeat("v", i) + name
			f.fields = append(f.fields, hpack.HeaderField{Name: name, Value: value})
			switch name {
			case "cookie":
				cookies = append(cookies, value)
			case "host", "trailer":
				// host goes (its value would stand for a missing :authority); trailer
				// declares trailers only for a request with a body
			default:
				k := http.CanonicalHeaderKey(name)
				want[k] = append(want[k], value)
			}
		}
		if len(cookies) > 0 {
			want["Cookie"] = []string{strings.Join(cookies, "; ")}
		}
		st := c.newStream(uint32(2*n+1), false)
		if code := c.newRequest(&f, &st.reqv, st); code != http2.ErrCodeNo {
			t.Fatalf("fields %q: %v", f.fields, code)
		}
		got := st.reqv.Header
		fields, size := 0, 0
		for k, vs := range got {
			for _, v := range vs {
				fields, size = fields+1, size+len(k)+len(v)
			}
		}
		if fields != st.fields || size != st.fieldBytes {
			t.Fatalf("fields %q: counted %d values of %d bytes; the header has %d of %d", f.fields, st.fields, st.fieldBytes, fields, size)
		}
		delete(got, hdrTrailer)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("fields %q: header %q; want %q", f.fields, got, want)
		}
		for k := range got {
			if !st.keys.mayHave(k) {
				t.Fatalf("filter %#x hides %q of fields %q", st.keys, k, f.fields)
			}
		}
		c.recycle(st)
	}
}
