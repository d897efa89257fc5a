package resource

import "strings"

// Type URLs of the v3 resources Legate subscribes to.
const (
	ClusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	EndpointType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	ListenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	RouteType    = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	SecretType   = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
	RuntimeType  = "type.googleapis.com/envoy.service.runtime.v3.Runtime"
	// ScopedRouteType is SRDS's ScopedRouteConfiguration; VirtualHostType is VHDS's
	// VirtualHost (delta only).
	ScopedRouteType = "type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration"
	VirtualHostType = "type.googleapis.com/envoy.config.route.v3.VirtualHost"
)

// v2TypeURLs are the v2 spellings of the types above, refused with a clear error.
var v2TypeURLs = map[string]string{
	"type.googleapis.com/envoy.api.v2.Cluster":               ClusterType,
	"type.googleapis.com/envoy.api.v2.ClusterLoadAssignment": EndpointType,
	"type.googleapis.com/envoy.api.v2.Listener":              ListenerType,
	"type.googleapis.com/envoy.api.v2.RouteConfiguration":    RouteType,
	"type.googleapis.com/envoy.api.v2.auth.Secret":           SecretType,
	"type.googleapis.com/envoy.service.discovery.v2.Runtime": RuntimeType,
}

// checkTypeURL reports whether got is the type URL want, naming the v2 rule when got is a v2
// spelling of it.
func checkTypeURL(got, want string) error {
	if got == want {
		return nil
	}
	if v3, ok := v2TypeURLs[got]; ok && v3 == want {
		return errorf("type_url = %q; only the v3 API is supported (want %q)", got, want)
	}
	return errorf("type_url = %q; want %q", got, want)
}

// ShortType is the message name of a type URL ("Cluster" for ClusterType), for logs and stat
// prefixes.
func ShortType(typeURL string) string {
	if i := strings.LastIndexByte(typeURL, '.'); i >= 0 {
		return typeURL[i+1:]
	}
	return typeURL
}
