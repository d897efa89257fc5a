package bootstrap

// The v2 names and keys that stand for extensions Legate implements, and their v3 types.
// Which extensions Legate implements is the extension registry's (internal/registry, built
// by extensions.New): each extension's package links its config message, so a typed_config
// whose "@type" names one resolves; any other "@type" is reported as unsupported.

import (
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	healthcheckv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/health_check/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	tapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/tap/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	// Load balancing policies that Legate does not implement are registered too, so that a
	// load_balancing_policy listing one before a policy Legate implements decodes; package
	// config skips them as Envoy skips policies it has no factory for.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/client_side_weighted_round_robin/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/override_host/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/pick_first/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/subset/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	// The TypedStruct wrappers Envoy opens around any typed_config (lenient.go).
	_ "github.com/cncf/xds/go/udpa/type/v1"
	_ "github.com/cncf/xds/go/xds/type/v3"
	httpoptionsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
)

// typeURL returns the Any type URL of m's message type.
func typeURL(m proto.Message) string {
	return "type.googleapis.com/" + string(m.ProtoReflect().Descriptor().FullName())
}

// v2FilterType maps the extension names a v2 file uses with the untyped `config` form to the
// v3 message that form stands for. Only these names are upgraded, and only when `config` is
// empty (see walker.upgradeUntypedConfig).
func v2FilterType(name string) (string, bool) {
	switch name {
	case "envoy.filters.http.router", "envoy.router":
		return typeURL(&routerv3.Router{}), true
	case "envoy.filters.http.health_check", "envoy.health_check":
		return typeURL(&healthcheckv3.HealthCheck{}), true
	case "envoy.filters.http.tap":
		return typeURL(&tapv3.Tap{}), true
	case "envoy.filters.network.http_connection_manager", "envoy.http_connection_manager":
		return typeURL(&hcmv3.HttpConnectionManager{}), true
	case "envoy.filters.network.tcp_proxy", "envoy.tcp_proxy":
		return typeURL(&tcpproxyv3.TcpProxy{}), true
	case "envoy.access_loggers.file", "envoy.file_access_log":
		return typeURL(&filev3.FileAccessLog{}), true
	case "envoy.stat_sinks.hystrix", "envoy.hystrix":
		return typeURL(&metricsv3.HystrixSink{}), true
	case "envoy.stat_sinks.statsd", "envoy.statsd":
		return typeURL(&metricsv3.StatsdSink{}), true
	case "envoy.stat_sinks.dog_statsd", "envoy.dog_statsd":
		return typeURL(&metricsv3.DogStatsdSink{}), true
	case "envoy.stat_sinks.metrics_service", "envoy.metrics_service":
		return typeURL(&metricsv3.MetricsServiceConfig{}), true
	}
	return "", false
}

// upstreamTLSURL and downstreamTLSURL are the typed_config types of the v2 tls_context upgrade.
func upstreamTLSURL() string   { return typeURL(&tlsv3.UpstreamTlsContext{}) }
func downstreamTLSURL() string { return typeURL(&tlsv3.DownstreamTlsContext{}) }

// httpOptionsKey is the typed_extension_protocol_options key, and message, of the upstream HTTP
// protocol options.
func httpOptionsKey() string {
	return string((&httpoptionsv3.HttpProtocolOptions{}).ProtoReflect().Descriptor().FullName())
}

// v2ProtocolOptionsKey maps a v2 extension_protocol_options key to its v3
// typed_extension_protocol_options key and message type.
func v2ProtocolOptionsKey(key string) (newKey, url string, ok bool) {
	switch key {
	case httpOptionsKey(), "envoy.filters.network.http_connection_manager", "envoy.http_connection_manager":
		return httpOptionsKey(), typeURL(&httpoptionsv3.HttpProtocolOptions{}), true
	}
	return "", "", false
}
