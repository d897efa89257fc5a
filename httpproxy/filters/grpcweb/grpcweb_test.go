package grpcweb

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/registry"
)

func TestFromAny(t *testing.T) {
	if _, err := FromAny(nil); err != nil {
		t.Errorf("FromAny(nil) = %v; want the filter (it has no configuration)", err)
	}
	if _, err := FromAny(filtertest.MustAny(t, &healthpb.HealthCheckRequest{})); err == nil || !strings.Contains(err.Error(), "want "+TypeURL) {
		t.Errorf("FromAny(another type) error = %v; want the type it takes", err)
	}
}

// grpcServer runs a gRPC health server (serving "up", not "down"; Watch streams changes) on
// 127.0.0.1 and returns its address and the health server.
func grpcServer(t *testing.T) (string, *health.Server, *grpc.Server) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("up", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s, hs)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return ln.Addr().String(), hs, s
}

// webFrame is one gRPC-Web message frame of m.
func webFrame(t *testing.T, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	f := make([]byte, 5, 5+len(b))
	binary.BigEndian.PutUint32(f[1:], uint32(len(b)))
	return append(f, b...)
}

// frame is a decoded gRPC-Web frame.
type frame struct {
	flag byte
	data []byte
}

// readFrame reads the next gRPC-Web frame.
func readFrame(r io.Reader) (frame, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return frame{}, err
	}
	data := make([]byte, binary.BigEndian.Uint32(hdr[1:]))
	_, err := io.ReadFull(r, data)
	return frame{hdr[0], data}, err
}

const grpcRoutes = `    - match: {prefix: "/unavailable"}
      direct_response: {status: 503, body: {inline_string: "no healthy upstream"}}`

func startProxy(t *testing.T) (*filtertest.Proxy, *health.Server, *grpc.Server) {
	addr, hs, gs := grpcServer(t)
	p := filtertest.Start(t, filtertest.Options{
		Clusters: []string{filtertest.StaticCluster("web", "http2_protocol_options: {}", addr)},
		HCM:      filtertest.HCM("- name: "+Name+"\n  typed_config: {\"@type\": "+TypeURL+"}", grpcRoutes),
		Register: []func(*registry.Builder){Register},
	})
	return p, hs, gs
}

