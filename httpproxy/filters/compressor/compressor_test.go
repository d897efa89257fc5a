package compressor

import (
	"bytes"
	stdgzip "compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/types/known/anypb"

	compressorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/compressor/v3"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/registry"
)

// compressorYAML is a Compressor typed_config with the given library ("gzip", "brotli",
// "zstd") and extra fields.
func compressorYAML(lib, extra string) string {
	types := map[string]string{
		"gzip":   "envoy.extensions.compression.gzip.compressor.v3.Gzip",
		"brotli": "envoy.extensions.compression.brotli.compressor.v3.Brotli",
		"zstd":   "envoy.extensions.compression.zstd.compressor.v3.Zstd",
	}
	return fmt.Sprintf("{\"@type\": %s, compressor_library: {name: %s_lib, typed_config: {\"@type\": type.googleapis.com/%s}}%s}", TypeURL, lib, types[lib], extra)
}

func anyOf(t *testing.T, y string) *anypb.Any {
	t.Helper()
	var c compressorv3.Compressor
	filtertest.FromYAML(t, strings.Replace(y, "\"@type\": "+TypeURL+", ", "", 1), &c)
	a, err := anypb.New(&c)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		check   func(t *testing.T, c *config)
		wantErr string
	}{
		{name: "defaults", yaml: compressorYAML("gzip", ""), check: func(t *testing.T, c *config) {
			if c.lib.encoding != "gzip" || c.lib.chunk != 4096 || c.request != nil || c.response.minLength != 30 ||
				!c.response.types["application/json"] || len(c.response.types) != len(defaultContentTypes) || !c.response.legacyStats {
				t.Errorf("config = %+v; want gzip, chunk 4096, no request direction, min 30, Envoy's types, legacy stats", c)
			}
		}},
		{name: "legacy fields", yaml: compressorYAML("brotli", ", content_length: 100, content_type: [Text/Foo], disable_on_etag_header: true, remove_accept_encoding_header: true"), check: func(t *testing.T, c *config) {
			r := c.response
			if c.lib.encoding != "br" || r.minLength != 100 || !r.types["text/foo"] || len(r.types) != 1 || !r.disableOnEtag || !r.removeAccept {
				t.Errorf("response = %+v; want br, min 100, text/foo, etag off, remove accept", r)
			}
		}},
		{name: "directions", yaml: compressorYAML("zstd", `, content_length: 5, request_direction_config: {common_config: {min_content_length: 10, content_type: [a/b]}},
  response_direction_config: {common_config: {min_content_length: 20, enabled: {default_value: false, runtime_key: k}}, weaken_etag_on_compress: true, uncompressible_response_codes: [206]}`), check: func(t *testing.T, c *config) {
			if c.request == nil || c.request.minLength != 10 || !c.request.types["a/b"] || c.response.minLength != 20 ||
				c.response.enabled != (flag{key: "k"}) || !c.response.weakenEtag || !c.response.uncompressible[206] || c.response.legacyStats {
				t.Errorf("config = %+v, request %+v; want the directions' own settings", c, c.request)
			}
		}},
		{name: "library settings", yaml: strings.Replace(compressorYAML("gzip", ""), "Gzip}", "Gzip, compression_level: BEST_SPEED, chunk_size: 8192, window_bits: 10, memory_level: 3}", 1), check: func(t *testing.T, c *config) {
			if c.lib.chunk != 8192 {
				t.Errorf("chunk = %d; want 8192", c.lib.chunk)
			}
		}},
		{name: "no library", yaml: "{}", wantErr: "CompressorLibrary"},
		{name: "unknown library", yaml: "{compressor_library: {name: x, typed_config: {\"@type\": type.googleapis.com/google.protobuf.Empty}}}", wantErr: "not a compressor library"},
		{name: "gzip strategy", yaml: strings.Replace(compressorYAML("gzip", ""), "Gzip}", "Gzip, compression_strategy: RLE}", 1), wantErr: "compression_strategy: RLE not implemented by Legate"},
		{name: "gzip window range", yaml: strings.Replace(compressorYAML("gzip", ""), "Gzip}", "Gzip, window_bits: 20}", 1), wantErr: "WindowBits"},
		{name: "brotli mode", yaml: strings.Replace(compressorYAML("brotli", ""), "Brotli}", "Brotli, encoder_mode: TEXT}", 1), wantErr: "encoder_mode: TEXT not implemented by Legate"},
		{name: "zstd dictionary", yaml: strings.Replace(compressorYAML("zstd", ""), "Zstd}", "Zstd, dictionary: {inline_string: abc}}", 1), wantErr: "dictionary: not implemented by Legate"},
		{name: "choose_first", yaml: compressorYAML("gzip", ", choose_first: true"), wantErr: "choose_first: true not implemented by Legate"},
		{name: "status header", yaml: compressorYAML("gzip", ", response_direction_config: {status_header_enabled: true}"), wantErr: "status_header_enabled: true not implemented by Legate"},
		{name: "content type matcher", yaml: compressorYAML("gzip", ", response_direction_config: {common_config: {content_type_matcher: [{exact: a}]}}"), wantErr: "content_type_matcher: not implemented by Legate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := FromAny(anyOf(t, tt.yaml), nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("FromAny error = %v; want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, f.cfg)
		})
	}
	if _, err := FromAny(nil, nil); err == nil || !strings.Contains(err.Error(), "want "+TypeURL) {
		t.Errorf("FromAny(nil) error = %v; want the type it takes", err)
	}
}

