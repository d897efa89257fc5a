package listener

import (
	"fmt"
	"sort"
	"time"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/grpcclient"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/logging"
	"github.com/legateproxy/legate/stats"
)

// FilterChainHandler serves the connections accepted on one filter chain: the HTTP connection
// manager and the TCP proxy implement it. A handler is built once per filter chain by the
// HandlerFactory registered for the chain's terminal (last) network filter, and shared by all
// of the chain's connections, so it must be safe for concurrent use.
//
// If a handler also implements io.Closer, Close is called once when its filter chain has been
// removed (listener update or removal) and the chain's last connection has closed, or when
// the listener manager shuts down.
type FilterChainHandler interface {
	// ServeConn takes ownership of c. It is called on a goroutine dedicated to c; it may serve
	// c there and return when done, or hand c to a goroutine of its own and return at once.
	// Either way the handler must call c.Close when it is done with c, and must stop using c
	// promptly once reads on c fail: the listener manager closes connections when a drain
	// ends and at shutdown. Handlers consult c.DrainClose after each request (HTTP/1 adds
	// "Connection: close", HTTP/2 sends GOAWAY) and watch c.DrainStarted to close idle
	// connections.
	ServeConn(c *Conn)
}

// HandlerFunc adapts a function to FilterChainHandler.
type HandlerFunc func(c *Conn)

// ServeConn calls f(c).
func (f HandlerFunc) ServeConn(c *Conn) { f(c) }

// ChainContext is what a HandlerFactory builds a handler from.
type ChainContext struct {
	// Listener is the listener's configuration; Chain the filter chain's (its Filters are
	// the network filters in order, the last one naming the factory).
	Listener *config.Listener
	Chain    *config.FilterChain
	// StatPrefix is the listener's stats prefix with its trailing dot, for example
	// "listener.127.0.0.1_10000."; the HTTP connection manager registers its per-listener
	// stats under StatPrefix + "http.<stat_prefix>.".
	StatPrefix string
	// Stats is the server's stats store.
	Stats *stats.Store
	// Logger is the listener manager's logger (may be nil).
	Logger *logging.Logger
	// Now is the listener manager's clock (token buckets); Dial reaches a cluster's hosts
	// for the filters that call a gRPC service (ratelimit, ext_authz), nil when the server
	// gave none.
	Now  func() time.Time
	Dial grpcclient.Dial
}

// HandlerFactory builds the handler of one filter chain. It is called on the goroutine that
// adds or updates the listener; an error refuses the listener (listener_create_failure).
type HandlerFactory func(ctx *ChainContext) (FilterChainHandler, error)

// ConnFilters and TerminalFilters are the kinds of network filter extensions (Envoy's
// envoy.filters.network.*): a filter package registers its factory with
//
//	registry.Add(b, listener.ConnFilters, Name, &pb.Config{}, factory)
//
// (TerminalFilters for a filter that serves the connection, echo or direct_response), and the
// listener manager builds each filter of a chain through the frozen registry. They are two
// facets of one category so that a chain naming a terminal filter before its end, or ending
// with a non-terminal one, is told so rather than that the filter is unknown.
var (
	ConnFilters     = registry.Kind[ConnFilterFactory]{Category: registry.NetworkFilter, Facet: "conn"}
	TerminalFilters = registry.Kind[HandlerFactory]{Category: registry.NetworkFilter, Facet: "terminal"}
)

// Registry maps terminal network filter names and typed_config type URLs to handler
// factories whose dependencies only the server has (the HTTP connection manager's and the TCP
// proxy's Deps, built after the extension registry is frozen). Every other network filter is
// in the extension registry (ConnFilters, TerminalFilters). It is filled while the server is
// assembled and read-only afterwards; lookups are then safe for concurrent use. The zero
// value is not usable; call NewRegistry.
type Registry struct {
	byName map[string]HandlerFactory
	byType map[string]HandlerFactory
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{byName: map[string]HandlerFactory{}, byType: map[string]HandlerFactory{}}
}

// ConnFilter is a non-terminal network filter (connection_limit, local_ratelimit, rbac,
// sni_cluster): it runs once on each new connection of its filter chain, in chain order,
// before the chain's terminal filter gets the connection. It must be safe for concurrent use.
// A filter that also implements io.Closer is closed with its chain's handler.
type ConnFilter interface {
	// OnConnection decides about c: false closes it (the filter has counted why), true lets
	// the next filter have it. It may register work for c's close with c.OnClose.
	OnConnection(c *Conn) bool
}

// ConnFilterFactory builds the ConnFilter of one filter of a chain: ctx.Chain.Filters[index].
type ConnFilterFactory func(ctx *ChainContext, index int) (ConnFilter, error)

// free checks that name and typeURLs are not registered yet.
func (r *Registry) free(name string, typeURLs []string) error {
	if _, dup := r.byName[name]; dup {
		return fmt.Errorf("listener: network filter %q is already registered", name)
	}
	for _, u := range typeURLs {
		if _, dup := r.byType[u]; dup {
			return fmt.Errorf("listener: network filter type %q is already registered", u)
		}
	}
	return nil
}

// Register adds f under the network filter name (for example
// config.HTTPConnectionManagerFilter) and under each typed_config type URL that selects it
// (for example "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy").
// As in Envoy, a filter's type URL is looked up first and its name second. Registering a
// name or type twice is an error.
func (r *Registry) Register(name string, f HandlerFactory, typeURLs ...string) error {
	if f == nil {
		return fmt.Errorf("listener: network filter %q: nil factory", name)
	}
	if err := r.free(name, typeURLs); err != nil {
		return err
	}
	r.byName[name] = f
	for _, u := range typeURLs {
		r.byType[u] = f
	}
	return nil
}

// Names returns the registered filter names, sorted.
func (r *Registry) Names() []string {
	if r == nil {
		return nil
	}
	out := make([]string, 0, len(r.byName))
	for n := range r.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// lookup finds f's factory: by its type URL first, as Envoy finds extensions, and by name
// only when the type is not one that the extension registry gives to another network filter
// (taken).
func (r *Registry) lookup(f config.NetworkFilter, taken func(typeURL string) bool) (HandlerFactory, bool) {
	if r == nil {
		return nil, false
	}
	if u := f.TypeURL(); u != "" {
		if h, ok := r.byType[u]; ok {
			return h, true
		}
		if taken(u) {
			return nil, false
		}
	}
	h, ok := r.byName[f.Name]
	return h, ok
}
