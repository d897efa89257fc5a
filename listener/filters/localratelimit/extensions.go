package localratelimit

import (
	lrlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/local_ratelimit/v3"

	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener"
)

// Register registers the filter's factory with the extension registry.
func Register(b *registry.Builder) {
	registry.Add(b, listener.ConnFilters, Name, &lrlv3.LocalRateLimit{}, func(ctx *listener.ChainContext, i int) (listener.ConnFilter, error) {
		return build(ctx, i, ctx.Now)
	})
}
