// Package ratelimitsvc is the client of Envoy's global rate limit service
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) that the HTTP and network rate
// limit filters share: it checks a RateLimitServiceConfig, opens one gRPC channel to the
// service's cluster through the data plane's dialer, and asks about descriptors with a timeout.
//
// Concurrency: a Client is immutable and safe for concurrent use; its channel is grpc-go's,
// shared by every call. A call blocks only its caller's goroutine.
package ratelimitsvc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitconfv3 "github.com/envoyproxy/go-control-plane/envoy/config/ratelimit/v3"
	commonrlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/legateproxy/legate/internal/grpcclient"
)

// DefaultTimeout is the filters' timeout when their config sets none (Envoy's 20 ms).
const DefaultTimeout = 20 * time.Millisecond

// Target is a checked rate_limit_service.
type Target struct {
	Cluster, Authority string
	metadata           []string // initial_metadata as key, value pairs
}

// Compile checks a RateLimitServiceConfig; path names it in errors.
func Compile(c *ratelimitconfv3.RateLimitServiceConfig, path string) (Target, error) {
	if c == nil {
		return Target{}, fmt.Errorf("%s: required", path)
	}
	switch c.GetTransportApiVersion() {
	case corev3.ApiVersion_AUTO, corev3.ApiVersion_V3:
	default:
		return Target{}, fmt.Errorf("%s.transport_api_version = %v: only V3 is supported", path, c.GetTransportApiVersion())
	}
	gs := c.GetGrpcService()
	cluster, authority, err := grpcclient.EnvoyGrpc(path+".grpc_service", gs, nil)
	if err != nil {
		return Target{}, err
	}
	if cluster == "" {
		return Target{}, fmt.Errorf("%s.grpc_service.envoy_grpc.cluster_name: required", path)
	}
	if gs.GetTimeout() != nil {
		// Envoy's rate limit filters bound the call with their own timeout.
		return Target{}, fmt.Errorf("%s.grpc_service.timeout: not implemented by Legate (set the filter's timeout)", path)
	}
	eg := gs.GetEnvoyGrpc()
	if eg.GetRetryPolicy() != nil || eg.GetMaxReceiveMessageLength() != nil || eg.GetSkipEnvoyHeaders() {
		return Target{}, fmt.Errorf("%s.grpc_service.envoy_grpc: retry_policy, max_receive_message_length and skip_envoy_headers are not implemented by Legate", path)
	}
	t := Target{Cluster: cluster, Authority: authority}
	if t.metadata, err = grpcclient.InitialMetadata(path+".grpc_service", gs); err != nil {
		return Target{}, err
	}
	return t, nil
}

// Client asks one rate limit service.
type Client struct {
	t      Target
	conn   *grpc.ClientConn
	client rlsv3.RateLimitServiceClient
}

// ErrNoDialer fails every call of a client built without a dialer (a configuration check).
var ErrNoDialer = errors.New("no upstream dialer")

// New opens the service's channel (lazily: nothing is dialled before the first call). dial
// nil makes every call fail with ErrNoDialer.
func New(t Target, dial grpcclient.Dial) (*Client, error) {
	if dial == nil {
		dial = func(context.Context, string) (net.Conn, error) { return nil, ErrNoDialer }
	}
	conn, err := grpcclient.New(t.Cluster, t.Authority, dial)
	if err != nil {
		return nil, err
	}
	return &Client{t: t, conn: conn, client: rlsv3.NewRateLimitServiceClient(conn)}, nil
}

// Close closes the channel.
func (c *Client) Close() error { return c.conn.Close() }

// ShouldRateLimit asks about descriptors of domain, giving up after timeout (0: none).
func (c *Client) ShouldRateLimit(ctx context.Context, domain string, descriptors []*commonrlv3.RateLimitDescriptor, timeout time.Duration) (*rlsv3.RateLimitResponse, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if len(c.t.metadata) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, c.t.metadata...)
	}
	// An answer without a verdict (UNKNOWN) is not over the limit, as in Envoy's release builds.
	return c.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: descriptors})
}
