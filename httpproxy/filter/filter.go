package filter

import (
	"fmt"
	"net/http"
	"sync/atomic"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/httpproxy/route"
)

// Exchange is one stream as filters see it. It belongs to the stream's goroutine.
type Exchange struct {
	// Request is the downstream request (headers may be modified by filters).
	Request *route.Request
	// HealthCheck marks the request as a health check (Envoy's StreamInfo health check flag);
	// the health check filter sets it.
	HealthCheck bool
	// Routes is the connection manager's on-demand route discovery (the on_demand filter
	// uses it); nil when the connection manager offers none.
	Routes RouteDiscovery
}

// RouteDiscovery is the connection manager's half of on-demand route discovery (Envoy's
// route() and requestRouteConfigUpdate, which envoy.filters.http.on_demand drives). Methods
// are safe for concurrent use.
type RouteDiscovery interface {
	// HasRoute reports whether req has a route now.
	HasRoute(req *route.Request) bool
	// RequestUpdate asks the management server for what req lacks: the virtual host of its
	// Host (VHDS) or the route configuration of its on_demand scope (SRDS). done is closed once
	// the answer has been applied (or the subscription ended); cancel withdraws the request's
	// interest. ok is false when there is nothing to ask for, and the request goes on at once.
	RequestUpdate(req *route.Request) (done <-chan struct{}, cancel func(), ok bool)
}

// Reply is a local response a filter asks the connection manager to send instead of routing
// the request (Envoy's sendLocalReply).
type Reply struct {
	Status int
	Body   string
	// Flags are the access-log response flags to set (for example FailedLocalHealthCheck).
	Flags accesslog.ResponseFlags
	// Details is %RESPONSE_CODE_DETAILS%.
	Details string
}

// Filter is one configured HTTP filter. Methods are called on the stream's goroutine and must
// be safe for concurrent use across streams. A filter that holds resources (a registration,
// a file) implements io.Closer: the connection manager closes its filters when the
// configuration that built them goes away (its filter chain is removed and drained) or when
// building that configuration fails.
type Filter interface {
	// OnRequest is called once the request headers are complete. A non-nil Reply answers the
	// request locally; the following filters and the router do not run.
	OnRequest(x *Exchange) *Reply
	// OnResponse is called with the response headers (upstream or local) before they are
	// sent; it may modify them.
	OnResponse(x *Exchange, h http.Header)
}

// Context is what a Factory may use to build a filter.
type Context struct {
	// Clusters is the cluster manager (cluster_min_healthy_percentages reads it).
	Clusters *cluster.Manager
	// HealthCheckFailed is the server-wide flag set by the admin's POST /healthcheck/fail; nil
	// means never failed.
	HealthCheckFailed *atomic.Bool
	// LocalClusterName is --service-cluster (node.cluster).
	LocalClusterName string
}

// Factory builds a filter from its typed_config (nil when the filter has none). Errors name
// the field, the value and the rule.
type Factory func(config *anypb.Any, ctx *Context) (Filter, error)

// Registry maps filter names and type URLs to factories. Fill it before use; lookups are then
// safe for concurrent use. The zero value is not usable; call NewRegistry.
type Registry struct {
	byName map[string]Factory
	byType map[string]Factory
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{byName: map[string]Factory{}, byType: map[string]Factory{}}
}

// Register adds f under name and the type URLs. Registering a name or type twice is an error.
func (r *Registry) Register(name string, f Factory, typeURLs ...string) error {
	if _, dup := r.byName[name]; dup {
		return fmt.Errorf("filter: http filter %q is already registered", name)
	}
	for _, u := range typeURLs {
		if _, dup := r.byType[u]; dup {
			return fmt.Errorf("filter: http filter type %q is already registered", u)
		}
	}
	r.byName[name] = f
	for _, u := range typeURLs {
		r.byType[u] = f
	}
	return nil
}

// Lookup finds the factory for a filter: by typed_config type URL first, then by name.
func (r *Registry) Lookup(name string, config *anypb.Any) (Factory, bool) {
	if u := config.GetTypeUrl(); u != "" {
		if f, ok := r.byType[u]; ok {
			return f, true
		}
	}
	f, ok := r.byName[name]
	return f, ok
}

// StreamFilter is implemented by filters that also want a stream's bodies, trailers, final
// response headers and end (Envoy's decodeData/decodeTrailers/encodeHeaders/encodeData/
// encodeTrailers/onDestroy), such as the tap filter. It is optional: the connection manager
// finds it by a type assertion on the filter instances a stream uses (an ECDS filter's
// instance is the one current when the stream starts), and streams of a chain without one pay
// nothing for it.
type StreamFilter interface {
	Filter
	// NewStream is called once per stream when the request headers reach the filter (before
	// its OnRequest), on the stream's goroutine. It returns nil when the filter has no interest
	// in this stream; the connection manager then reports nothing more to it.
	NewStream(x *Exchange) Stream
}

// Stream receives one stream's parts after its request headers, in order, on the stream's
// goroutine. It has six methods because they are the six events of a stream after its
// headers; a Stream that does not care for one implements it as a no-op.
//
// Slices and headers passed in are owned by the connection manager: a body chunk is valid only
// during the call (copy what must be kept); header maps, the Exchange and its Request stay valid
// until End returns.
type Stream interface {
	// RequestBody is one chunk of the request body as it is read (the bytes the router sends
	// upstream). Empty chunks are not reported.
	RequestBody(p []byte)
	// RequestTrailers is the request's trailers (HTTP/1 chunked trailer section or HTTP/2
	// trailers), reported after the last body chunk when the request has any.
	RequestTrailers(h http.Header)
	// ResponseHeaders is the final status and response headers (upstream or local reply) as
	// they are sent downstream: after the filters' OnResponse and the connection manager's
	// server, date and x-request-id headers.
	ResponseHeaders(status int, h http.Header)
	// ResponseBody is one chunk of the response body as it is sent downstream.
	ResponseBody(p []byte)
	// ResponseTrailers is the response's trailers, when the upstream response has any; it is
	// called after the last ResponseBody.
	ResponseTrailers(h http.Header)
	// End is called once when the stream is done, before the connection manager reuses its
	// memory: for a complete response just before its last bytes are written (so what End
	// produces exists once the client has the response), otherwise when the stream is reset
	// or abandoned.
	End()
}
