package connlimit

import (
	clv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/connection_limit/v3"

	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener"
)

// Register registers the filter's factory with the extension registry.
func Register(b *registry.Builder) {
	registry.Add(b, listener.ConnFilters, Name, &clv3.ConnectionLimit{}, build)
}
