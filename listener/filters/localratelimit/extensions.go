package localratelimit

import (
	lrlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/local_ratelimit/v3"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener"
)

// Register registers the filter's parser and factory with the extension registry.
func Register(b *registry.Builder) {
	registry.Add(b, config.NetworkFilterConfigs, Name, &lrlv3.LocalRateLimit{}, parse)
	registry.Add(b, listener.ConnFilters, Name, &lrlv3.LocalRateLimit{}, func(ctx *listener.ChainContext, config any) (listener.ConnFilter, error) {
		return build(ctx, config, ctx.Now)
	})
}
