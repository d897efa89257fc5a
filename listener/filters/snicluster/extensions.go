package snicluster

import (
	sniv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/sni_cluster/v3"

	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener"
)

// Register registers the filter's factory with the extension registry.
func Register(b *registry.Builder) {
	registry.Add(b, listener.ConnFilters, Name, &sniv3.SniCluster{}, func(*listener.ChainContext, any) (listener.ConnFilter, error) {
		return filter{}, nil
	})
}