func TestPerRouteConfig(t *testing.T) {
	perRoute := func(y string) *anypb.Any {
		var p compressorv3.CompressorPerRoute
		filtertest.FromYAML(t, y, &p)
		a, _ := anypb.New(&p)
		return a
	}
	p, err := PerRouteFromAny(perRoute("{disabled: true}"))
	if err != nil || !p.Disabled {
		t.Errorf("disabled = %+v, %v; want Disabled", p, err)
	}
	p, err = PerRouteFromAny(perRoute(`{overrides: {response_direction_config: {remove_accept_encoding_header: true},
  compressor_library: {name: b, typed_config: {"@type": type.googleapis.com/envoy.extensions.compression.brotli.compressor.v3.Brotli}}}}`))
	if err != nil || p.RemoveAccept == nil || !*p.RemoveAccept || p.lib == nil || p.lib.encoding != "br" {
		t.Errorf("overrides = %+v, %v; want remove accept and brotli", p, err)
	}
	if _, err := PerRouteFromAny(perRoute("{}")); err == nil || !strings.Contains(err.Error(), "Override") {
		t.Errorf("empty per-route error = %v; want the missing override", err)
	}
	if _, err := PerRouteFromAny(perRoute(`{overrides: {compressor_library: {name: z, typed_config: {"@type": type.googleapis.com/envoy.extensions.compression.zstd.compressor.v3.Zstd, strategy: FAST}}}}`)); err == nil || !strings.Contains(err.Error(), "not implemented by Legate") {
		t.Errorf("refused library per route error = %v; want not implemented", err)
	}
}

