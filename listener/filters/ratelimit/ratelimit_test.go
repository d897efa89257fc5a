package ratelimit

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"

	"github.com/legateproxy/legate/internal/nettest"
	"github.com/legateproxy/legate/listener/filters/chaintest"
	"github.com/legateproxy/legate/stats"
)

// rlServer is a real envoy.service.ratelimit.v3.RateLimitService: a descriptor entry valued
// "over" is over the limit, "slow" is answered only when the caller gives up; anything else
// is OK. It counts the calls and checks the domain.
type rlServer struct {
	rlsv3.UnimplementedRateLimitServiceServer
	calls atomic.Int64
}

func (s *rlServer) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	s.calls.Add(1)
	if req.GetDomain() != "tcp" {
		return nil, fmt.Errorf("domain %q", req.GetDomain())
	}
	code := rlsv3.RateLimitResponse_OK
	for _, d := range req.GetDescriptors() {
		for _, e := range d.GetEntries() {
			switch e.GetValue() {
			case "over":
				code = rlsv3.RateLimitResponse_OVER_LIMIT
			case "slow":
				<-ctx.Done()
				return nil, ctx.Err()
			}
		}
	}
	return &rlsv3.RateLimitResponse{OverallCode: code}, nil
}

// startRLS runs the service and returns it with a dialer that reaches it whatever the
// cluster (the server dials the cluster's hosts through the pools).
func startRLS(t testing.TB) (*rlServer, func(context.Context, string) (net.Conn, error)) {
	s := &rlServer{}
	addr := nettest.ServeGRPC(t, func(srv *grpc.Server) { rlsv3.RegisterRateLimitServiceServer(srv, s) })
	return s, func(ctx context.Context, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
}

func serve(t *testing.T, dial func(context.Context, string) (net.Conn, error), fields string) (string, *stats.Store, error) {
	t.Helper()
	return chaintest.Serve(t, Register, dial, fmt.Sprintf(
		`{name: envoy.filters.network.ratelimit, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.ratelimit.v3.RateLimit,
  stat_prefix: tcp_rl, domain: tcp, rate_limit_service: {grpc_service: {envoy_grpc: {cluster_name: rls}}, transport_api_version: V3}, %s}},`, fields))
}

// TestRateLimit: through a real listener and a real grpc-go rate limit service, an OK answer
// lets the connection reach the terminal filter and OVER_LIMIT closes it; the service down
// or slower than the timeout lets it on, or closes it with failure_mode_deny; the stats count
// each outcome.
func TestRateLimit(t *testing.T) {
	rls, dial := startRLS(t)
	closed := nettest.ClosedAddr(t)
	down := func(ctx context.Context, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", closed)
	}
	for _, tc := range []struct {
		name   string
		dial   func(context.Context, string) (net.Conn, error)
		fields string
		want   bool
		stats  map[string]uint64
	}{
		{"ok", dial, `descriptors: [{entries: [{key: k, value: fine}]}], timeout: 5s`, true,
			map[string]uint64{"total": 1, "ok": 1, "over_limit": 0, "cx_closed": 0}},
		{"over limit", dial, `descriptors: [{entries: [{key: a, value: b}]}, {entries: [{key: k, value: over}]}], timeout: 5s`, false,
			map[string]uint64{"total": 1, "ok": 0, "over_limit": 1, "cx_closed": 1}},
		{"down allowed", down, `descriptors: [{entries: [{key: k, value: fine}]}], timeout: 5s`, true,
			map[string]uint64{"error": 1, "failure_mode_allowed": 1, "cx_closed": 0}},
		{"down denied", down, `descriptors: [{entries: [{key: k, value: fine}]}], timeout: 5s, failure_mode_deny: true`, false,
			map[string]uint64{"error": 1, "failure_mode_allowed": 0, "cx_closed": 1}},
		{"slow allowed", dial, `descriptors: [{entries: [{key: k, value: slow}]}], timeout: 0.2s`, true,
			map[string]uint64{"error": 1, "failure_mode_allowed": 1}},
		{"slow denied", dial, `descriptors: [{entries: [{key: k, value: slow}]}], timeout: 0.2s, failure_mode_deny: true`, false,
			map[string]uint64{"error": 1, "cx_closed": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, st, err := serve(t, tc.dial, tc.fields)
			if err != nil {
				t.Fatal(err)
			}
			var wait time.Duration
			if strings.HasPrefix(tc.name, "slow") {
				wait = 200 * time.Millisecond
			}
			chaintest.Expect(t, addr, st, "ratelimit.tcp_rl.", chaintest.Verdict{Admitted: tc.want, MinWait: wait, Counters: tc.stats})
		})
	}
	if rls.calls.Load() == 0 {
		t.Error("the service was never called")
	}
}

// TestConfigErrors: missing and unimplemented fields are refused with their names.
func TestConfigErrors(t *testing.T) {
	_, dial := startRLS(t)
	for _, tc := range []struct{ fields, want string }{
		{`descriptors: []`, "Descriptors"},
		{`descriptors: [{entries: [{key: k, value: v}], limit: {requests_per_unit: 1, unit: SECOND}}]`, "descriptors[0].limit: not implemented by Legate"},
		{`descriptors: [{entries: [{key: k, value: "%DOWNSTREAM_REMOTE_ADDRESS%"}]}]`, "substitution formats are not implemented by Legate"},
	} {
		if _, _, err := serve(t, dial, tc.fields); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q", tc.fields, err, tc.want)
		}
	}
	_, _, err := chaintest.Serve(t, Register, dial,
		`{name: envoy.filters.network.ratelimit, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.ratelimit.v3.RateLimit,
  stat_prefix: s, domain: tcp, descriptors: [{entries: [{key: k, value: v}]}], rate_limit_service: {grpc_service: {google_grpc: {target_uri: x, stat_prefix: s}}}}},`)
	if err == nil || !strings.Contains(err.Error(), "google_grpc is not implemented by Legate") {
		t.Errorf("google_grpc: %v", err)
	}
}

// BenchmarkConnection measures one connection through the filter with an OK call.
func BenchmarkConnection(b *testing.B) {
	_, dial := startRLS(b)
	addr, _, err := chaintest.Serve(b, Register, dial,
		`{name: envoy.filters.network.ratelimit, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.ratelimit.v3.RateLimit,
  stat_prefix: s, domain: tcp, timeout: 5s, descriptors: [{entries: [{key: k, value: v}]}], rate_limit_service: {grpc_service: {envoy_grpc: {cluster_name: rls}}}}},`)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !chaintest.Admitted(b, addr) {
			b.Fatal("refused")
		}
	}
}
