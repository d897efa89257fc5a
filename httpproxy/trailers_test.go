package httpproxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
)

// h2ClusterOptions makes a cluster speak prior-knowledge HTTP/2 upstream, the way gRPC
// clusters are configured in Envoy v3.
const h2ClusterOptions = `typed_extension_protocol_options:
  envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
    "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
    explicit_http_config: {http2_protocol_options: {}}`

// grpcHealthUpstream serves grpc.health.v1 on 127.0.0.1:0 with service "svc" SERVING.
func grpcHealthUpstream(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("svc", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return ln.Addr().String()
}

// TestGRPCThroughProxy calls a real gRPC server through the listener over h2c on both sides:
// the status of a call travels in the response trailers (grpc-status, grpc-message), so a
// proxy that drops them turns every call into an error ("server closed the stream without
// sending trailers").
func TestGRPCThroughProxy(t *testing.T) {
	up := grpcHealthUpstream(t)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("grpc", h2ClusterOptions, up)},
		hcm:      simpleHCM("grpc", ""),
	})
	cc, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	client := healthpb.NewHealthClient(cc)
	tests := []struct {
		name       string
		service    string
		wantCode   codes.Code
		wantMsg    string
		wantStatus healthpb.HealthCheckResponse_ServingStatus
	}{
		{name: "served", service: "svc", wantCode: codes.OK, wantStatus: healthpb.HealthCheckResponse_SERVING},
		{name: "failing call keeps code and message", service: "nope", wantCode: codes.NotFound, wantMsg: "unknown service"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: tc.service})
			st := status.Convert(err)
			if st.Code() != tc.wantCode || st.Message() != tc.wantMsg {
				t.Fatalf("Check(%q) = code %v, message %q; want %v, %q", tc.service, st.Code(), st.Message(), tc.wantCode, tc.wantMsg)
			}
			if err == nil && resp.GetStatus() != tc.wantStatus {
				t.Errorf("Check(%q).Status = %v; want %v", tc.service, resp.GetStatus(), tc.wantStatus)
			}
		})
	}
	t.Run("server streaming", func(t *testing.T) {
		// Watch sends the current status at once and then holds the stream: the message
		// must reach the client while the upstream stream is still open.
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		w, err := client.Watch(ctx, &healthpb.HealthCheckRequest{Service: "svc"})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := w.Recv()
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Watch: first message %v, %v; want SERVING", resp, err)
		}
	})
	if got := e.stat("http.ingress.downstream_rq_2xx"); got < uint64(len(tests)) {
		t.Errorf("downstream_rq_2xx = %d; want %d (gRPC errors are HTTP 200)", got, len(tests))
	}
}

// bothProtocolsEnv is a proxy in front of one upstream serving h over HTTP/1.1 and
// prior-knowledge HTTP/2: paths under /h1 go to cluster "h1" (HTTP/1.1), the rest to "h2".
// Both the connection manager and the HTTP/1 cluster set enable_trailers, without which
// Envoy's HTTP/1 codec drops trailers (TestHTTP1TrailersNeedEnableTrailers).
func bothProtocolsEnv(t *testing.T, h http.Handler) *env {
	addr := serveBothProtocols(t, h).Listener.Addr().String()
	return newEnv(t, envOptions{
		clusters: []string{staticCluster("h2", h2ClusterOptions, addr), staticCluster("h1", h1Trailers, addr)},
		hcm:      twoRouteHCM("/h1", "h1", "h2", "http_protocol_options: {enable_trailers: true}"),
	})
}

// h1Trailers is the cluster option that keeps HTTP/1 trailers both ways.
const h1Trailers = "http_protocol_options: {enable_trailers: true}"

// trailerEcho answers every request with a streamed body and trailers: x-result, and
// x-seen-<name> for each request trailer it received.
func trailerEcho() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "body")
		w.(http.Flusher).Flush() // no content-length: chunked over HTTP/1.1, as gRPC streams
		w.Header().Set(http.TrailerPrefix+"X-Result", "done")
		for k, vs := range r.Trailer {
			for _, v := range vs {
				w.Header().Add(http.TrailerPrefix+"X-Seen-"+k, v)
			}
		}
	})
}

// headerLines flattens h into sorted "name: value" lines.
func headerLines(h http.Header) []string {
	var out []string
	for k, vs := range h {
		for _, v := range vs {
			out = append(out, strings.ToLower(k)+": "+v)
		}
	}
	sort.Strings(out)
	return out
}

