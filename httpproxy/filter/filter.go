package filter

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/filterstate"
	"github.com/legateproxy/legate/logging"
	"github.com/legateproxy/legate/pool"
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
	// Downstream is the connection manager's hold on the stream (pausing it, its current
	// route, its connection); nil when it offers none (then a filter cannot pause the request).
	Downstream Downstream
	// Flags are response flags a filter sets on a request it lets go on (the fault filter's
	// DI for a delay); the connection manager adds them to the stream's.
	Flags accesslog.ResponseFlags
	// ClientIP is the downstream client's address without port, as the connection manager
	// decided it (x-forwarded-for with use_remote_address and xff_num_trusted_hops).
	ClientIP string
	// Metadata is the stream's dynamic metadata by filter namespace (Envoy's
	// StreamInfo dynamicMetadata): filters write it (jwt_authn's payload_in_metadata) for
	// later filters to read (rbac's metadata matcher). Nil until a filter sets an entry.
	Metadata map[string]*structpb.Struct
	// FilterState is the stream's filter state (Envoy's StreamInfo filterState): filters set
	// objects in it (set_filter_state) and read the stream's or its connection's (its
	// parent); the access logs read it. Nil when the connection manager offers none.
	FilterState *filterstate.State
	// Status is the response's status and ResponseLength its body's length as the upstream
	// (or the local reply) gives it (-1: unknown, 0: no body): the connection manager sets
	// both before the filters' OnResponse. A filter that rewrites the body sees the length
	// before its rewrite. A filter's OnResponse may change Status (Envoy's filters setting
	// :status): the connection manager sends the status the filters leave, when it is a
	// three-digit code.
	Status         int
	ResponseLength int64

	// Upstream is the attempt an upstream filter runs for (the router's
	// upstream_http_filters, run per attempt once the host is picked); nil for the
	// connection manager's filters.
	Upstream *Upstream

	// reqRewrite and respRewrite are the body rewriters filters asked for, in the order they
	// asked (RewriteRequestBody, RewriteResponseBody).
	reqRewrite  []BodyRewriter
	respRewrite []BodyRewriter
	holdHead    bool // HoldResponseHeaders

	// kept holds what filters keep for the stream between their calls (Keep); two inline
	// entries cover a chain's usual stateful filters without allocating.
	kept     [2]keptValue
	keptMore []keptValue
}

type keptValue struct{ key, v any }

// Upstream describes the upstream attempt an upstream filter sees (Envoy's upstream stream
// info): Request is then the attempt's own request, whose header changes go to that attempt
// only.
type Upstream struct {
	// Host is the picked host's address (%UPSTREAM_HOST%) and Cluster its cluster's name.
	Host, Cluster string
	// Attempt counts the request's attempts, 1 for the first.
	Attempt int
}

// Keep stores v for this stream under key (a filter uses itself as the key), replacing what
// was kept under key; OnResponse and a Stream read it back with Kept. It is the per-stream
// state of a filter whose instance is shared by every stream.
func (x *Exchange) Keep(key, v any) {
	for i := range x.kept {
		if k := &x.kept[i]; k.key == nil || k.key == key {
			*k = keptValue{key, v}
			return
		}
	}
	for i := range x.keptMore {
		if x.keptMore[i].key == key {
			x.keptMore[i].v = v
			return
		}
	}
	x.keptMore = append(x.keptMore, keptValue{key, v})
}

// Kept returns what Keep stored under key for this stream, or nil.
func (x *Exchange) Kept(key any) any {
	for i := range x.kept {
		if x.kept[i].key == key {
			return x.kept[i].v
		}
	}
	for i := range x.keptMore {
		if x.keptMore[i].key == key {
			return x.keptMore[i].v
		}
	}
	return nil
}

// PerFilterConfigs appends to dst the typed_per_filter_config entries called name of the
// request's current route, most specific first (weighted cluster, route, virtual host, route
// configuration), as Envoy's getAllPerFilterConfig read in reverse. See
// route.Match.PerFilterConfigs.
func (x *Exchange) PerFilterConfigs(name string, dst []*route.FilterConfig) []*route.FilterConfig {
	if x.Downstream == nil {
		return dst
	}
	return x.Downstream.Route().PerFilterConfigs(name, dst)

}

// SetMetadata merges fields into the dynamic metadata namespace ns, as Envoy's
// setDynamicMetadata does (a key already there is replaced).
func (x *Exchange) SetMetadata(ns string, fields map[string]*structpb.Value) {
	st := x.metadataNamespace(ns)
	for k, v := range fields {
		st.Fields[k] = v
	}
}

