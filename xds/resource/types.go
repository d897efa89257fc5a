package resource

import "github.com/legateproxy/legate/xds/watch"

// Type URLs of the v3 resources Legate subscribes to (watch's).
const (
	ClusterType     = watch.ClusterType
	EndpointType    = watch.EndpointType
	ListenerType    = watch.ListenerType
	RouteType       = watch.RouteType
	SecretType      = watch.SecretType
	RuntimeType     = watch.RuntimeType
	ScopedRouteType = watch.ScopedRouteType
	VirtualHostType = watch.VirtualHostType
)

// ShortType is the message name of a type URL (watch.ShortType).
func ShortType(typeURL string) string { return watch.ShortType(typeURL) }
