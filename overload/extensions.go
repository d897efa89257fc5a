package overload

import (
	downstreamconnectionsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	fixedheapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"

	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/internal/registry"
)

// Monitors is the kind of resource monitor extensions: FromProto converts a monitor's
// typed_config with the decoder registered under the monitor's name, and the manager reads
// the limit it returns.
var Monitors = registry.Kind[MonitorDecoder]{Category: registry.ResourceMonitor}

// MonitorDecoder converts a resource monitor's typed_config, a message of the registered
// type, into its Monitor (Name is set by the caller); path names the monitor in errors.
type MonitorDecoder func(path string, config proto.Message) (Monitor, error)

// Register adds the resource monitors the overload manager implements.
func Register(b *registry.Builder) {
	registry.Add(b, Monitors, FixedHeap, &fixedheapv3.FixedHeapConfig{}, fixedHeap)
	registry.Add(b, Monitors, GlobalConnections, &downstreamconnectionsv3.DownstreamConnectionsConfig{}, globalConnections)
}
