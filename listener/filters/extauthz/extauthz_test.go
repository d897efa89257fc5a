package extauthz

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/legateproxy/legate/internal/nettest"
	"github.com/legateproxy/legate/listener/filters/chaintest"
	"github.com/legateproxy/legate/stats"
)

// authServer is a real envoy.service.auth.v3.Authorization server whose verdict is its
// mode: "allow", "deny", or "slow" (answered only when the caller gives up). It keeps the
// last request and its initial metadata.
type authServer struct {
	authv3.UnimplementedAuthorizationServer
	mu   sync.Mutex
	mode string
	last *authv3.CheckRequest
	md   metadata.MD
}

func (s *authServer) Check(ctx context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	s.mu.Lock()
	s.last = req
	s.md, _ = metadata.FromIncomingContext(ctx)
	mode := s.mode
	s.mu.Unlock()
	switch mode {
	case "deny":
		return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(code.Code_PERMISSION_DENIED)}}, nil
	case "slow":
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(code.Code_OK)}}, nil
}

func (s *authServer) set(mode string) {
	s.mu.Lock()
	s.mode = mode
	s.mu.Unlock()
}

func startAuth(t testing.TB) (*authServer, func(context.Context, string) (net.Conn, error)) {
	s := &authServer{mode: "allow"}
	addr := nettest.ServeGRPC(t, func(srv *grpc.Server) { authv3.RegisterAuthorizationServer(srv, s) })
	return s, func(ctx context.Context, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
}

func serve(t testing.TB, dial func(context.Context, string) (net.Conn, error), fields string) (string, *stats.Store, error) {
	return chaintest.Serve(t, Register, dial, fmt.Sprintf(
		`{name: envoy.filters.network.ext_authz, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.ext_authz.v3.ExtAuthz, stat_prefix: tcp_authz, %s}},`, fields))
}

// TestCheck: through a real listener and a real grpc-go authorization server, an allowed
// connection reaches the terminal filter and a denied one is closed; the service down or
// slower than the timeout closes it, or lets it on with failure_mode_allow; the request
// names the connection's ends and carries initial_metadata; the stats count each outcome.
func TestCheck(t *testing.T) {
	auth, dial := startAuth(t)
	closed := nettest.ClosedAddr(t)
	down := func(ctx context.Context, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", closed)
	}
	svc := `grpc_service: {envoy_grpc: {cluster_name: authz}, timeout: 5s, initial_metadata: [{key: X-Tenant, value: t1}]}`
	slow := `grpc_service: {envoy_grpc: {cluster_name: authz}, timeout: 0.2s}`
	for _, tc := range []struct {
		name, mode, fields string
		dial               func(context.Context, string) (net.Conn, error)
		want               bool
		stats              map[string]uint64
	}{
		{"allow", "allow", svc, dial, true, map[string]uint64{"total": 1, "ok": 1, "cx_closed": 0}},
		{"deny", "deny", svc + ", failure_mode_allow: true", dial, false, map[string]uint64{"total": 1, "denied": 1, "cx_closed": 1}},
		{"down", "allow", svc, down, false, map[string]uint64{"error": 1, "cx_closed": 1, "failure_mode_allowed": 0}},
		{"down allowed", "allow", svc + ", failure_mode_allow: true", down, true, map[string]uint64{"error": 1, "failure_mode_allowed": 1, "cx_closed": 0}},
		{"slow", "slow", slow, dial, false, map[string]uint64{"error": 1, "cx_closed": 1}},
		{"slow allowed", "slow", slow + ", failure_mode_allow: true", dial, true, map[string]uint64{"error": 1, "failure_mode_allowed": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			auth.set(tc.mode)
			addr, st, err := serve(t, tc.dial, tc.fields)
			if err != nil {
				t.Fatal(err)
			}
			var wait time.Duration
			if strings.HasPrefix(tc.name, "slow") {
				wait = 200 * time.Millisecond
			}
			chaintest.Expect(t, addr, st, "ext_authz.tcp_authz.", chaintest.Verdict{Admitted: tc.want, MinWait: wait, Counters: tc.stats})
			if tc.name != "allow" {
				return
			}
			auth.mu.Lock()
			req, md := auth.last, auth.md
			auth.mu.Unlock()
			src := req.GetAttributes().GetSource().GetAddress().GetSocketAddress()
			dst := req.GetAttributes().GetDestination().GetAddress().GetSocketAddress()
			_, port, _ := net.SplitHostPort(addr)
			if src.GetAddress() != "127.0.0.1" || src.GetPortValue() == 0 || dst.GetAddress() != "127.0.0.1" || strconv.Itoa(int(dst.GetPortValue())) != port {
				t.Errorf("CheckRequest source %v destination %v; want 127.0.0.1 to the listener's port %s", src, dst, port)
			}
			if got := md.Get("x-tenant"); len(got) != 1 || got[0] != "t1" {
				t.Errorf("initial metadata x-tenant = %v; want t1", got)
			}
		})
	}
}

// TestConfigErrors: unimplemented fields are refused with their names; the TLS fields are
// accepted on a plain chain.
func TestConfigErrors(t *testing.T) {
	_, dial := startAuth(t)
	const svc = `grpc_service: {envoy_grpc: {cluster_name: authz}}`
	if _, _, err := serve(t, dial, svc+", include_peer_certificate: true, include_tls_session: true"); err != nil {
		t.Errorf("TLS fields on a plain chain: %v", err)
	}
	for _, tc := range []struct{ fields, want string }{
		{svc + ", send_tls_alert_on_denial: true", "send_tls_alert_on_denial: not implemented by Legate"},
		{svc + ", shadow_mode: true", "shadow_mode: not implemented by Legate"},
		{svc + ", metadata_context_namespaces: [a]", "metadata_context_namespaces: not implemented by Legate"},
		{svc + ", transport_api_version: V2", "only V3"},
		{`grpc_service: {google_grpc: {target_uri: x, stat_prefix: s}}`, "google_grpc is not implemented by Legate"},
		{`failure_mode_allow: true`, "grpc_service"},
	} {
		if _, _, err := serve(t, dial, tc.fields); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q", tc.fields, err, tc.want)
		}
	}
}

// BenchmarkConnection measures one connection through the filter with an allowed check.
func BenchmarkConnection(b *testing.B) {
	_, dial := startAuth(b)
	addr, _, err := serve(b, dial, `grpc_service: {envoy_grpc: {cluster_name: authz}, timeout: 5s}`)
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
