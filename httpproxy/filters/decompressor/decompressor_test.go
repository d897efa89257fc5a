package decompressor

import (
	"bytes"
	stdgzip "compress/gzip"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	decompressorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/decompressor/v3"
	"github.com/klauspost/compress/zstd"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/registry"
)

func libYAML(lib, extra string) string {
	return "{decompressor_library: {name: " + lib + "_lib, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.compression." + lib + ".decompressor.v3." +
		map[string]string{"gzip": "Gzip", "brotli": "Brotli", "zstd": "Zstd"}[lib] + extra + "}}"
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name, yaml, wantErr string
		check               func(t *testing.T, f *Filter)
	}{
		{name: "defaults", yaml: libYAML("gzip", "}"), check: func(t *testing.T, f *Filter) {
			if f.lib.encoding != "gzip" || f.lib.ratio != 100 || !f.advertise || !f.request.enabledDef || !f.response.enabledDef {
				t.Errorf("filter = %+v, lib %+v; want gzip, ratio 100, advertising, both directions on", f, f.lib)
			}
		}},
		{name: "settings", yaml: strings.TrimSuffix(libYAML("gzip", ", max_inflate_ratio: 10}"), "}") +
			", request_direction_config: {common_config: {enabled: {default_value: false, runtime_key: k}, ignore_no_transform_header: true}, advertise_accept_encoding: false}}", check: func(t *testing.T, f *Filter) {
			if f.lib.ratio != 10 || f.advertise || f.request != (direction{enabledKey: "k", ignoreNoTfm: true}) {
				t.Errorf("filter = %+v; want ratio 10, no advertising, the request direction's flag", f)
			}
		}},
		{name: "brotli", yaml: libYAML("brotli", "}"), check: func(t *testing.T, f *Filter) {
			if f.lib.encoding != "br" || f.lib.statPrefix != "brotli" {
				t.Errorf("lib = %+v; want br", f.lib)
			}
		}},
		{name: "no library", yaml: "{}", wantErr: "DecompressorLibrary"},
		{name: "a compressor", yaml: `{decompressor_library: {name: x, typed_config: {"@type": type.googleapis.com/google.protobuf.Empty}}}`, wantErr: "not a decompressor library"},
		{name: "ratio range", yaml: libYAML("gzip", ", max_inflate_ratio: 5000}"), wantErr: "MaxInflateRatio"},
		{name: "brotli ring buffer", yaml: libYAML("brotli", ", disable_ring_buffer_reallocation: true}"), wantErr: "not implemented by Legate"},
		{name: "zstd dictionaries", yaml: libYAML("zstd", ", dictionaries: [{inline_string: abc}]}"), wantErr: "dictionaries: not implemented by Legate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := FromAny(filtertest.AnyFromYAML(t, tt.yaml, &decompressorv3.Decompressor{}), nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("FromAny error = %v; want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, f)
		})
	}
}

// encode compresses b with an independent encoder.
func encode(t testing.TB, encoding string, b []byte) []byte {
	var buf bytes.Buffer
	var w io.WriteCloser
	switch encoding {
	case "gzip":
		w = stdgzip.NewWriter(&buf)
	case "br":
		w = brotli.NewWriter(&buf)
	case "zstd":
		zw, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w = zw
	}
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// upstream answers with the query's body encoded as ?ce= says, or with a 2 MiB zero bomb at
// /bomb, and reports the request's accept-encoding, content-encoding and body.
func upstream(t *testing.T) string {
	return filtertest.ServeHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Echo-Accept-Encoding", r.Header.Get("Accept-Encoding"))
		w.Header().Set("Echo-Content-Encoding", r.Header.Get("Content-Encoding"))
		w.Header().Set("Echo-Body", string(body))
		w.Header().Set("Content-Type", "text/plain")
		if r.URL.Path == "/bomb" {
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(encode(t, "gzip", make([]byte, 2<<20)))
			return
		}
		plain := []byte(strings.Repeat("decompressed text ", 200))
		if ce := r.URL.Query().Get("ce"); ce != "" {
			w.Header().Set("Content-Encoding", ce)
			plain = encode(t, strings.Split(ce, ",")[0], plain)
		}
		w.Write(plain)
	}))
}

