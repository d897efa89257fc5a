package httpproxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/http1"
)

func TestParseHead(t *testing.T) {
	tests := []struct {
		name   string
		head   string
		want   http1.RequestHead
		header http.Header
		err    error
	}{
		{
			name:   "simple",
			head:   "GET /a?b=c HTTP/1.1\r\nHost: example.com\r\nUser-Agent: t\r\naccept: */*\r\n",
			want:   head("GET", "/a?b=c", 1, "example.com", func(rh *http1.RequestHead) {}),
			header: http.Header{"User-Agent": {"t"}, "Accept": {"*/*"}},
		},
		{
			name:   "http/1.0 keep-alive and hop-by-hop",
			head:   "GET / HTTP/1.0\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: 5\r\nX-Other: 2\r\n",
			want:   head("GET", "/", 0, "", func(rh *http1.RequestHead) { rh.Connection, rh.Close = "keep-alive, X-Hop", false }),
			header: http.Header{"X-Other": {"2"}},
		},
		{
			name: "connection close, repeated header, content length",
			head: "POST /p HTTP/1.1\r\nHost: h\r\nConnection: close\r\nX-A: 1\r\nX-A: 2\r\nContent-Length: 5\r\nExpect: 100-continue\r\n",
			want: head("POST", "/p", 1, "h", func(rh *http1.RequestHead) {
				rh.Framing, rh.Close, rh.Expect100, rh.Connection = http1.Framing{Mode: http1.Length, Length: 5}, true, true, "close"
			}),
			header: http.Header{"X-A": {"1", "2"}, "Content-Length": {"5"}},
		},
		{
			name:   "absolute form",
			head:   "GET http://other.example:8080/x HTTP/1.1\r\nHost: ignored\r\n",
			want:   head("GET", "/x", 1, "other.example:8080", func(rh *http1.RequestHead) { rh.Authority, rh.Absolute = "other.example:8080", true }),
			header: http.Header{},
		},
		{name: "conflicting lengths", head: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n", err: http1.ErrMalformed},
		{name: "negative length", head: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n", err: http1.ErrMalformed},
		{name: "bad target", head: "GET x HTTP/1.1\r\nHost: h\r\n", err: http1.ErrMalformed},
		{name: "control in value", head: "GET / HTTP/1.1\r\nHost: h\r\nA: b\x01\r\n", err: http1.ErrMalformed},
		{name: "bare LF", head: "GET / HTTP/1.1\nHost: h\r\n", err: http1.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			var vals []string
			var got http1.RequestHead
			err := parseHead(&got, tt.head, h, new(inIndex), &vals, 100, &config.HTTP1Options{}, nil)
			if !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
				t.Fatalf("parseHead() error = %v; want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseHead() head (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.header, h); diff != "" {
				t.Errorf("parseHead() header (-want +got):\n%s", diff)
			}
		})
	}
}

// head builds the expected head of a request with no body.
func head(method, target string, minor int, host string, more func(*http1.RequestHead)) http1.RequestHead {
	rh := http1.RequestHead{RequestLine: http1.RequestLine{Method: method, Target: target, Minor: minor}, Host: host, HasHost: host != ""}
	rh.Close = minor == 0
	more(&rh)
	rh.Framing.Close = rh.Close
	return rh
}

func TestCanonicalKey(t *testing.T) {
	for in, want := range map[string]string{
		"host": "Host", "x-request-id": "X-Request-Id", "X-Custom-THING": "X-Custom-Thing",
		"Content-Type": "Content-Type", "etag": "Etag", "a": "A",
		strings.Repeat("ab-", 30): strings.Repeat("Ab-", 30),
	} {
		if got := canonicalKey(in); got != want {
			t.Errorf("canonicalKey(%q) = %q; want %q", in, got, want)
		}
	}
}

// TestCommonKeysAreCanonical: every common key is canonical, and a name spelling one in any
// case canonicalizes to it without allocating.
func TestCommonKeysAreCanonical(t *testing.T) {
	for _, k := range commonKeys {
		if c := http.CanonicalHeaderKey(k); c != k {
			t.Errorf("common key %q is not canonical (%q)", k, c)
		}
		for _, name := range []string{k, strings.ToLower(k), strings.ToUpper(k)} {
			var got string
			if allocs := testing.AllocsPerRun(10, func() { got = canonicalKey(name) }); got != k || allocs != 0 {
				t.Errorf("canonicalKey(%q) = %q with %v allocations; want %q without", name, got, allocs, k)
			}
		}
	}
}

// canonicalSlowBefore is canonicalSlow as it was before commonKey: the name canonicalized
// into a buffer, then looked up in a map of the common keys. FuzzCanonicalKey holds
// canonicalKey to it.
func canonicalSlowBefore(name string) string {
	buf := []byte(name)
	upper := true
	for i, c := range buf {
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
		upper = c == '-'
	}
	for _, k := range commonKeys {
		if k == string(buf) {
			return k
		}
	}
	return string(buf)
}

// FuzzCanonicalKey holds canonicalKey to canonicalSlowBefore, for valid field names.
func FuzzCanonicalKey(f *testing.F) {
	for _, s := range []string{"user-agent", "USER-AGENT", "uSeR-aGeNt", "x-custom", "Host", "te", "tE", "x-envoy-upstream-rq-timeout-ms", "a", "user-agenx", "5ser-agent", "x-envoy-retry-ox", "X-ENVOY-INTERNAL", "x-envoy-max-retriez"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if !http1.ValidToken(name) {
			return
		}
		if got, want := canonicalKey(name), canonicalSlowBefore(name); got != want {
			t.Errorf("canonicalKey(%q) = %q; want %q", name, got, want)
		}
	})
}

