package health

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/config"
)

// startGRPC runs grpc-go's own health server on 127.0.0.1 and records the :authority and
// metadata of the last Check.
func startGRPC(t *testing.T) (*health.Server, string, func() metadata.MD) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var last metadata.MD
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		last = md
		mu.Unlock()
		return h(ctx, req)
	}))
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(l) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return hs, l.Addr().String(), func() metadata.MD {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}

func grpcSpec(service, authority string) *config.HealthCheck {
	return spec(func(s *config.HealthCheck) {
		s.Kind = config.GRPCHealthCheckKind
		s.TCP = nil
		s.GRPC = &config.GRPCHealthCheck{ServiceName: service, Authority: authority,
			InitialMetadata: []config.HeaderToAdd{{Key: "x-hc", Value: "legate"}}}
	})
}

func TestGRPC(t *testing.T) {
	hs, addr, last := startGRPC(t)
	hs.SetServingStatus("pay", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
	for _, tc := range []struct {
		name, service, authority string
		want                     Outcome
		wantAuthority            string
	}{
		{"overall serving", "", "", Succeeded, "web"},
		{"service serving", "pay", "pay.internal", Succeeded, "pay.internal"},
		{"not serving", "down", "", Failed, "web"},
		{"unknown service", "nope", "", Failed, "web"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := probeOnce(t, grpcSpec(tc.service, tc.authority), Options{}, newHost(t, addr, 0))
			if r.Outcome != tc.want || (tc.want == Failed && r.Failure != Active) {
				t.Fatalf("Check = %+v; want %v (active failure when failing)", r, tc.want)
			}
			md := last()
			if got := md.Get(":authority"); len(got) != 1 || got[0] != tc.wantAuthority {
				t.Errorf(":authority = %q; want %q", got, tc.wantAuthority)
			}
			if got := md.Get("x-hc"); len(got) != 1 || got[0] != "legate" {
				t.Errorf("initial metadata x-hc = %q; want legate", got)
			}
			if got := md.Get("user-agent"); len(got) != 1 || got[0] != "Envoy/HC" {
				t.Errorf("user-agent = %q; want Envoy/HC", got)
			}
		})
	}
	// Shutting the service down flips it.
	hs.Shutdown()
	if r := probeOnce(t, grpcSpec("pay", ""), Options{}, newHost(t, addr, 0)); r.Outcome != Failed || r.Failure != Active {
		t.Errorf("after Shutdown: Check = %+v; want an active failure", r)
	}
}

func TestGRPCNetworkFailure(t *testing.T) {
	addr := closedAddr(t)
	if r := probeOnce(t, grpcSpec("", ""), Options{}, newHost(t, addr, 0)); r.Outcome != Failed || r.Failure != Network {
		t.Errorf("Check against a closed port = %+v; want a network failure", r)
	}
}

func TestGRPCNotGRPC(t *testing.T) {
	// An HTTP/2 server that is not gRPC answers 404 or non-gRPC content: an active failure.
	srv, _ := recordingServer(t, func(w http.ResponseWriter) { w.Write([]byte("hello")) })
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	if r := probeOnce(t, grpcSpec("", ""), Options{}, hostFor(t, srv.URL)); r.Outcome != Failed || r.Failure != Active {
		t.Errorf("Check against a plain HTTP/2 server = %+v; want an active failure", r)
	}
}

func FuzzGRPCVerdict(f *testing.F) {
	ok, _ := proto.Marshal(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
	f.Add(200, "application/grpc", "0", append([]byte{0, 0, 0, 0, byte(len(ok))}, ok...))
	f.Add(200, "application/grpc", "12", []byte{})
	f.Add(503, "text/plain", "", []byte("x"))
	f.Fuzz(func(t *testing.T, code int, contentType, status string, body []byte) {
		resp := &http.Response{StatusCode: code, Header: http.Header{"Content-Type": {contentType}},
			Trailer: http.Header{"Grpc-Status": {status}}}
		s := &grpcSession{p: &grpcProber{hc: &config.GRPCHealthCheck{}}}
		r := s.verdict(resp, body)
		if r.Outcome == Succeeded && (code != 200 || status != "0") {
			t.Errorf("verdict passed HTTP %d grpc-status %q", code, status)
		}
		if r.Outcome == Failed && r.Failure != Active {
			t.Errorf("verdict failure type %v; want ACTIVE", r.Failure)
		}
	})
}
