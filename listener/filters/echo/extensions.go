package echo

import (
	echov3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/echo/v3"

	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener"
)

// Register registers the filter's factory with the extension registry.
func Register(b *registry.Builder) {
	registry.Add(b, listener.TerminalFilters, Name, &echov3.Echo{}, func(*listener.ChainContext, any) (listener.FilterChainHandler, error) {
		return listener.HandlerFunc(serve), nil
	})
}
