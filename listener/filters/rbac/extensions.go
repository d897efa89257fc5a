package rbac

import (
	netrbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener"
)

// Register registers the filter's parser and factory with the extension registry.
func Register(b *registry.Builder) {
	registry.Add(b, config.NetworkFilterConfigs, Name, &netrbacv3.RBAC{}, parse)
	registry.Add(b, listener.ConnFilters, Name, &netrbacv3.RBAC{}, build)
}
