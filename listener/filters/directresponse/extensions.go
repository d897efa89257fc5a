package directresponse

import (
	drv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/direct_response/v3"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener"
)

// Register registers the filter's parser and factory with the extension registry.
func Register(b *registry.Builder) {
	registry.Add(b, config.NetworkFilterConfigs, Name, &drv3.Config{}, parse)
	registry.Add(b, listener.TerminalFilters, Name, &drv3.Config{}, build)
}