// SetMetadataValue sets one key of the dynamic metadata namespace ns.
func (x *Exchange) SetMetadataValue(ns, key string, v *structpb.Value) {
	x.metadataNamespace(ns).Fields[key] = v
}

// metadataNamespace returns the struct of namespace ns, made when missing.
func (x *Exchange) metadataNamespace(ns string) *structpb.Struct {
	if x.Metadata == nil {
		x.Metadata = map[string]*structpb.Struct{}
	}
	st := x.Metadata[ns]
	if st == nil {
		st = &structpb.Struct{}
		x.Metadata[ns] = st
	}
	if st.Fields == nil {
		st.Fields = map[string]*structpb.Value{}
	}
	return st
}

// Connection describes the stream's downstream connection; it is empty when the connection
// manager's Downstream does not tell (a test's).
func (x *Exchange) Connection() Connection {
	if c, ok := x.Downstream.(interface{ Connection() Connection }); ok {
		return c.Connection()
	}
	return Connection{}
}

// BufferedBody is the request body a Downstream.BufferBody call read whole (ext_authz's
// with_request_body sends it to the service); nil when none was read. It is the connection
// manager's memory: read it during the stream, never change it.
func (x *Exchange) BufferedBody() []byte {
	if b, ok := x.Downstream.(interface{ BufferedBody() []byte }); ok {
		return b.BufferedBody()
	}
	return nil
}

// BufferedTrailers is the trailers the upstream request carries after a Downstream.BufferBody
// call read the body whole: a filter may change the map in place (Lua's trailers()). It is
// nil when no body was read whole, or when the request carries no trailers (an HTTP/2 client
// declared none; an HTTP/1 request buffered whole goes with a content-length, without them).
func (x *Exchange) BufferedTrailers() http.Header {
	if b, ok := x.Downstream.(interface{ BufferedTrailers() http.Header }); ok {
		return b.BufferedTrailers()
	}
	return nil
}

// Body is a request or response body as a BodyRewriter reads it: the bytes that come before
// the rewriter (from the client, the upstream, or the previous rewriter) and, once Read has
// returned io.EOF, their trailers.
type Body interface {
	io.Reader
	// Trailers returns the body's trailers once Read has returned io.EOF, and nil before.
	// The rewriter may change the map in place (delete every field to send none): what it
	// leaves is what the next rewriter sees and what is forwarded. A nil map after io.EOF
	// means the body carries no trailers and none can be added (an HTTP/1 request whose
	// connection manager does not enable trailers).
	Trailers() http.Header
}

// BodyRewriter makes the body that is forwarded in place of src: the connection manager
// reads what it returns as it forwards the body, chunk by chunk, so the rewrite streams
// under the peers' flow control (nothing is read from src until the reader asks for it, and
// a slow receiver holds the sender back). The returned reader is read by one goroutine at a
// time, not always the stream's (an HTTP/2 upstream's transport reads the request body on
// its own), so it must not touch the Exchange; it reads src until io.EOF, returns io.EOF when its body is done, and returns
// another error to abort the stream (then the request, or the response already started, is
// reset). A reader that writes in its own buffer per chunk should hand each chunk on when
// src would wait (a compressor flushes per read of src) so that a streamed body keeps
// streaming. When the reader is also an io.Closer it is closed once the stream is done with
// it, whether it reached io.EOF or not.
type BodyRewriter func(src Body) io.Reader

// RewriteRequestBody asks, from OnRequest, that the request body be forwarded through rw
// (Envoy's decodeData and decodeTrailers rewriting the buffer they are given). The body is
// then forwarded without its length (chunked to an HTTP/1.1 upstream) and the request's
// content-length header is removed. Rewriters apply in the order they were asked for, the
// first filter's first. A request without a body is not rewritten. A body a filter already
// read whole (Downstream.BufferBody) is rewritten whole when the request goes on, and keeps a
// length.
func (x *Exchange) RewriteRequestBody(rw BodyRewriter) { x.reqRewrite = append(x.reqRewrite, rw) }

// RewriteResponseBody asks, from OnResponse, that the response body be sent through rw (Envoy's
// encodeData and encodeTrailers rewriting what they are given). The response is then sent
// without a content-length: chunked on HTTP/1.1 (to the connection's end on HTTP/1.0), as
// DATA frames until END_STREAM on HTTP/2. The filter sets the headers that describe the new
// body (content-encoding, content-type) in OnResponse. Rewriters apply in the reverse order of
// the filters (the one nearest the router first, as Envoy's encoder filters run). A response
// that cannot have a body (HEAD, 1xx, 204, 304, an upgrade) is not rewritten; one without a
// body (ResponseLength 0) is rewritten from an empty body, so a rewriter may give it one.
func (x *Exchange) RewriteResponseBody(rw BodyRewriter) {
	x.respRewrite = append(x.respRewrite, rw)
}

