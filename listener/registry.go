package listener

import (
	"fmt"
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

// ChainContext is what a network filter's factory builds from.
type ChainContext struct {
	// Listener is the listener's configuration; Chain the filter chain's (its Filters are
	// the network filters in order, the last one the terminal filter).
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
	// Services are the server's values for the filters that need them (ManagerConfig.Services).
	Services Services
}

// Services are what the server builds for the terminal filters that serve with its data
// plane (the HTTP connection manager's and the TCP proxy's dependencies: cluster manager,
// pools, stats, runtime, overload, ...), by the Envoy name of the extension that uses each.
// They exist only once the server has built them, after the extension registry is frozen, so
// they come to the factories through the listener manager rather than the registry. The
// server sets them once, before the first listener is added; they are read-only afterwards.
type Services map[string]any

// Service returns the value of type T that s holds for the extension name, or an error
// saying that the server gave none: a factory registered without its services cannot serve.
func Service[T any](s Services, name string) (T, error) {
	v, ok := s[name].(T)
	if !ok {
		return v, fmt.Errorf("%s: the listener manager was given no %T for it (ManagerConfig.Services)", name, v)
	}
	return v, nil
}

// HandlerFactory builds the handler of one filter chain from its terminal filter's
// configuration: the typed_config as the configuration path decoded and checked it
// (config.NetworkFilter.Config). It is called on the goroutine that adds or updates the
// listener; an error refuses the listener (listener_create_failure).
type HandlerFactory func(ctx *ChainContext, config any) (FilterChainHandler, error)

// ConnFilters and TerminalFilters are the kinds of network filter extensions (Envoy's
// envoy.filters.network.*): a filter package registers its factory with
//
//	registry.Add(b, listener.ConnFilters, Name, &pb.Config{}, factory)
//
// (TerminalFilters for a filter that serves the connection: echo, direct_response, the TCP
// proxy, the HTTP connection manager), and the listener manager builds each filter of a chain
// through the frozen registry. They are two facets of one category so that a chain naming a
// terminal filter before its end, or ending with a non-terminal one, is told so rather than
// that the filter is unknown. How the filter's typed_config becomes the value its factory
// gets is package config's kind, config.NetworkFilterConfigs, under the same name.
var (
	ConnFilters     = registry.Kind[ConnFilterFactory]{Category: registry.NetworkFilter, Facet: "conn"}
	TerminalFilters = registry.Kind[HandlerFactory]{Category: registry.NetworkFilter, Facet: "terminal"}
)

// ConnFilter is a non-terminal network filter (connection_limit, local_ratelimit, rbac,
// sni_cluster): it runs once on each new connection of its filter chain, in chain order,
// before the chain's terminal filter gets the connection. It must be safe for concurrent use.
// A filter that also implements io.Closer is closed with its chain's handler.
type ConnFilter interface {
	// OnConnection decides about c: false closes it (the filter has counted why), true lets
	// the next filter have it. It may register work for c's close with c.OnClose.
	OnConnection(c *Conn) bool
}

// ConnFilterFactory builds the ConnFilter of one filter of a chain from its decoded
// configuration (config.NetworkFilter.Config).
type ConnFilterFactory func(ctx *ChainContext, config any) (ConnFilter, error)

// ConfigOf returns a filter's decoded configuration as the type its factory expects; an
// error names the filter when the value is of another type (a listener converted without
// the filter's config.NetworkFilterConfigs entry).
func ConfigOf[T any](name string, config any) (T, error) {
	v, ok := config.(T)
	if !ok {
		return v, fmt.Errorf("%s: configuration of type %T; want %T (was the listener converted with this extension's registry?)", name, config, v)
	}
	return v, nil
}
