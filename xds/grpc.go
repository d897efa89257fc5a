package xds

import (
	"context"
	"fmt"
	"sync"
	"time"

	clustersvc "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointsvc "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	extensionsvc "github.com/envoyproxy/go-control-plane/envoy/service/extension/v3"
	listenersvc "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routesvc "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	runtimesvc "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	secretsvc "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/grpc"

	"github.com/legateproxy/legate/internal/grpcclient"
	"github.com/legateproxy/legate/xds/resource"
)

type (
	sotwStream  = grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]
	deltaStream = grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]
)

// runGRPC keeps a gRPC stream open: it dials the source's cluster, runs one stream until it
// fails, reports the failure to the watches and retries after a jittered exponential backoff,
// which starts over once a stream has received a response.
func (m *mux) runGRPC(ctx context.Context) {
	b := &backoff{base: m.c.backoffBase, max: m.c.backoffMax, rand: m.c.rand}
	for {
		got, err := m.grpcSession(ctx)
		if ctx.Err() != nil {
			return
		}
		if got {
			b.reset()
		}
		m.c.log.Warnf("xds: %s: stream closed: %v", m.key, err)
		m.failAll()
		m.c.notify("", "", err)
		if !m.c.sleep(ctx, b.next()) {
			return
		}
	}
}

// grpcSession runs one stream on a fresh channel. got reports whether a response arrived.
func (m *mux) grpcSession(ctx context.Context) (got bool, err error) {
	cluster := m.api.Cluster
	conn, err := grpcclient.New(cluster, m.api.Authority, m.c.dial, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<30)))
	if err != nil {
		return false, err
	}
	defer conn.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	delta := m.api.Type == resource.DeltaGRPC
	if delta {
		st, err := m.openDelta(sctx, conn)
		if err != nil {
			return false, err
		}
		return streamLoop(sctx, m, st, m.deltaRequestsLocked, m.handleDelta)
	}
	st, err := m.openSotW(sctx, conn)
	if err != nil {
		return false, err
	}
	return streamLoop(sctx, m, st, m.sotwRequestsLocked, m.handleSotW)
}

func (m *mux) openSotW(ctx context.Context, conn *grpc.ClientConn) (sotwStream, error) {
	if m.ads {
		return discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	}
	switch m.typeURL {
	case resource.ClusterType:
		return clustersvc.NewClusterDiscoveryServiceClient(conn).StreamClusters(ctx)
	case resource.EndpointType:
		return endpointsvc.NewEndpointDiscoveryServiceClient(conn).StreamEndpoints(ctx)
	case resource.ListenerType:
		return listenersvc.NewListenerDiscoveryServiceClient(conn).StreamListeners(ctx)
	case resource.RouteType:
		return routesvc.NewRouteDiscoveryServiceClient(conn).StreamRoutes(ctx)
	case resource.SecretType:
		return secretsvc.NewSecretDiscoveryServiceClient(conn).StreamSecrets(ctx)
	case resource.RuntimeType:
		return runtimesvc.NewRuntimeDiscoveryServiceClient(conn).StreamRuntime(ctx)
	case resource.ExtensionConfigType:
		return extensionsvc.NewExtensionConfigDiscoveryServiceClient(conn).StreamExtensionConfigs(ctx)
	case resource.ScopedRouteType:
		return routesvc.NewScopedRoutesDiscoveryServiceClient(conn).StreamScopedRoutes(ctx)
	}
	return nil, fmt.Errorf("no gRPC service for type %s", m.typeURL)
}

func (m *mux) openDelta(ctx context.Context, conn *grpc.ClientConn) (deltaStream, error) {
	if m.ads {
		return discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	}
	switch m.typeURL {
	case resource.ClusterType:
		return clustersvc.NewClusterDiscoveryServiceClient(conn).DeltaClusters(ctx)
	case resource.EndpointType:
		return endpointsvc.NewEndpointDiscoveryServiceClient(conn).DeltaEndpoints(ctx)
	case resource.ListenerType:
		return listenersvc.NewListenerDiscoveryServiceClient(conn).DeltaListeners(ctx)
	case resource.RouteType:
		return routesvc.NewRouteDiscoveryServiceClient(conn).DeltaRoutes(ctx)
	case resource.SecretType:
		return secretsvc.NewSecretDiscoveryServiceClient(conn).DeltaSecrets(ctx)
	case resource.RuntimeType:
		return runtimesvc.NewRuntimeDiscoveryServiceClient(conn).DeltaRuntime(ctx)
	case resource.ExtensionConfigType:
		return extensionsvc.NewExtensionConfigDiscoveryServiceClient(conn).DeltaExtensionConfigs(ctx)
	case resource.ScopedRouteType:
		return routesvc.NewScopedRoutesDiscoveryServiceClient(conn).DeltaScopedRoutes(ctx)
	case resource.VirtualHostType:
		return routesvc.NewVirtualHostDiscoveryServiceClient(conn).DeltaVirtualHosts(ctx)
	}
	return nil, fmt.Errorf("no gRPC service for type %s", m.typeURL)
}

// streamLoop sends the due requests, applies responses as they arrive and returns when the
// stream fails or ctx ends. A reader goroutine feeds responses; streamLoop waits for it.
func streamLoop[Req, Resp any](ctx context.Context, m *mux, st grpc.BidiStreamingClient[Req, Resp],
	build func(first bool) []*Req, handle func(*Resp)) (got bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	responses := make(chan *Resp)
	failed := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			r, err := st.Recv()
			if err != nil {
				failed <- err
				return
			}
			select {
			case responses <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	m.c.connected(1)
	defer func() {
		cancel()
		wg.Wait()
		m.c.connected(-1)
	}()
	m.mu.Lock()
	m.resetStreamLocked()
	m.mu.Unlock()
	first := true
	for {
		if wait := m.limitWait(); wait > 0 {
			m.c.clock.AfterFunc(wait, m.signal)
		} else {
			m.mu.Lock()
			reqs := build(first)
			m.mu.Unlock()
			for _, r := range reqs {
				if err := st.Send(r); err != nil {
					return got, recvError(failed, err)
				}
				first = false
			}
		}
		select {
		case <-ctx.Done():
			return got, ctx.Err()
		case err := <-failed:
			return got, err
		case r := <-responses:
			got = true
			handle(r)
		case <-m.wake:
		}
	}
}

// recvError prefers the stream's receive error (the server's status) over Send's io.EOF.
func recvError(failed <-chan error, sendErr error) error {
	select {
	case err := <-failed:
		return err
	// Real clock: waits on the network or the kernel, not a timing rule; a fake clock would stall it.
	case <-time.After(100 * time.Millisecond):
		return sendErr
	}
}
