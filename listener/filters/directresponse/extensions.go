package directresponse

import (
	drv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/direct_response/v3"

	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener"
)

// Register registers the filter's factory with the extension registry.
func Register(b *registry.Builder) {
	registry.Add(b, listener.TerminalFilters, Name, &drv3.Config{}, build)
}
