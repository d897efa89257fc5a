package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"
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

// TestGRPCWebEnvoyConfig: Envoy's gRPC-Web setup (cors then grpc_web before the router, the
// CORS policy exposing grpc-status and grpc-message, an HTTP/2 cluster) carries a browser's
// gRPC-Web call to a real gRPC server and back, the trailers as the body's last frame.
func TestGRPCWebEnvoyConfig(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("web", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	cfg := policyConfig(ln.Addr().String(), `              typed_per_filter_config:
                envoy.filters.http.cors:
                  "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy
                  allow_origin_string_match: [{prefix: "http://"}]
                  allow_methods: "GET, PUT, DELETE, POST, OPTIONS"
                  allow_headers: "keep-alive,user-agent,cache-control,content-type,content-transfer-encoding,x-accept-content-transfer-encoding,x-accept-response-streaming,x-user-agent,x-grpc-web,grpc-timeout"
                  max_age: "1728000"
                  expose_headers: "grpc-status,grpc-message"`, `          - name: envoy.filters.http.cors
            typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors}
          - name: envoy.filters.http.grpc_web
            typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.grpc_web.v3.GrpcWeb}`)
	cfg = strings.Replace(cfg, "    connect_timeout: 1s\n", `    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}
`, 1)
	p := start(t, "-c", writeConfig(t, cfg))
	msg, err := proto.Marshal(&healthpb.HealthCheckRequest{Service: "web"})
	if err != nil {
		t.Fatal(err)
	}
	frame := append([]byte{0, 0, 0, 0, byte(len(msg))}, msg...)
	client := &http.Client{Timeout: 10 * time.Second}
	code, h, body := send(t, client, http.MethodPost, "http://"+p.listenerAddr("http")+"/grpc.health.v1.Health/Check", bytes.NewReader(frame),
		"Content-Type", "application/grpc-web+proto", "X-Grpc-Web", "1", "Origin", "http://app.test")
	if code != 200 || h.Get("Content-Type") != "application/grpc-web+proto" || h.Get("Access-Control-Expose-Headers") != "grpc-status,grpc-message" {
		t.Fatalf("call = %d, headers %v; want 200 grpc-web+proto with the exposed grpc headers", code, h)
	}
	b := []byte(body)
	if len(b) < 5 || b[0] != 0 {
		t.Fatalf("body %q; want a message frame first", b)
	}
	n := 5 + int(binary.BigEndian.Uint32(b[1:5]))
	var resp healthpb.HealthCheckResponse
	if err := proto.Unmarshal(b[5:n], &resp); err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("message = %v, %v; want SERVING", &resp, err)
	}
	if tr := b[n:]; len(tr) < 5 || tr[0] != 0x80 || !strings.Contains(string(tr[5:]), "grpc-status:0\r\n") {
		t.Errorf("trailers frame = %q; want 0x80 with grpc-status:0", tr)
	}
}

// TestDecompressorEnvoyConfig: Envoy's decompressor setup (gzip, the response direction on)
// hands a gzip upstream response to the client decompressed, advertises gzip upstream, and
// counts under http.<stat_prefix>.decompressor.<name>.gzip.response.*.
func TestDecompressorEnvoyConfig(t *testing.T) {
	plain := strings.Repeat("decompressed by legate ", 100)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Echo-Accept-Encoding", r.Header.Get("Accept-Encoding"))
		zw := gzip.NewWriter(w)
		io.WriteString(zw, plain)
		zw.Close()
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	cfg := policyConfig(ln.Addr().String(), "", `          - name: envoy.filters.http.decompressor
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.decompressor.v3.Decompressor
              decompressor_library:
                name: basic
                typed_config:
                  "@type": type.googleapis.com/envoy.extensions.compression.gzip.decompressor.v3.Gzip
                  window_bits: 15
                  chunk_size: 8192
              request_direction_config:
                common_config:
                  enabled: {default_value: false, runtime_key: request_decompressor_enabled}
              response_direction_config:
                common_config:
                  ignore_no_transform_header: true`)
	p := start(t, "-c", writeConfig(t, cfg))
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}
	code, h, got := send(t, client, http.MethodGet, "http://"+p.listenerAddr("http")+"/", nil)
	if code != 200 || got != plain || h.Get("Content-Encoding") != "" || h.Get("Echo-Accept-Encoding") != "gzip" {
		t.Errorf("GET = %d, %d bytes, content-encoding %q, upstream accept-encoding %q; want 200, the plain text, none, gzip",
			code, len(got), h.Get("Content-Encoding"), h.Get("Echo-Accept-Encoding"))
	}
	prefix := "http.policy.decompressor.basic.gzip."
	for name, want := range map[string]uint64{"response.decompressed": 1, "response.total_uncompressed_bytes": uint64(len(plain)), "request.not_decompressed": 1} {
		if v, _ := p.stat(prefix + name); v != want {
			t.Errorf("%s%s = %d; want %d", prefix, name, v, want)
		}
	}
}