// TestChoose: Envoy's accept-encoding negotiation among the chain's encodings.
func TestChoose(t *testing.T) {
	tests := []struct {
		accept  string
		allowed []string
		want    decision
	}{
		{"gzip", []string{"gzip"}, decision{"gzip", validCompressor}},
		{"deflate, gzip;q=0.5", []string{"gzip"}, decision{"gzip", validCompressor}},
		{"gzip;q=0.5, br", []string{"gzip", "br"}, decision{"br", validCompressor}},
		{"gzip;q=0.5, br;q=0.5", []string{"gzip", "br"}, decision{"gzip", validCompressor}}, // the first of equals
		{"*", []string{"br", "gzip"}, decision{"br", wildcard}},
		{"gzip;q=0, *", []string{"gzip"}, decision{"identity", notValid}},
		{"gzip;q=0, *", []string{"gzip", "zstd"}, decision{"zstd", wildcard}},
		{"*;q=0, gzip;q=1", []string{"gzip"}, decision{"gzip", validCompressor}},
		{"identity, gzip;q=0.5", []string{"gzip"}, decision{"identity", identity}},
		{"deflate", []string{"gzip"}, decision{"identity", notValid}},
		{"gzip;q=abc", []string{"gzip"}, decision{"identity", notValid}},
		{"gzip;q=abc, br", []string{"gzip", "br"}, decision{"br", validCompressor}},
		{"", []string{"gzip"}, decision{"identity", notValid}},
		{"gzip", nil, decision{"identity", notValid}},
		{" gzip ; q=0.8 ,, zstd;Q=0.9", []string{"gzip", "zstd"}, decision{"zstd", validCompressor}},
	}
	for _, tt := range tests {
		if got := choose(tt.accept, tt.allowed); got != tt.want {
			t.Errorf("choose(%q, %v) = %+v; want %+v", tt.accept, tt.allowed, got, tt.want)
		}
	}
}

// upstream serves text whose size, type and headers the query sets: size (bytes, default
// 2000), ct (content-type, default text/plain), and any h-<name>=<value> header. /stream
// sends "part one " and, once release is closed, "part two".
func upstream(t *testing.T, release <-chan struct{}) string {
	return filtertest.ServeHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stream" || r.URL.Path == "/other/stream" {
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "part one ")
			w.(http.Flusher).Flush()
			<-release
			io.WriteString(w, "part two")
			return
		}
		q := r.URL.Query()
		size := 2000
		if v := q.Get("size"); v != "" {
			size, _ = strconv.Atoi(v)
		}
		w.Header().Set("Content-Type", "text/plain")
		if v := q.Get("ct"); v != "" {
			w.Header().Set("Content-Type", v)
		}
		for k, vs := range q {
			if name, ok := strings.CutPrefix(k, "h-"); ok {
				w.Header()[http.CanonicalHeaderKey(name)] = vs
			}
		}
		w.Header().Set("Echo-Accept-Encoding", r.Header.Get("Accept-Encoding"))
		w.Header().Set("Echo-Content-Encoding", r.Header.Get("Content-Encoding"))
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := stdgzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			body, err := io.ReadAll(zr)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			w.Header().Set("Echo-Body", string(body))
		}
		if v := q.Get("status"); v != "" {
			code, _ := strconv.Atoi(v)
			w.WriteHeader(code)
		}
		w.Write(bytes.Repeat([]byte("a"), size))
	}))
}

// decode undoes a content coding with an independent decoder.
func decode(t *testing.T, encoding string, body []byte) string {
	t.Helper()
	var r io.Reader
	switch encoding {
	case "gzip":
		zr, err := stdgzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("gzip: %v", err)
		}
		r = zr
	case "br":
		r = brotli.NewReader(bytes.NewReader(body))
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		r = zr
	default:
		return string(body)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("decoding %s: %v", encoding, err)
	}
	return string(out)
}

func filterEntry(yaml string) string {
	return "- name: " + Name + "\n  typed_config: " + yaml
}

