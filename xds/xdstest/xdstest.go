package xdstest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	clustersvc "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointsvc "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	extensionsvc "github.com/envoyproxy/go-control-plane/envoy/service/extension/v3"
	listenersvc "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routesvc "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	runtimesvc "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	secretsvc "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
)

// Options configure a Server. The zero value is a non-ADS server for node "" that sends no
// control_plane identifier.
type Options struct {
	// Node is the node id whose snapshot Set publishes.
	Node string
	// ADS is go-control-plane's ads flag for the snapshot cache: a state-of-the-world
	// request is answered only once it names every resource of its type in the snapshot.
	// Leave it off when a client asks for some resources later (on-demand scopes) or over
	// separate per-type streams.
	ADS bool
	// Identifier, when not empty, is sent as control_plane.identifier in every response,
	// gRPC (state of the world and delta) and REST. SetIdentifier changes it.
	Identifier string
}

// Server is go-control-plane's management server serving ADS and the CDS, EDS, LDS, RDS,
// SRDS, VHDS, SDS, RTDS and ECDS services over gRPC (h2c) and the REST gateway (HTTP/1.1) on
// one port, split by content type. It records every request it receives.
type Server struct {
	// Cache is the snapshot cache the server answers from.
	Cache cachev3.SnapshotCache

	t        testing.TB
	node     string
	received chan struct{}

	mu         sync.Mutex // guards the fields below
	addr       string
	hs         *http.Server
	gs         *grpc.Server
	cancel     context.CancelFunc
	serveErr   chan error
	sotw       []*discoveryv3.DiscoveryRequest
	delta      []*discoveryv3.DeltaDiscoveryRequest
	identifier string
}

// New starts a Server on a free port of 127.0.0.1; the test's cleanup stops it.
func New(t testing.TB, o Options) *Server {
	t.Helper()
	s := &Server{
		Cache:      cachev3.NewSnapshotCache(o.ADS, cachev3.IDHash{}, nil),
		t:          t,
		node:       o.Node,
		received:   make(chan struct{}, 1),
		identifier: o.Identifier,
	}
	s.serve("127.0.0.1:0")
	t.Cleanup(s.Stop)
	return s
}

// serve listens on addr and serves there until Stop.
func (s *Server) serve(addr string) {
	s.t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		s.t.Fatalf("listen %s: %v", addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := serverv3.NewServer(ctx, s.Cache, serverv3.CallbackFuncs{
		StreamRequestFunc: func(_ int64, r *discoveryv3.DiscoveryRequest) error {
			s.record(r, nil)
			return nil
		},
		FetchRequestFunc: func(_ context.Context, r *discoveryv3.DiscoveryRequest) error {
			s.record(r, nil)
			return nil
		},
		StreamDeltaRequestFunc: func(_ int64, r *discoveryv3.DeltaDiscoveryRequest) error {
			s.record(nil, r)
			return nil
		},
		StreamResponseFunc: func(_ context.Context, _ int64, _ *discoveryv3.DiscoveryRequest, r *discoveryv3.DiscoveryResponse) {
			r.ControlPlane = s.controlPlane()
		},
		FetchResponseFunc: func(_ *discoveryv3.DiscoveryRequest, r *discoveryv3.DiscoveryResponse) {
			r.ControlPlane = s.controlPlane()
		},
		StreamDeltaResponseFunc: func(_ int64, _ *discoveryv3.DeltaDiscoveryRequest, r *discoveryv3.DeltaDiscoveryResponse) {
			r.ControlPlane = s.controlPlane()
		},
	})
	gs := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, srv)
	clustersvc.RegisterClusterDiscoveryServiceServer(gs, srv)
	endpointsvc.RegisterEndpointDiscoveryServiceServer(gs, srv)
	listenersvc.RegisterListenerDiscoveryServiceServer(gs, srv)
	routesvc.RegisterRouteDiscoveryServiceServer(gs, srv)
	routesvc.RegisterScopedRoutesDiscoveryServiceServer(gs, srv)
	routesvc.RegisterVirtualHostDiscoveryServiceServer(gs, srv)
	secretsvc.RegisterSecretDiscoveryServiceServer(gs, srv)
	runtimesvc.RegisterRuntimeDiscoveryServiceServer(gs, srv)
	extensionsvc.RegisterExtensionConfigDiscoveryServiceServer(gs, srv)
	gw := &serverv3.HTTPGateway{Server: srv}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	hs := &http.Server{Protocols: &protocols, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			gs.ServeHTTP(w, r)
			return
		}
		body, code, err := gw.ServeHTTP(r)
		if err != nil {
			http.Error(w, err.Error(), code)
			return
		}
		w.WriteHeader(code)
		w.Write(body)
	})}
	done := make(chan error, 1)
	s.mu.Lock()
	s.addr, s.hs, s.gs, s.cancel, s.serveErr = lis.Addr().String(), hs, gs, cancel, done
	s.mu.Unlock()
	go func() { done <- hs.Serve(lis) }()
}

func (s *Server) record(r *discoveryv3.DiscoveryRequest, d *discoveryv3.DeltaDiscoveryRequest) {
	s.mu.Lock()
	if r != nil {
		s.sotw = append(s.sotw, r)
	}
	if d != nil {
		s.delta = append(s.delta, d)
	}
	s.mu.Unlock()
	select {
	case s.received <- struct{}{}:
	default:
	}
}

func (s *Server) controlPlane() *corev3.ControlPlane {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.identifier == "" {
		return nil
	}
	return &corev3.ControlPlane{Identifier: s.identifier}
}

// Addr is the host:port the server listens on.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Stop closes the server and every stream, as a crash of the management server would. It
// does nothing when the server is stopped already.
func (s *Server) Stop() {
	s.mu.Lock()
	hs, gs, cancel, done := s.hs, s.gs, s.cancel, s.serveErr
	s.hs = nil
	s.mu.Unlock()
	if hs == nil {
		return
	}
	hs.Close()
	gs.Stop()
	cancel()
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.t.Errorf("xdstest: serve: %v", err)
	}
}

// Restart serves again, on the address it had, after Stop; the snapshots and the recorded
// requests stay.
func (s *Server) Restart() {
	s.t.Helper()
	s.serve(s.Addr())
}

// SetIdentifier makes every later response carry control_plane.identifier id (none when
// empty).
func (s *Server) SetIdentifier(id string) {
	s.mu.Lock()
	s.identifier = id
	s.mu.Unlock()
}

// Set publishes a snapshot at version holding every type in resources for the server's node.
func (s *Server) Set(version string, resources map[resourcev3.Type][]types.Resource) {
	s.t.Helper()
	snap, err := cachev3.NewSnapshot(version, resources)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.Cache.SetSnapshot(context.Background(), s.node, snap); err != nil {
		s.t.Fatal(err)
	}
}

// Requests returns the state-of-the-world requests (gRPC and REST) received so far.
func (s *Server) Requests() []*discoveryv3.DiscoveryRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*discoveryv3.DiscoveryRequest(nil), s.sotw...)
}

// DeltaRequests returns the delta requests received so far.
func (s *Server) DeltaRequests() []*discoveryv3.DeltaDiscoveryRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*discoveryv3.DeltaDiscoveryRequest(nil), s.delta...)
}

// Received has a value after a request arrives (one at most, however many arrive before it
// is read), for tests that re-check a condition as the client talks to the server.
func (s *Server) Received() <-chan struct{} { return s.received }
