package e2e

import (
	"bytes"
	"compress/gzip"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// jsonBackend serves body as application/json and reports the accept-encoding it got.
func jsonBackend(t *testing.T, body string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Echo-Accept-Encoding", r.Header.Get("Accept-Encoding"))
		io.WriteString(w, body)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestCompressorEnvoyConfig: Envoy's documented compressor setup (response direction with
// min_content_length and content types, request direction off through a runtime key, a tuned
// gzip library) compresses a JSON response for a client that accepts gzip, leaves it alone
// for one that does not, and counts under http.<stat_prefix>.compressor.<name>.gzip.response.*.
func TestCompressorEnvoyConfig(t *testing.T) {
	body := `{"items": [` + strings.Repeat(`{"name": "item", "value": 42},`, 40) + `{}]}`
	cfg := policyConfig(jsonBackend(t, body), "", `          - name: envoy.filters.http.compressor
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.compressor.v3.Compressor
              response_direction_config:
                common_config:
                  min_content_length: 100
                  content_type: [text/html, application/json]
                disable_on_etag_header: true
              request_direction_config:
                common_config:
                  enabled: {default_value: false, runtime_key: request_compressor_enabled}
              compressor_library:
                name: text_optimized
                typed_config:
                  "@type": type.googleapis.com/envoy.extensions.compression.gzip.compressor.v3.Gzip
                  memory_level: 3
                  window_bits: 10
                  compression_level: BEST_COMPRESSION
                  compression_strategy: DEFAULT_STRATEGY`)
	p := start(t, "-c", writeConfig(t, cfg))
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}
	url := "http://" + p.listenerAddr("http") + "/items"
	code, h, got := send(t, client, http.MethodGet, url, nil, "Accept-Encoding", "br;q=0.9, gzip")
	if code != 200 || h.Get("Content-Encoding") != "gzip" || h.Get("Vary") != "Accept-Encoding" || h.Get("Content-Length") != "" {
		t.Fatalf("GET with gzip accepted = %d, headers %v; want 200 gzip, vary, no length", code, h)
	}
	zr, err := gzip.NewReader(bytes.NewReader([]byte(got)))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil || string(plain) != body {
		t.Errorf("decoded body = %q, %v; want the backend's", plain, err)
	}
	code, h, got = send(t, client, http.MethodGet, url, nil)
	if code != 200 || h.Get("Content-Encoding") != "" || got != body {
		t.Errorf("GET without accept-encoding = %d %q %q; want 200, identity, the body", code, h.Get("Content-Encoding"), got)
	}
	prefix := "http.policy.compressor.text_optimized.gzip."
	for name, want := range map[string]uint64{"response.compressed": 1, "response.not_compressed": 1, "response.no_accept_header": 1,
		"response.header_compressor_used": 1, "response.total_uncompressed_bytes": uint64(len(body)), "request.not_compressed": 2} {
		if v, _ := p.stat(prefix + name); v != want {
			t.Errorf("%s%s = %d; want %d", prefix, name, v, want)
		}
	}
}