// TestCompressResponses: each library's encoding, chosen by accept-encoding, decoded by an
// independent decoder; and every reason not to compress.
func TestCompressResponses(t *testing.T) {
	up := upstream(t, nil)
	filters := filterEntry(compressorYAML("gzip", ", response_direction_config: {disable_on_etag_header: true, uncompressible_response_codes: [206]}")) + "\n" +
		"- name: brotli\n  typed_config: " + compressorYAML("brotli", "") + "\n" +
		"- name: zstd\n  typed_config: " + compressorYAML("zstd", "")
	p := filtertest.Start(t, filtertest.Options{
		Clusters: []string{filtertest.StaticCluster("web", "", up)},
		HCM:      filtertest.HCM(filters, ""),
		Register: []func(*registry.Builder){Register},
	})
	c := p.Client()
	full := strings.Repeat("a", 2000)
	tests := []struct {
		name, path, accept string
		wantEncoding       string
		wantVary           bool
	}{
		{"gzip", "/", "gzip", "gzip", true},
		{"brotli", "/", "br", "br", true},
		{"zstd", "/", "zstd", "zstd", true},
		{"q-values", "/", "gzip;q=0.5, br;q=0.8, zstd;q=0.1", "br", true},
		{"wildcard", "/", "*", "gzip", true},
		{"refused everywhere", "/", "gzip;q=0, br;q=0, zstd;q=0, *", "", true},
		{"identity preferred", "/", "identity, gzip;q=0.1", "", true},
		{"no accept-encoding", "/", "", "", true},
		{"too small", "/?size=29", "gzip", "", false},
		{"exactly the minimum", "/?size=30", "gzip", "gzip", true},
		{"content type not listed", "/?ct=image/png", "gzip", "", false},
		{"content type with parameters", "/?ct=Text/HTML;%20charset=utf-8", "gzip", "gzip", true},
		{"already encoded", "/?h-content-encoding=identity", "gzip", "identity", false},
		{"no-transform", "/?h-cache-control=public,%20no-transform", "gzip", "", false},
		{"uncompressible status", "/?status=206", "gzip", "", true}, // brotli and zstd would: vary
		// The chain chooses once, by type and accept-encoding: gzip, which refuses the etag.
		{"etag refused by the chosen encoding", "/?h-etag=%22v1%22", "gzip, br;q=0.9", "", true},
		{"weak etag", "/?h-etag=W/%22v1%22", "br", "br", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := []string{}
			if tt.accept != "" {
				hdr = append(hdr, "Accept-Encoding", tt.accept)
			}
			resp, body := p.Get(c, tt.path, hdr...)
			if got := resp.Header.Get("Content-Encoding"); got != tt.wantEncoding {
				t.Fatalf("content-encoding = %q; want %q", got, tt.wantEncoding)
			}
			size := len(full)
			if v := resp.Request.URL.Query().Get("size"); v != "" {
				size, _ = strconv.Atoi(v)
			}
			if got := decode(t, tt.wantEncoding, []byte(body)); got != full[:size] {
				t.Errorf("decoded body = %d bytes; want %d a's", len(got), size)
			}
			compressed := tt.wantEncoding != "" && tt.wantEncoding != "identity"
			if compressed && (resp.ContentLength != -1 || resp.Header.Get("Content-Length") != "") {
				t.Errorf("compressed response has length %d; want none (chunked)", resp.ContentLength)
			}
			if got := resp.Header.Get("Vary") == "Accept-Encoding"; got != tt.wantVary {
				t.Errorf("vary = %q; want accept-encoding: %v", resp.Header.Get("Vary"), tt.wantVary)
			}
			if etag := resp.Header.Get("Etag"); compressed && etag != "" && !strings.HasPrefix(etag, "W/") {
				t.Errorf("a compressed response kept the strong etag %q", etag)
			}
		})
	}
	prefix := "http.ingress.compressor.gzip_lib.gzip."
	for name, want := range map[string]uint64{
		"not_compressed_etag": 2, "content_length_too_small": 1, "no_accept_header": 1, "header_identity": 1,
		"header_wildcard": 1, "header_not_valid": 2, // refused everywhere; no filter compresses image/png
	} {
		if got := p.Stat(prefix + "response." + name); got != want {
			t.Errorf("%sresponse.%s = %d; want %d", prefix, name, got, want)
		}
	}
	if got := p.Stat("http.ingress.compressor.brotli_lib.brotli." + "header_compressor_used"); got != 3 {
		t.Errorf("brotli header_compressor_used = %d; want 3 (brotli's legacy tree has no response.)", got)
	}
	if got, in := p.Stat(prefix+"response.total_compressed_bytes"), p.Stat(prefix+"response.total_uncompressed_bytes"); got == 0 || got >= in {
		t.Errorf("gzip bytes: %d compressed of %d; want fewer, more than none", got, in)
	}
}

