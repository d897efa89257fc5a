package connlimit

import (
	clv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/connection_limit/v3"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener"
)

// Register registers the filter's parser and factory with the extension registry.
func Register(b *registry.Builder) {
	registry.Add(b, config.NetworkFilterConfigs, Name, &clv3.ConnectionLimit{}, parse)
	registry.Add(b, listener.ConnFilters, Name, &clv3.ConnectionLimit{}, build)
}