// post sends a gRPC-Web request and returns the response.
func post(t *testing.T, p *filtertest.Proxy, path, ct, accept string, body []byte) *http.Response {
	req, _ := http.NewRequest(http.MethodPost, "http://"+p.Addr+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", ct)
	req.Header.Set("X-Grpc-Web", "1")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := p.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestUnary: binary and text gRPC-Web calls reach a real gRPC server over HTTP/2; the answer
// comes back as gRPC-Web with the trailers as the body's last frame.
func TestUnary(t *testing.T) {
	p, _, _ := startProxy(t)
	for _, text := range []bool{false, true} {
		name := map[bool]string{false: "binary", true: "text"}[text]
		t.Run(name, func(t *testing.T) {
			body := webFrame(t, &healthpb.HealthCheckRequest{Service: "up"})
			ct, wantCT := ctWebProto, ctWebProto
			if text {
				body = []byte(base64.StdEncoding.EncodeToString(body))
				ct, wantCT = ctWebText, ctWebTextProto
			}
			resp := post(t, p, "/grpc.health.v1.Health/Check", ct, map[bool]string{true: ctWebText}[text], body)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != wantCT {
				t.Fatalf("response %d %q; want 200 %s", resp.StatusCode, resp.Header.Get("Content-Type"), wantCT)
			}
			var r io.Reader = resp.Body
			if text {
				all, _ := io.ReadAll(resp.Body)
				r = bytes.NewReader(decodeText(t, all))
			}
			msg, err := readFrame(r)
			if err != nil || msg.flag != 0 {
				t.Fatalf("first frame = %+v, %v; want a message", msg, err)
			}
			var hc healthpb.HealthCheckResponse
			if err := proto.Unmarshal(msg.data, &hc); err != nil || hc.Status != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("message = %v, %v; want SERVING", &hc, err)
			}
			tr, err := readFrame(r)
			if err != nil || tr.flag != trailerFlag || !strings.HasPrefix(string(tr.data), "grpc-status:0\r\n") {
				t.Errorf("trailers frame = %x %q, %v; want 0x80 grpc-status:0", tr.flag, tr.data, err)
			}
			if len(resp.Trailer) != 0 {
				t.Errorf("HTTP trailers %v; want none (they are in the body)", resp.Trailer)
			}
		})
	}
	t.Run("trailers only", func(t *testing.T) {
		resp := post(t, p, "/grpc.health.v1.Health/Check", ctWeb, "", webFrame(t, &healthpb.HealthCheckRequest{Service: "unknown"}))
		rest, _ := io.ReadAll(resp.Body)
		if resp.Header.Get("Grpc-Status") != "5" || resp.Header.Get("Content-Type") != ctWebProto || len(rest) != 0 {
			t.Errorf("unknown service = grpc-status %q, %q, body %q; want 5 (NOT_FOUND) in the headers, no body", resp.Header.Get("Grpc-Status"), resp.Header.Get("Content-Type"), rest)
		}
	})
	t.Run("not gRPC", func(t *testing.T) {
		resp := post(t, p, "/unavailable", ctWebProto, "", webFrame(t, &healthpb.HealthCheckRequest{}))
		rest, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 503 || resp.Header.Get("Grpc-Status") != "14" || resp.Header.Get("Grpc-Message") != "no healthy upstream" ||
			resp.ContentLength != 0 || len(rest) != 0 {
			t.Errorf("local 503 = %d grpc-status %q grpc-message %q length %d body %q; want 503, 14, the body as message, empty",
				resp.StatusCode, resp.Header.Get("Grpc-Status"), resp.Header.Get("Grpc-Message"), resp.ContentLength, rest)
		}
	})
	t.Run("bad base64", func(t *testing.T) {
		resp := post(t, p, "/grpc.health.v1.Health/Check", ctWebText, "", []byte("AAAAA"))
		if resp.StatusCode != 400 {
			t.Errorf("bad base64 = %d; want 400", resp.StatusCode)
		}
	})
}

// decodeText decodes a grpc-web-text body, four characters at a time (each frame is padded on
// its own).
func decodeText(t *testing.T, text []byte) []byte {
	var out []byte
	for len(text) >= 4 {
		var dec [3]byte
		n, err := base64.StdEncoding.Decode(dec[:], text[:4])
		if err != nil {
			t.Fatalf("grpc-web-text body: %v", err)
		}
		out, text = append(out, dec[:n]...), text[4:]
	}
	if len(text) != 0 {
		t.Fatalf("grpc-web-text body ends with %q", text)
	}
	return out
}

// TestServerStreaming: a server-streaming call (Watch) reaches the client message by message
// while the stream is open.
func TestServerStreaming(t *testing.T) {
	p, hs, gs := startProxy(t)
	defer gs.Stop() // ends the open Watch, before the proxy shuts down
	resp := post(t, p, "/grpc.health.v1.Health/Watch", ctWebProto, "", webFrame(t, &healthpb.HealthCheckRequest{Service: "up"}))
	for _, want := range []healthpb.HealthCheckResponse_ServingStatus{healthpb.HealthCheckResponse_SERVING, healthpb.HealthCheckResponse_NOT_SERVING} {
		f, err := readFrame(resp.Body)
		if err != nil || f.flag != 0 {
			t.Fatalf("frame = %+v, %v; want a message", f, err)
		}
		var hc healthpb.HealthCheckResponse
		if err := proto.Unmarshal(f.data, &hc); err != nil || hc.Status != want {
			t.Fatalf("status = %v, %v; want %v", hc.Status, err, want)
		}
		// The next update is made only once this one arrived.
		hs.SetServingStatus("up", healthpb.HealthCheckResponse_NOT_SERVING)
	}
}

// BenchmarkUnaryBinary is the filter's own cost for a binary unary call: both headers and the
// response body with its trailers frame.
func BenchmarkUnaryBinary(b *testing.B) {
	f := &Filter{}
	msg := bytes.Repeat([]byte{1}, 100)
	b.ReportAllocs()
	for b.Loop() {
		x := filter.Exchange{Request: &route.Request{Method: http.MethodPost, Path: "/s/m", Header: http.Header{"Content-Type": {ctWebProto}}}}
		f.OnRequest(&x)
		x.Status, x.ResponseLength = 200, -1
		h := http.Header{"Content-Type": {ctGRPC}}
		f.OnResponse(&x, h)
		r := x.ResponseRewriters()[0](&body{Reader: bytes.NewReader(msg), t: http.Header{"Grpc-Status": {"0"}}})
		if _, err := io.Copy(io.Discard, r); err != nil {
			b.Fatal(err)
		}
	}
}

type body struct {
	*bytes.Reader
	t http.Header
}

func (b *body) Trailers() http.Header { return b.t }
