package health

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
)

// grpcHealthPath is the grpc.health.v1.Health/Check method.
const grpcHealthPath = "/grpc.health.v1.Health/Check"

// maxGRPCResponse bounds the response body a gRPC check reads.
const maxGRPCResponse = 64 << 10

// grpcProber implements grpc_health_check: one grpc.health.v1.Health/Check call over HTTP/2
// (prior knowledge in plain text, ALPN h2 over TLS). It passes only on grpc-status 0 with status
// SERVING; any other answer is an active failure, and a broken stream or connection a network
// failure.
type grpcProber struct {
	target
	hc *config.GRPCHealthCheck
}

func (p *grpcProber) Session(h *host.Host) ProbeSession {
	tr, scheme := p.transport(h, true)
	u := url.URL{Scheme: scheme, Host: p.address(h), Path: grpcHealthPath}
	msg, _ := proto.Marshal(&healthpb.HealthCheckRequest{Service: p.hc.ServiceName})
	frame := make([]byte, 5+len(msg))
	binary.BigEndian.PutUint32(frame[1:5], uint32(len(msg)))
	copy(frame[5:], msg)
	return &grpcSession{p: p, tr: tr, url: u.String(), frame: frame}
}

type grpcSession struct {
	p     *grpcProber
	tr    *http.Transport
	url   string
	frame []byte
}

func (s *grpcSession) Check(ctx context.Context) Result {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(s.frame))
	if err != nil {
		return failed(Network, err)
	}
	req.Host = s.p.authority(s.p.hc.Authority)
	req.ContentLength = int64(len(s.frame))
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	req.Header.Set("User-Agent", config.HealthCheckUserAgent)
	req.Header.Set("Grpc-Timeout", strconv.FormatInt(s.p.spec.Timeout.Milliseconds(), 10)+"m")
	applyHeaders(req.Header, s.p.hc.InitialMetadata, nil)
	resp, err := s.tr.RoundTrip(req)
	if err != nil {
		return failed(Network, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxGRPCResponse))
	if err != nil {
		return failed(Network, err)
	}
	res := s.verdict(resp, body)
	if !s.p.spec.ReuseConnection {
		s.tr.CloseIdleConnections()
	}
	return res
}

// verdict judges a complete gRPC response.
func (s *grpcSession) verdict(resp *http.Response, body []byte) Result {
	active := func(format string, args ...any) Result {
		return failed(Active, fmt.Errorf(format, args...))
	}
	// A trailers-only response carries grpc-status in its headers.
	status := resp.Trailer.Get("Grpc-Status")
	if status == "" {
		status = resp.Header.Get("Grpc-Status")
	}
	if resp.StatusCode != http.StatusOK {
		return active("HTTP status %d, grpc-status %q", resp.StatusCode, status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/grpc") {
		return active("content-type %q is not gRPC", ct)
	}
	if status == "" {
		return active("no grpc-status")
	}
	if code, err := strconv.Atoi(status); err != nil || codes.Code(code) != codes.OK {
		return active("grpc-status %s (%s)", status, resp.Trailer.Get("Grpc-Message"))
	}
	if len(body) < 5 {
		return active("no HealthCheckResponse message")
	}
	n := binary.BigEndian.Uint32(body[1:5])
	if body[0] != 0 || uint64(len(body)) != 5+uint64(n) {
		return active("invalid grpc.health.v1 RPC payload")
	}
	var msg healthpb.HealthCheckResponse
	if err := proto.Unmarshal(body[5:], &msg); err != nil {
		return active("invalid grpc.health.v1 RPC payload: %v", err)
	}
	if msg.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return active("service status %s", msg.GetStatus())
	}
	return Result{Outcome: Succeeded}
}

func (s *grpcSession) Close() { s.tr.CloseIdleConnections() }