// pipeConn feeds a fixed input to a reader.
type pipeConn struct {
	net.Conn
	r io.Reader
}

func (c *pipeConn) Read(p []byte) (int, error)      { return c.r.Read(p) }
func (c *pipeConn) SetReadDeadline(time.Time) error { return nil }

func TestChunkedBody(t *testing.T) {
	in := "3;ext=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nTrailer: x\r\n\r\nNEXT"
	rd := reader{conn: &pipeConn{r: strings.NewReader(in)}, buf: make([]byte, 8), max: 1 << 10, st: boundHCMStats()}
	var b bodyReader
	b.reset(&rd, http1.Framing{Mode: http1.Chunked})
	got, err := io.ReadAll(&b)
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	if want := "abc0123456789abcdef"; string(got) != want {
		t.Errorf("body = %q; want %q", got, want)
	}
	rest := string(rd.buf[rd.r:rd.w])
	more, _ := io.ReadAll(rd.conn)
	if rest+string(more) != "NEXT" {
		t.Errorf("bytes after the body = %q; want NEXT", rest+string(more))
	}
}

// FuzzParseHead checks that the HTTP/1 head scanner and parser never panic, and that what
// they accept is well formed.
func FuzzParseHead(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /x HTTP/1.0\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\nabc",
		"GET http://h/p HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
		"\r\n\r\nOPTIONS * HTTP/1.1\r\nHost: a\r\nX: a\r\nX: b\r\n\r\n",
		"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		rd := reader{conn: &pipeConn{r: bytes.NewReader(in)}, buf: make([]byte, 16), max: 4096, st: boundHCMStats()}
		for {
			head, err := rd.nextHead()
			if err != nil {
				return
			}
			if head == nil {
				if rd.fill() != nil {
					return
				}
				continue
			}
			h := http.Header{}
			var vals []string
			var rh http1.RequestHead
			err = parseHead(&rh, string(head), h, new(inIndex), &vals, 100, &config.HTTP1Options{}, nil)
			if err != nil {
				return
			}
			// A CONNECT has no target, only its authority (RFC 9112 §3.2.3).
			connect := rh.Method == http.MethodConnect && rh.Target == "" && rh.Authority != ""
			if !http1.ValidToken(rh.Method) || (rh.Target == "" && !connect) {
				t.Fatalf("accepted method %q target %q authority %q", rh.Method, rh.Target, rh.Authority)
			}
			for k := range h {
				if !http1.ValidToken(k) {
					t.Fatalf("accepted header name %q", k)
				}
			}
			return
		}
	})
}

