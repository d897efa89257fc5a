package httpproxy

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// writeRequest sends a GET for path with extra header fields on stream id, its header block
// split into HEADERS and CONTINUATION frames of at most 16 KiB.
func writeRequest(t testing.TB, fr *http2.Framer, id uint32, path string, extra [][2]string) {
	t.Helper()
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", path}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for _, f := range extra {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	block := b.Bytes()
	const frag = 16 << 10
	first := block[:min(frag, len(block))]
	block = block[len(first):]
	err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndHeaders: len(block) == 0, EndStream: true})
	for err == nil && len(block) > 0 {
		next := block[:min(frag, len(block))]
		block = block[len(next):]
		err = fr.WriteContinuation(id, len(block) == 0, next)
	}
	if err != nil {
		t.Fatalf("writing request: %v", err)
	}
}

// answer reads frames until stream id ends or the connection does, and returns the response
// status, "reset" or "goaway".
func answer(t testing.TB, fr *http2.Framer, id uint32) string {
	t.Helper()
	a, _, _ := strings.Cut(answerCode(t, fr, id), " ")
	return a
}

// answerCode is answer with the error code of a reset: "reset <code>".
func answerCode(t testing.TB, fr *http2.Framer, id uint32) string {
	t.Helper()
	status := ""
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading stream %d (status %q): %v", id, status, err)
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if f.StreamID == id {
				status = f.PseudoValue("status")
			}
			if f.StreamEnded() {
				return status
			}
		case *http2.DataFrame:
			if f.StreamID == id && f.StreamEnded() {
				return status
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				return "reset " + f.ErrCode.String()
			}
		case *http2.GoAwayFrame:
			return "goaway"
		}
	}
}

// manyFields is n fields "x-field-<i>: value".
func manyFields(n int) [][2]string {
	out := make([][2]string, n)
	for i := range out {
		out[i] = [2]string{fmt.Sprintf("x-field-%d", i), "value"}
	}
	return out
}

// countingEnv is a proxy in front of an upstream that answers 200 and counts the requests
// it sees.
func countingEnv(t *testing.T) (*env, *atomic.Int64) {
	reached := new(atomic.Int64)
	up := serveBothProtocols(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
	}))
	return newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm:      simpleHCM("web", ""),
	}), reached
}

// TestH2RequestHeaderLimits checks that max_headers_count and max_request_headers_kb
// (defaults 100 and 60) apply to HTTP/2 requests as to HTTP/1 ones: a request over either is
// answered 431 and never reaches the upstream, and one within both is proxied.
func TestH2RequestHeaderLimits(t *testing.T) {
	e, reached := countingEnv(t)
	big := func(n int) [][2]string { return [][2]string{{"x-big", strings.Repeat("b", n)}} }
	tests := []struct {
		name   string
		fields [][2]string
		status string
	}{
		{name: "150 headers", fields: manyFields(150), status: "431"},
		{name: "97 headers and 4 pseudo-headers", fields: manyFields(97), status: "431"},
		{name: "65 KB", fields: big(65 << 10), status: "431"},
		// A field longer than http2 decodes closes the connection.
		{name: "500 KB", fields: big(500 << 10), status: "431 or goaway"},
		// The pseudo-headers take 38 bytes, the name x-big 5.
		{name: "one byte over 60 KiB", fields: big(60<<10 - 42), status: "431"},
		{name: "96 headers and 4 pseudo-headers", fields: manyFields(96), status: "200"},
		{name: "59 KB", fields: big(59 << 10), status: "200"},
		{name: "60 KiB exactly", fields: big(60<<10 - 43), status: "200"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := reached.Load()
			fr, _ := frameClient(t, e.addr)
			writeRequest(t, fr, 1, "/", tc.fields)
			if got := answer(t, fr, 1); !strings.Contains(tc.status, got) {
				t.Fatalf("answer %s; want %s", got, tc.status)
			}
			want := int64(0)
			if tc.status == "200" {
				want = 1
			}
			if got := reached.Load() - before; got != want {
				t.Errorf("upstream saw %d requests; want %d", got, want)
			}
		})
	}
}

// TestH2UpstreamResponseHeaderLimits checks that an HTTP/2 upstream response over the limits
// HTTP/1 responses have (100 header fields, 60 KiB) is refused like a malformed HTTP/1 one:
// the stream is reset (upstream_rq_tx_reset) and the client gets 503.
func TestH2UpstreamResponseHeaderLimits(t *testing.T) {
	up := serveBothProtocols(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/many":
			for _, f := range manyFields(150) {
				w.Header().Set(f[0], f[1])
			}
		case "/big":
			w.Header().Set("x-big", strings.Repeat("b", 65<<10))
		}
		w.Write([]byte("body"))
	}))
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", h2ClusterOptions, up.Listener.Addr().String())},
		hcm:      simpleHCM("web", ""),
	})
	c := e.client()
	for _, tc := range []struct {
		path   string
		status int
		resets uint64
	}{
		{path: "/many", status: http.StatusServiceUnavailable, resets: 1},
		{path: "/big", status: http.StatusServiceUnavailable, resets: 2},
		{path: "/ok", status: http.StatusOK, resets: 2},
	} {
		resp, body := e.get(c, tc.path)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %s %q; want %d", tc.path, resp.Status, body, tc.status)
		}
		if got := e.stat("cluster.web.upstream_rq_tx_reset"); got != tc.resets {
			t.Errorf("%s: upstream_rq_tx_reset = %d; want %d", tc.path, got, tc.resets)
		}
	}
}
