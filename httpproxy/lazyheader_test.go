package httpproxy

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/http1"
)

// lazyKeys are the names the differential header test looks up and changes: ones its heads
// carry, ones the connection manager and the router look up, and absent ones.
var lazyKeys = []string{
	"A", "B", "User-Agent", "X-Drop", "Content-Length", "Cookie", hdrXFF, hdrXFProto,
	hdrRequestID, hdrEnvoyInternal, hdrContentType, hdrUpstreamTimeout, hdrRetryOn, "Absent",
}

// checkLazyHeader parses head into two streams, one whose header map is filled as it is
// parsed (the eager fill, which inIndex.lazy replaces) and one whose map is filled lazily,
// then runs ops on both, the connection manager's and the router's reads and changes of the
// inbound header, and reports where their answers part: every lookup, the route table's map
// (route.Request.Headers), the upstream header's lookups, fields and map, and the filled map.
func checkLazyHeader(t *testing.T, head string, ops []byte) {
	t.Helper()
	o := &config.HTTP1Options{AllowChunkedLength: true}
	var ss [2]*stream
	var errs [2]error
	for i := range ss {
		s := &stream{hdr: http.Header{}, out: outHeader{full: http.Header{}}}
		s.in.reset()
		s.in.lazy = i == 1
		errs[i] = parseHead(new(http1.RequestHead), head, s.hdr, &s.in, &s.vals, 100, o, nil)
		s.req.Header = s.hdr
		if s.in.lazy {
			s.req.Fill = s.fillReqHeader
		}
		ss[i] = s
	}
	if (errs[0] == nil) != (errs[1] == nil) {
		t.Fatalf("head %q: eager error %v, lazy error %v", head, errs[0], errs[1])
	}
	if errs[0] != nil {
		return
	}
	eager, lazy := ss[0], ss[1]
	var trace []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("head %q after %v: %s", head, trace, fmt.Sprintf(format, args...))
	}
	for j, op := range ops {
		key := lazyKeys[int(op>>3)%len(lazyKeys)]
		value := fmt.Sprintf("v%d", j)
		trace = append(trace, fmt.Sprintf("%d:%s", op&7, key))
		for _, s := range ss {
			switch op & 7 {
			case 1:
				s.setReqHeader(key, value)
			case 2: // x-forwarded-for's append
				if old := s.inbound(key); len(old) > 0 {
					hd := s.changeHeader()
					hd[key] = []string{old[len(old)-1] + ", " + value}
				}
			case 3: // x-envoy-internal's removal
				if s.inbound(key) != nil {
					delete(s.changeHeader(), key)
				}
			case 4:
				s.req.Headers() // the route table reads a header
			case 5:
				s.looseHeader() // a filter or the tracer takes the map
			case 6:
				s.fillEntryBasics() // a header mutation's or a log's formatters
			}
		}
		if got, want := lazy.inbound(key), eager.inbound(key); !slices.Equal(got, want) {
			fail("inbound(%s) = %q; eager %q", key, got, want)
		}
		if lazy.in.exact != eager.in.exact || lazy.in.keys != eager.in.keys {
			fail("index exact %v keys %#x; eager %v %#x", lazy.in.exact, lazy.in.keys, eager.in.exact, eager.in.keys)
		}
		if lazy.in.exact && !slices.Equal(lazy.in.fields, eager.in.fields) {
			fail("fields %v; eager %v", lazy.in.fields, eager.in.fields)
		}
	}
	// The router's upstream header, by lookups, edits, fields and map.
	for _, s := range ss {
		s.out.reset(s.req.Header, &s.in, &s.vals)
	}
	for _, k := range lazyKeys {
		if got, want := lazy.out.get(k), eager.out.get(k); !slices.Equal(got, want) {
			fail("out.get(%s) = %q; eager %q", k, got, want)
		}
	}
	for _, k := range []string{hdrUpstreamTimeout, "B", "Absent"} {
		lazy.out.del(k)
		eager.out.del(k)
	}
	if got, want := lazy.out.appendFields(nil), eager.out.appendFields(nil); lazy.in.exact && !slices.Equal(got, want) {
		fail("upstream fields %v; eager %v", got, want)
	}
	if got, want := lazy.out.header(), eager.out.header(); !reflect.DeepEqual(got, want) {
		fail("upstream header %v; eager %v", got, want)
	}
	if got, want := lazy.header(), eager.header(); !reflect.DeepEqual(got, want) {
		fail("header %v; eager %v", got, want)
	}
}

// randomHead is a request head of random fields: names of lazyKeys in random case (some
// repeated), hop-by-hop ones, a Connection naming one, a chunked body with a Content-Length.
func randomHead(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString("GET / HTTP/1.1\r\nHost: x\r\n")
	for range r.IntN(10) {
		name := []byte(lazyKeys[r.IntN(len(lazyKeys)-1)]) // never Absent
		for i, c := range name {
			if r.IntN(3) == 0 {
				name[i] = c ^ 0x20*byte(bool2int(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'))
			}
		}
		switch r.IntN(12) {
		case 0:
			name = []byte("Keep-Alive")
		case 1:
			name = []byte("Connection")
			fmt.Fprintf(&b, "%s: close, x-drop\r\n", name)
			continue
		case 2:
			b.WriteString("Transfer-Encoding: chunked\r\n")
			name = []byte("Content-Length")
		}
		fmt.Fprintf(&b, "%s: %d\r\n", name, r.IntN(100))
	}
	b.WriteString("\r\n")
	return b.String()
}

func bool2int(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestLazyHeaderMatchesEager holds the lazily filled request header map (inIndex.lazy) to
// the eager fill over many random heads and sequences of the connection manager's and the
// router's reads and changes: the same lookups, upstream header and map throughout.
func TestLazyHeaderMatchesEager(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for range 5000 {
		ops := make([]byte, r.IntN(12))
		for i := range ops {
			ops[i] = byte(r.Uint32())
		}
		checkLazyHeader(t, randomHead(r), ops)
	}
}

// FuzzLazyHeader is TestLazyHeaderMatchesEager over fuzzed heads and operations.
func FuzzLazyHeader(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 5))
	for range 20 {
		f.Add(randomHead(r), []byte{byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())})
	}
	f.Add("GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 1.2.3.4\r\nx-forwarded-for: 5.6.7.8\r\n\r\n", []byte{0x32, 0x31, 0x30})
	f.Fuzz(func(t *testing.T, head string, ops []byte) {
		checkLazyHeader(t, head, ops)
	})
}