// TestDecompress: responses of each library are decompressed for the client, the encoding is
// advertised upstream, a gzip request body is decompressed for the upstream, and a body that
// inflates past max_inflate_ratio is cut.
func TestDecompress(t *testing.T) {
	up := upstream(t)
	filters := "- name: gzip\n  typed_config: " + strings.Replace(libYAML("gzip", "}"), "{", "{\"@type\": "+TypeURL+", ", 1) +
		"\n- name: br\n  typed_config: " + strings.Replace(libYAML("brotli", "}"), "{", "{\"@type\": "+TypeURL+", ", 1) +
		"\n- name: zstd\n  typed_config: " + strings.Replace(libYAML("zstd", "}"), "{", "{\"@type\": "+TypeURL+", ", 1)
	p := filtertest.Start(t, filtertest.Options{
		Clusters: []string{filtertest.StaticCluster("web", "", up)},
		HCM:      filtertest.HCM(filters, ""),
		Register: []func(*registry.Builder){Register},
	})
	c := p.Client()
	want := strings.Repeat("decompressed text ", 200)
	for _, ce := range []string{"gzip", "br", "zstd"} {
		t.Run(ce, func(t *testing.T) {
			resp, body := p.Get(c, "/?ce="+ce)
			if body != want || resp.Header.Get("Content-Encoding") != "" || resp.ContentLength != -1 {
				t.Errorf("response = %d bytes, content-encoding %q, length %d; want the plain text, none, none", len(body), resp.Header.Get("Content-Encoding"), resp.ContentLength)
			}
			if got := resp.Header.Get("Echo-Accept-Encoding"); got != "gzip,br,zstd" {
				t.Errorf("upstream accept-encoding = %q; want gzip,br,zstd", got)
			}
		})
	}
	t.Run("the first coding only", func(t *testing.T) {
		resp, _ := p.Get(c, "/?ce=zstd,%20identity")
		if got := resp.Header.Get("Content-Encoding"); got != "identity" {
			t.Errorf("content-encoding = %q; want identity left", got)
		}
	})
	t.Run("request", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+p.Addr+"/", bytes.NewReader(encode(t, "gzip", []byte("posted text"))))
		req.Header.Set("Content-Encoding", "gzip")
		resp, _ := p.Do(c, req)
		if resp.Header.Get("Echo-Body") != "posted text" || resp.Header.Get("Echo-Content-Encoding") != "" {
			t.Errorf("upstream got %q, content-encoding %q; want the plain body, none", resp.Header.Get("Echo-Body"), resp.Header.Get("Echo-Content-Encoding"))
		}
	})
	t.Run("bomb", func(t *testing.T) {
		resp, err := c.Get("http://" + p.Addr + "/bomb")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err == nil || n >= 2<<20 {
			t.Errorf("bomb read %d bytes, %v; want the response cut before its end", n, err)
		}
	})
	prefix := "http.ingress.decompressor.gzip_lib.gzip."
	if got := p.Stat(prefix + "response.decompressed"); got != 2 {
		t.Errorf("gzip response.decompressed = %d; want 2 (gzip and the bomb)", got)
	}
	if got := p.Stat(prefix + "request.decompressed"); got != 1 {
		t.Errorf("gzip request.decompressed = %d; want 1", got)
	}
	if in, out := p.Stat(prefix+"request.total_compressed_bytes"), p.Stat(prefix+"request.total_uncompressed_bytes"); in == 0 || out != uint64(len("posted text")) {
		t.Errorf("gzip request bytes %d in, %d out; want some, %d", in, out, len("posted text"))
	}
}

// BenchmarkDecompress is the filter's cost for one gzip response of 4 KiB.
func BenchmarkDecompress(b *testing.B) {
	f, err := FromAny(filtertest.AnyFromYAML(b, libYAML("gzip", "}"), &decompressorv3.Decompressor{}), nil)
	if err != nil {
		b.Fatal(err)
	}
	body := encode(b, "gzip", bytes.Repeat([]byte("text to inflate "), 256))
	b.ReportAllocs()
	for b.Loop() {
		x := filter.Exchange{Request: &route.Request{Method: http.MethodGet, Path: "/", Header: http.Header{}}}
		f.OnRequest(&x)
		x.Status, x.ResponseLength = 200, int64(len(body))
		f.OnResponse(&x, http.Header{"Content-Encoding": {"gzip"}})
		r := x.ResponseRewriters()[0](benchBody{bytes.NewReader(body)})
		if _, err := io.Copy(io.Discard, r); err != nil {
			b.Fatal(err)
		}
	}
}

type benchBody struct{ *bytes.Reader }

func (benchBody) Trailers() http.Header { return nil }

// bodyOf is a filter.Body over b, without trailers.
type bodyOf struct{ io.Reader }

func (bodyOf) Trailers() http.Header { return nil }

// TestChunkSize: with chunk_size, no decode hands on more than that many bytes at once, however
// much the reader asks for; unset, Envoy's default of 4096 bounds them.
func TestChunkSize(t *testing.T) {
	var gz bytes.Buffer
	w := stdgzip.NewWriter(&gz)
	plain := make([]byte, 512<<10)
	rand.NewChaCha8([32]byte{1}).Read(plain) // incompressible: under max_inflate_ratio
	w.Write(plain)
	w.Close()
	for _, tc := range []struct {
		extra   string
		wantMax int
	}{
		{", chunk_size: 16384}", 16384},
		{"}", 4096}, // Envoy's default
	} {
		f, err := FromAny(filtertest.AnyFromYAML(t, libYAML("gzip", tc.extra), &decompressorv3.Decompressor{}), nil)
		if err != nil {
			t.Fatal(err)
		}
		z := &inflating{src: bodyOf{bytes.NewReader(gz.Bytes())}, lib: f.lib, st: &Stats{}}
		buf := make([]byte, 64<<10)
		largest, total := 0, 0
		for {
			n, err := z.Read(buf)
			largest, total = max(largest, n), total+n
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if total != 512<<10 || largest != tc.wantMax {
			t.Errorf("library%s: read %d bytes, at most %d at once; want %d, at most %d", tc.extra, total, largest, 512<<10, tc.wantMax)
		}
	}
}