// TestCompressStreaming: a streamed response is compressed as it streams (each upstream read
// is flushed), on HTTP/1.1 and HTTP/2, and per route the filter can be off.
func TestCompressStreaming(t *testing.T) {
	for _, proto := range []string{"http1", "h2c"} {
		t.Run(proto, func(t *testing.T) {
			release := make(chan struct{})
			up := upstream(t, release)
			p := filtertest.Start(t, filtertest.Options{
				Clusters: []string{filtertest.StaticCluster("web", "", up)},
				HCM:      filtertest.HCM(filterEntry(compressorYAML("gzip", "")), ""),
				Register: []func(*registry.Builder){Register},
			})
			c := p.Client()
			if proto == "h2c" {
				c = h2cClient(t)
			}
			req, _ := http.NewRequest(http.MethodGet, "http://"+p.Addr+"/stream", nil)
			req.Header.Set("Accept-Encoding", "gzip")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.Header.Get("Content-Encoding") != "gzip" {
				t.Fatalf("content-encoding = %q; want gzip", resp.Header.Get("Content-Encoding"))
			}
			zr, err := stdgzip.NewReader(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			first := make([]byte, len("part one "))
			// The upstream sends its second part only once the client decoded the first.
			if _, err := io.ReadFull(zr, first); err != nil || string(first) != "part one " {
				t.Fatalf("first part = %q, %v", first, err)
			}
			close(release)
			rest, err := io.ReadAll(zr)
			if err != nil || string(rest) != "part two" {
				t.Fatalf("rest = %q, %v; want part two", rest, err)
			}
		})
	}
}

// h2cClient is an HTTP/2 client over plain text (prior knowledge).
func h2cClient(t *testing.T) *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: p, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: filtertest.Wait}
}

// TestPerRoute: CompressorPerRoute turns response compression off, or changes the library
// and remove_accept_encoding_header, for one route.
func TestPerRoute(t *testing.T) {
	up := upstream(t, nil)
	routes := `      typed_per_filter_config:
        envoy.filters.http.compressor: {"@type": ` + PerRouteTypeURL + `, disabled: true}
    - match: {prefix: "/brotli"}
      route: {cluster: web}
      typed_per_filter_config:
        envoy.filters.http.compressor:
          "@type": ` + PerRouteTypeURL + `
          overrides:
            response_direction_config: {remove_accept_encoding_header: true}
            compressor_library: {name: b, typed_config: {"@type": type.googleapis.com/envoy.extensions.compression.brotli.compressor.v3.Brotli}}`
	p := filtertest.Start(t, filtertest.Options{
		Clusters: []string{filtertest.StaticCluster("web", "", up)},
		HCM:      filtertest.HCM(filterEntry(compressorYAML("gzip", "")), routes),
		Register: []func(*registry.Builder){Register},
	})
	c := p.Client()
	resp, _ := p.Get(c, "/other", "Accept-Encoding", "gzip")
	if resp.Header.Get("Content-Encoding") != "" || resp.Header.Get("Echo-Accept-Encoding") != "gzip" {
		t.Errorf("disabled route: content-encoding %q, upstream accept-encoding %q; want none, gzip", resp.Header.Get("Content-Encoding"), resp.Header.Get("Echo-Accept-Encoding"))
	}
	resp, body := p.Get(c, "/brotli", "Accept-Encoding", "br, gzip")
	if resp.Header.Get("Content-Encoding") != "br" || resp.Header.Get("Echo-Accept-Encoding") != "" || decode(t, "br", []byte(body)) != strings.Repeat("a", 2000) {
		t.Errorf("brotli route: content-encoding %q, upstream accept-encoding %q; want br, removed", resp.Header.Get("Content-Encoding"), resp.Header.Get("Echo-Accept-Encoding"))
	}
	resp, _ = p.Get(c, "/", "Accept-Encoding", "gzip")
	if resp.Header.Get("Content-Encoding") != "gzip" || resp.Header.Get("Echo-Accept-Encoding") != "gzip" {
		t.Errorf("other routes: content-encoding %q, upstream accept-encoding %q; want gzip, kept", resp.Header.Get("Content-Encoding"), resp.Header.Get("Echo-Accept-Encoding"))
	}
}