// parseHeadByKey is how parseHead keyed a field before the parser handed it the name's
// Known: canonicalKey of every name, the hop-by-hop Keep-Alive and Proxy-Connection dropped.
func parseHeadByKey(s string, h http.Header, idx *inIndex, vals *[]string) error {
	_, err := http1.ParseRequestHead(s, 100, false, func(name, value string, _ http1.Known) {
		switch key := canonicalKey(name); key {
		case hdrKeepAlive, hdrProxyConnection:
		default:
			if !idx.lazy {
				addValue(h, vals, key, value)
			}
			idx.add(key, value)
		}
	})
	return err
}

// FuzzParseHeadKeys holds parseHead's keys (a known name's from knownKeys) to
// parseHeadByKey's: the same header map, and the same index of it while lazy.
func FuzzParseHeadKeys(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: h\r\nuser-agent: a\r\nContent-Type: b\r\nx-Request-ID: c\r\nKeep-Alive: d\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nPROXY-CONNECTION: a\r\nserver: b\r\nDATE: c\r\nTrailer: d\r\nExpect: e\r\nX-Other: f\r\n",
		"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nx-envoy-attempt-count: 2\r\nX-ENVOY-UPSTREAM-SERVICE-TIME: 3\r\nkeep-alivE : x\r\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, lazy := range []bool{false, true} {
			var idx, wantIdx inIndex
			if lazy {
				idx.reset()
				wantIdx.reset()
			}
			h, want := http.Header{}, http.Header{}
			var vals, wantVals []string
			err := parseHead(new(http1.RequestHead), s, h, &idx, &vals, 100, &config.HTTP1Options{}, nil)
			wantErr := parseHeadByKey(s, want, &wantIdx, &wantVals)
			if err != nil || wantErr != nil {
				if (err == nil) != (wantErr == nil) {
					t.Fatalf("parseHead(%q) = %v; by key %v", s, err, wantErr)
				}
				continue
			}
			if diff := cmp.Diff(want, h); diff != "" {
				t.Errorf("parseHead(%q) header (-by key +got):\n%s", s, diff)
			}
			if idx.keys != wantIdx.keys || !cmp.Equal(idx.fields, wantIdx.fields) {
				t.Errorf("parseHead(%q) index = %x %v; by key %x %v", s, idx.keys, idx.fields, wantIdx.keys, wantIdx.fields)
			}
		}
	})
}

// benchHead is a typical browser-less API request head.
const benchHead = "GET /api/v1/items?id=42 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\nAccept-Encoding: gzip\r\nX-Request-Id: 0123456789\r\nConnection: keep-alive\r\n"

// BenchmarkParseHead measures finding a request head in the read buffer and parsing it into
// the header map, the codec's part of every HTTP/1 request.
func BenchmarkParseHead(b *testing.B) {
	in := []byte(benchHead + "\r\n")
	rd := reader{buf: make([]byte, readBufferSize), max: 60 << 10, st: boundHCMStats()}
	h := http.Header{}
	var vals []string
	b.ReportAllocs()
	for b.Loop() {
		rd.r, rd.w = 0, copy(rd.buf, in)
		head, err := rd.nextHead()
		if err != nil || head == nil {
			b.Fatalf("nextHead = %q, %v", head, err)
		}
		clear(h)
		vals = vals[:0]
		if err := parseHead(new(http1.RequestHead), bytesString(head), h, new(inIndex), &vals, 100, &config.HTTP1Options{}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// boundHCMStats returns connection manager stats with their lines, as statsRegistry.acquire
// makes them.
func boundHCMStats() *hcmStats {
	st := new(hcmStats)
	st.bind()
	return st
}