// HoldResponseHeaders asks, from OnResponse, that the response headers wait for the end of
// the rewritten body (Envoy's encodeHeaders StopIteration with the body buffered): the
// connection manager reads the body through the rewriters whole before it sends the head, so
// a rewriter may still change the header map OnResponse was given while it reads (grpc_web
// turns a non-gRPC body into grpc-message; Lua's response body()). The response then goes
// with the rewritten body's length. The rewritten body is held in memory: a rewriter that asks
// for this bounds what it produces. It has no effect without a response rewriter.
func (x *Exchange) HoldResponseHeaders() { x.holdHead = true }

// ResponseHeadersHeld reports whether a filter asked for HoldResponseHeaders.
func (x *Exchange) ResponseHeadersHeld() bool { return x.holdHead }

// RequestRewriters and ResponseRewriters are the rewriters asked for: the connection
// manager's to apply.
func (x *Exchange) RequestRewriters() []BodyRewriter  { return x.reqRewrite }
func (x *Exchange) ResponseRewriters() []BodyRewriter { return x.respRewrite }

// Connection is the downstream connection of a stream as filters see it.
type Connection struct {
	// DirectRemote is the socket's peer address.
	DirectRemote netip.AddrPort
	// Remote is the trusted client address: the socket's peer unless x-forwarded-for names
	// another (use_remote_address, xff_num_trusted_hops), as Envoy's downstream remote
	// address; its port is 0 then.
	Remote netip.AddrPort
	// Local is the address the connection was accepted on (the original destination when
	// the listener restored it).
	Local netip.AddrPort
	// TLS is the handshake's state; nil for plain text.
	TLS *tls.ConnectionState
	// ServerName is the SNI the client sent (Envoy's requested server name); "" without TLS.
	ServerName string
	// Protocol is the downstream protocol: "HTTP/1.0", "HTTP/1.1" or "HTTP/2".
	Protocol string
}

// PerFilterConfig returns the typed_per_filter_config entry called name that applies to the
// request's current route, the most specific one winning (weighted cluster, route, virtual
// host, route configuration), as Envoy's resolveMostSpecificPerFilterConfig; see
// route.Match.PerFilterConfig. ok is false when the request has no route or no level has
// an entry of that name.
func (x *Exchange) PerFilterConfig(name string) (cfg *route.FilterConfig, ok bool) {
	if x.Downstream == nil {
		return nil, false
	}
	m := x.Downstream.Route()
	if m == nil {
		return nil, false
	}
	return m.PerFilterConfig(name)
}

// Downstream is a stream as the connection manager lets a filter hold it. Methods are called
// on the stream's goroutine.
type Downstream interface {
	// Pause holds the request until ready is closed or bound passes (Envoy's decodeHeaders
	// StopIteration, with decodeData's StopIterationAndWatermark): meanwhile the request
	// body is read and buffered up to the connection's buffer limit
	// (per_connection_buffer_limit_bytes), after which reading stops and the client is held
	// back by flow control, as Envoy read-disables it; what was buffered is forwarded once
	// the request goes on. It returns at once, with gone true, when the client resets the
	// stream or closes its connection; the connection manager then ends the stream without
	// routing it, and the filter must return.
	Pause(ready <-chan struct{}, bound time.Duration) (gone bool)
	// Route is the request's route in the current route tables (nil: none).
	Route() *route.Match
	// BufferBody reads the whole request body into memory before the request goes on (it is
	// then sent upstream with its length), failing with ErrBodyTooLarge once it exceeds limit
	// bytes (Envoy's buffer filter). Another error means the client went away or sent a
	// malformed body.
	BufferBody(limit int64) error
}

// ErrBodyTooLarge is BufferBody's error for a body over its limit.
var ErrBodyTooLarge = errors.New("request body too large")

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
	// Header is added to the local reply's headers (Envoy's sendLocalReply modify_headers:
	// a CORS preflight's allow headers, a rate limit's x-ratelimit-* headers); nil adds none.
	Header http.Header
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
	// Taps is the /tap admin endpoint's registry of tap filters (a *tap.Manager, which this
	// package cannot name: tap imports it); nil when the server has no /tap.
	Taps any
	// Name is the filter's name in http_filters (or its ECDS resource name): the key of its
	// typed_per_filter_config entries.
	Name string
	// StatPrefix is the connection manager's stats prefix ("http.<stat_prefix>."), under
	// which Envoy's filters name most of their stats.
	StatPrefix string
	// Stats lists the filters' stats; nil leaves them unlisted (a configuration check).
	Stats *Stats
	// Pools are the upstream connection pools: filters that call a service (ext_authz,
	// jwt_authn's remote JWKS) reach it through its cluster with them (see Call and Dial).
	// Nil when the connection manager offers none; such filters then refuse to build.
	Pools *pool.Registry
	// Runtime returns the runtime's integer value of key, or def when unset; nil uses def.
	Runtime func(key string, def uint64) uint64
	// RuntimeFraction decides a runtime fractional percent (key, the configured default
	// numerator and denominator, the request's random value), as Envoy's featureEnabled; nil
	// uses the default.
	RuntimeFraction func(key string, numerator, denominator, random uint64) bool
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Logger returns the logger of an Envoy log component ("lua"); nil: no logs (see Log).
	Logger func(component string) *logging.Logger
}