// TestCompressRequests: request_direction_config compresses a request body of a listed type
// and length; the upstream decodes it.
func TestCompressRequests(t *testing.T) {
	up := upstream(t, nil)
	p := filtertest.Start(t, filtertest.Options{
		Clusters: []string{filtertest.StaticCluster("web", "", up)},
		HCM:      filtertest.HCM(filterEntry(compressorYAML("gzip", ", request_direction_config: {common_config: {min_content_length: 10}}")), ""),
		Register: []func(*registry.Builder){Register},
	})
	c := p.Client()
	post := func(body, ct string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, "http://"+p.Addr+"/?size=1", strings.NewReader(body))
		req.Header.Set("Content-Type", ct)
		resp, _ := p.Do(c, req)
		return resp
	}
	body := strings.Repeat("request body ", 100) + "end"
	resp := post(body, "application/json")
	if resp.Header.Get("Echo-Content-Encoding") != "gzip" || resp.Header.Get("Echo-Body") != body {
		t.Errorf("upstream got content-encoding %q and %d decoded bytes; want gzip and the body", resp.Header.Get("Echo-Content-Encoding"), len(resp.Header.Get("Echo-Body")))
	}
	if resp := post("short", "application/json"); resp.Header.Get("Echo-Content-Encoding") != "" {
		t.Errorf("a body under min_content_length was compressed")
	}
	if resp := post(body, "image/png"); resp.Header.Get("Echo-Content-Encoding") != "" {
		t.Errorf("a body of an unlisted type was compressed")
	}
	prefix := "http.ingress.compressor.gzip_lib.gzip.request."
	if p.Stat(prefix+"compressed") != 1 || p.Stat(prefix+"not_compressed") != 2 || p.Stat(prefix+"content_length_too_small") != 1 ||
		p.Stat(prefix+"total_uncompressed_bytes") != uint64(len(body)) {
		t.Errorf("request stats: compressed %d, not_compressed %d, too small %d, uncompressed bytes %d; want 1, 2, 1, %d",
			p.Stat(prefix+"compressed"), p.Stat(prefix+"not_compressed"), p.Stat(prefix+"content_length_too_small"), p.Stat(prefix+"total_uncompressed_bytes"), len(body))
	}
}

// BenchmarkCompressResponse is the filter's cost for one 4 KiB text response compressed with
// gzip: the decision on both headers and the compression of the body.
func BenchmarkCompressResponse(b *testing.B) {
	for _, lib := range []string{"gzip", "brotli", "zstd"} {
		b.Run(lib, func(b *testing.B) {
			var c compressorv3.Compressor
			filtertest.FromYAML(b, strings.Replace(compressorYAML(lib, ""), "\"@type\": "+TypeURL+", ", "", 1), &c)
			a, _ := anypb.New(&c)
			f, err := FromAny(a, nil)
			if err != nil {
				b.Fatal(err)
			}
			body := bytes.Repeat([]byte("some text to compress, "), 180)
			req := &route.Request{Method: http.MethodGet, Path: "/", Header: http.Header{"Accept-Encoding": {"gzip, br, zstd"}}}
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				x := filter.Exchange{Request: req}
				f.OnRequest(&x)
				x.Status, x.ResponseLength = 200, int64(len(body))
				h := http.Header{"Content-Type": {"text/plain"}}
				f.OnResponse(&x, h)
				rws := x.ResponseRewriters()
				if len(rws) != 1 {
					b.Fatal("not compressed")
				}
				r := rws[0](&benchBody{Reader: bytes.NewReader(body)})
				if _, err := io.Copy(io.Discard, r); err != nil {
					b.Fatal(err)
				}
				r.(io.Closer).Close()
			}
		})
	}
}

type benchBody struct{ *bytes.Reader }

func (benchBody) Trailers() http.Header { return nil }