// TestResponseTrailersHTTP2 checks that an HTTP/2 client gets the upstream's trailers, from an
// HTTP/2 upstream and from an HTTP/1.1 chunked one, and that its own declared request
// trailers reach an HTTP/2 upstream.
func TestResponseTrailersHTTP2(t *testing.T) {
	e := bothProtocolsEnv(t, trailerEcho())
	tests := []struct {
		name    string
		path    string
		trailer http.Header // request trailers
		want    []string
	}{
		{name: "h2 upstream", path: "/h2", want: []string{"x-result: done"}},
		{name: "h2 upstream with request trailers", path: "/h2", trailer: http.Header{"Checksum": {"abc"}},
			want: []string{"x-result: done", "x-seen-checksum: abc"}},
		{name: "http1 upstream", path: "/h1", want: []string{"x-result: done"}},
	}
	c := h2cClient(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			req, err := http.NewRequest(http.MethodPost, "http://"+e.addr+tc.path, pr)
			if err != nil {
				t.Fatal(err)
			}
			req.Trailer = http.Header{}
			for k := range tc.trailer {
				req.Trailer[k] = nil // declared before the body is sent
			}
			go func() {
				io.WriteString(pw, "request body")
				for k, vs := range tc.trailer {
					req.Trailer[k] = vs
				}
				pw.Close()
			}()
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(body) != "body" {
				t.Fatalf("body = %q, %v; want \"body\"", body, err)
			}
			if diff := cmp.Diff(tc.want, headerLines(resp.Trailer)); diff != "" {
				t.Errorf("trailers (-want +got):\n%s", diff)
			}
		})
	}
}

// TestResponseTrailersHTTP1 checks the chunked trailer section an HTTP/1.1 client gets with
// enable_trailers on both sides: the upstream's trailers, whether or not the client sent
// "TE: trailers" (Envoy's codec does not look at TE), and that chunked request trailers reach
// both kinds of upstream.
func TestResponseTrailersHTTP1(t *testing.T) {
	e := bothProtocolsEnv(t, trailerEcho())
	tests := []struct {
		name  string
		path  string
		extra string // request header lines
		body  string // chunked body with its trailer section
		want  string // the response's chunked trailer section
	}{
		{name: "te trailers", path: "/h2", extra: "TE: trailers\r\n", body: "4\r\nbody\r\n0\r\n\r\n", want: "x-result: done\r\n"},
		{name: "no te", path: "/h2", body: "4\r\nbody\r\n0\r\n\r\n", want: "x-result: done\r\n"},
		{name: "request trailers forwarded", path: "/h2", extra: "TE: trailers\r\nTrailer: checksum\r\n",
			body: "4\r\nbody\r\n0\r\nChecksum: abc\r\n\r\n", want: "x-result: done\r\nx-seen-checksum: abc\r\n"},
		{name: "http1 upstream, te trailers", path: "/h1", extra: "TE: trailers\r\n", body: "4\r\nbody\r\n0\r\n\r\n", want: "x-result: done\r\n"},
		{name: "http1 upstream gets request trailers", path: "/h1",
			body: "4\r\nbody\r\n0\r\nChecksum: abc\r\n\r\n", want: "x-result: done\r\nx-seen-checksum: abc\r\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", e.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n%s\r\n%s", tc.path, tc.extra, tc.body)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK || len(resp.TransferEncoding) == 0 {
				t.Fatalf("status %d, transfer-encoding %v; want 200 chunked", resp.StatusCode, resp.TransferEncoding)
			}
			if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "body" {
				t.Fatalf("body = %q, %v; want \"body\"", b, err)
			}
			var want []string
			for l := range strings.SplitSeq(strings.TrimSuffix(tc.want, "\r\n"), "\r\n") {
				if l != "" {
					want = append(want, l)
				}
			}
			if diff := cmp.Diff(want, headerLines(resp.Trailer)); diff != "" {
				t.Errorf("trailers (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHTTP1TrailersNeedEnableTrailers: without enable_trailers, Envoy's HTTP/1 codec drops
// trailers both ways: a chunked request's trailer section reaches no upstream (HTTP/1.1 or
// HTTP/2), an HTTP/1.1 client gets no trailer section even with "TE: trailers", and an
// HTTP/1.1 upstream's trailers are not read (an HTTP/2 client gets none from it).
func TestHTTP1TrailersNeedEnableTrailers(t *testing.T) {
	addr := serveBothProtocols(t, trailerEcho()).Listener.Addr().String()
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("h2", h2ClusterOptions, addr), staticCluster("h1", "", addr)},
		hcm:      twoRouteHCM("/h1", "h1", "h2", ""),
	})
	for _, path := range []string{"/h1", "/h2"} {
		t.Run("http1 client to "+path, func(t *testing.T) {
			c, err := net.Dial("tcp", e.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nTE: trailers\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\nChecksum: abc\r\n\r\n", path)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "body" {
				t.Fatalf("body = %q, %v; want \"body\"", b, err)
			}
			if len(resp.Trailer) != 0 {
				t.Errorf("trailers = %v; want none", resp.Trailer)
			}
		})
	}
	t.Run("http2 client to an http1 upstream", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+e.addr+"/h1", strings.NewReader("body"))
		resp, err := h2cClient(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		io.ReadAll(resp.Body)
		if got := resp.Trailer.Get("X-Result"); got != "" {
			t.Errorf("x-result trailer = %q; want none (the HTTP/1 upstream's trailers are not read)", got)
		}
	})
}
