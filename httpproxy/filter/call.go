package filter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/pool"
)

// CallResponse is the whole answer of a Call.
type CallResponse struct {
	Status int
	// Header holds the response headers in canonical form.
	Header http.Header
	Body   []byte
}

// ErrNoPools is returned by Call and Dial when the connection manager gave the filter no pools.
var ErrNoPools = errors.New("no upstream pools")

// Call sends req to a host of the named cluster through the data plane's pools (Envoy's
// async HTTP client: the cluster's balancing, connect timeout, TLS, circuit breakers and
// stats) and reads the answer whole, refusing a body over maxBody bytes. ctx bounds the
// exchange (the caller's timeout).
func Call(ctx context.Context, pools *pool.Registry, cluster string, req *pool.Request, maxBody int64) (*CallResponse, error) {
	if pools == nil {
		return nil, ErrNoPools
	}
	m := pools.Get(cluster)
	if m == nil {
		return nil, fmt.Errorf("cluster %q not found", cluster)
	}
	h, err := m.Cluster().Pick(&lb.Context{})
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", cluster, err)
	}
	var resp pool.Response
	if err := m.RoundTrip(ctx, h, req, &resp); err != nil {
		return nil, fmt.Errorf("cluster %q: %w", cluster, err)
	}
	defer resp.Close()
	out := &CallResponse{Status: resp.StatusCode, Header: make(http.Header, len(resp.Header))}
	for _, f := range resp.Header {
		out.Header.Add(string(f.Name), string(f.Value))
	}
	if resp.Body != nil {
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
		if err != nil {
			return nil, fmt.Errorf("cluster %q: reading the response body: %w", cluster, err)
		}
		if int64(len(body)) > maxBody {
			return nil, fmt.Errorf("cluster %q: response body over %d bytes", cluster, maxBody)
		}
		out.Body = body
	}
	return out, nil
}

// Dial opens a connection to a host of the named cluster for a gRPC channel, as the xDS
// client and the access-log service do (pool.Registry.Dial).
func Dial(ctx context.Context, pools *pool.Registry, cluster string) (net.Conn, error) {
	if pools == nil {
		return nil, ErrNoPools
	}
	return pools.Dial(ctx, cluster)
}