// Log returns the logger of component, or nil (which discards) without a Logger.
func (ctx *Context) Log(component string) *logging.Logger {
	if ctx == nil || ctx.Logger == nil {
		return nil
	}
	return ctx.Logger(component)
}

// RuntimeValue is ctx.Runtime(key, def), or def without a runtime or a key.
func (ctx *Context) RuntimeValue(key string, def uint64) uint64 {
	if ctx == nil || ctx.Runtime == nil || key == "" {
		return def
	}
	return ctx.Runtime(key, def)
}

// FractionEnabled is ctx.RuntimeFraction, or the default fraction numerator/denominator
// decided by random without a runtime or a key.
func (ctx *Context) FractionEnabled(key string, numerator, denominator, random uint64) bool {
	if ctx != nil && ctx.RuntimeFraction != nil && key != "" {
		return ctx.RuntimeFraction(key, numerator, denominator, random)
	}
	if denominator == 0 {
		return false
	}
	return random%denominator < numerator
}

// Clock is ctx.Now, or time.Now.
func (ctx *Context) Clock() func() time.Time {
	if ctx == nil || ctx.Now == nil {
		// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
		return time.Now
	}
	return ctx.Now
}

// Factory builds a filter from its typed_config (nil when the filter has none). Errors name
// the field, the value and the rule.
type Factory func(config *anypb.Any, ctx *Context) (Filter, error)

// Registry maps filter names and type URLs to factories. Fill it before use; lookups are then
// safe for concurrent use. The zero value is not usable; call NewRegistry.
type Registry struct {
	byName   map[string]Factory
	byType   map[string]Factory
	perRoute map[string]PerRouteFactory // by per-route type URL
}

// PerRouteFactory makes a filter's per-route configuration from a typed_per_filter_config
// entry's typed config (Envoy's createRouteSpecificFilterConfig). Errors name the field, the
// value and the rule.
type PerRouteFactory func(config *anypb.Any) (any, error)

// routerTypeURL is the router's typed_config type: the connection manager runs the router
// itself, and Envoy's router takes no per-route configuration.
const routerTypeURL = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{byName: map[string]Factory{}, byType: map[string]Factory{}, perRoute: map[string]PerRouteFactory{}}
}

// RegisterPerRoute adds f as the maker of the per-route configurations of the given type URLs
// (a filter's typed_per_filter_config types). Registering a type twice is an error.
func (r *Registry) RegisterPerRoute(f PerRouteFactory, typeURLs ...string) error {
	for _, u := range typeURLs {
		if _, dup := r.perRoute[u]; dup {
			return fmt.Errorf("filter: per-route config type %q is already registered", u)
		}
	}
	for _, u := range typeURLs {
		r.perRoute[u] = f
	}
	return nil
}

// PerRouteConfig makes a typed_per_filter_config entry's configuration; it is
// route.Options.PerFilterConfig. As Envoy: a per-route type of a registered filter is parsed
// and checked (errors reject the route configuration even when optional); the type of a filter
// that takes no per-route configuration (the router, health_check, tap, ...) is an error
// unless optional, and then ignored. The entry's name need not be a filter of the chain, as
// in Envoy. Types no Legate filter knows are accepted and unused: they can only belong to
// filters a Legate chain cannot hold. A nil Registry accepts every entry.
func (r *Registry) PerRouteConfig(name string, config *anypb.Any, optional bool) (any, error) {
	if r == nil {
		return nil, nil
	}
	u := config.GetTypeUrl()
	if f, ok := r.perRoute[u]; ok {
		return f(config)
	}
	if _, ok := r.byType[u]; ok || u == routerTypeURL {
		if optional {
			return nil, nil
		}
		return nil, fmt.Errorf("type %q: the filter %q does not support virtual host or route specific configurations", u, name)
	}
	return nil, nil
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
