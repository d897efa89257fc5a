package overload

import (
	downstreamconnectionsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	fixedheapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"

	"github.com/legateproxy/legate/internal/registry"
)

// Register declares the resource monitors the overload manager implements.
func Register(b *registry.Builder) {
	b.Declare(registry.ResourceMonitor, "envoy.resource_monitors.fixed_heap", &fixedheapv3.FixedHeapConfig{})
	b.Declare(registry.ResourceMonitor, "envoy.resource_monitors.global_downstream_max_connections", &downstreamconnectionsv3.DownstreamConnectionsConfig{})
}
