// Package grpcclient opens gRPC channels to Envoy clusters: the one way Legate's gRPC clients
// (xDS, access-log service, stats sinks) reach a collector or control plane, so each of them
// names a cluster and a GrpcService the same way and connects through the cluster's dialer.
package grpcclient

import (
	"context"
	"fmt"
	"net"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Dial connects to a host of the named cluster, with the cluster's TLS if it has one.
type Dial func(ctx context.Context, cluster string) (net.Conn, error)

// New returns a channel whose connections are dial(ctx, cluster). authority is the :authority
// of its calls; "" uses the cluster name, as Envoy's envoy_grpc does. Transport security is the
// dialer's: the channel itself is plain text over what dial returns.
func New(cluster, authority string, dial Dial, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	if authority == "" {
		authority = cluster
	}
	opts = append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return dial(ctx, cluster) }),
		grpc.WithAuthority(authority),
	}, opts...)
	conn, err := grpc.NewClient("passthrough:///"+cluster, opts...)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", cluster, err)
	}
	return conn, nil
}

// EnvoyGrpc checks a GrpcService that must name a cluster (envoy_grpc) and returns the cluster
// and authority. google_grpc and retry_policy are refused as not implemented; exists (nil
// accepts any) says whether the cluster may be used. path names gs in errors. The caller decides
// about initial_metadata and timeout, which differ between its users.
func EnvoyGrpc(path string, gs *corev3.GrpcService, exists func(string) bool) (cluster, authority string, err error) {
	eg := gs.GetEnvoyGrpc()
	switch {
	case gs == nil:
		return "", "", fmt.Errorf("%s: required (the service's cluster)", path)
	case eg == nil:
		return "", "", fmt.Errorf("%s: only envoy_grpc is implemented; google_grpc is not implemented by Legate", path)
	case gs.GetRetryPolicy() != nil:
		return "", "", fmt.Errorf("%s.retry_policy: not implemented by Legate", path)
	case exists != nil && !exists(eg.GetClusterName()):
		return "", "", fmt.Errorf("%s.envoy_grpc.cluster_name = %q; unknown cluster", path, eg.GetClusterName())
	}
	return eg.GetClusterName(), eg.GetAuthority(), nil
}

// InitialMetadata is gs.initial_metadata as the key, value pairs of
// metadata.AppendToOutgoingContext: keys lower-cased, raw_value when value is empty. path
// names gs in errors.
func InitialMetadata(path string, gs *corev3.GrpcService) ([]string, error) {
	var kv []string
	for i, h := range gs.GetInitialMetadata() {
		if h.GetKey() == "" {
			return nil, fmt.Errorf("%s.initial_metadata[%d].key: empty", path, i)
		}
		v := h.GetValue()
		if v == "" {
			v = string(h.GetRawValue())
		}
		kv = append(kv, strings.ToLower(h.GetKey()), v)
	}
	return kv, nil
}
