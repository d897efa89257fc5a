package bootstrap

import (
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	grpcalsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	otelalsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/open_telemetry/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	internallistenerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/bootstrap/internal_listener/v3"
	aggregatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/aggregate/v3"
	healthcheckv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/health_check/v3"
	ondemandv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/on_demand/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	tapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/tap/v3"
	httpinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/http_inspector/v3"
	originaldstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/proxy_protocol/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	connlimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/connection_limit/v3"
	directresponsev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/direct_response/v3"
	echov3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/echo/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	netlocalratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/local_ratelimit/v3"
	sniclusterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/sni_cluster/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	preservecasev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/header_formatters/preserve_case/v3"
	clusterprovidedv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/cluster_provided/v3"
	leastrequestv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/least_request/v3"
	maglevv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/maglev/v3"
	randomv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/random/v3"
	ringhashv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/ring_hash/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	wrrlocalityv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/wrr_locality/v3"
	googlere2v3 "github.com/envoyproxy/go-control-plane/envoy/extensions/regex_engines/v3"
	downstreamconnectionsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	fixedheapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"
	omitcanaryv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/omit_canary_hosts/v3"
	previoushostsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	otelsinkv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/stat_sinks/open_telemetry/v3"
	internalupstreamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/internal_upstream/v3"
	rawbufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpoptionsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
)

// Extension is one extension Legate implements, as node.extensions lists it.
type Extension struct {
	Name     string // e.g. envoy.filters.http.router
	Category string // e.g. envoy.filters.http
	TypeName string // the config message's full name
	Config   proto.Message
}

// Extensions is the older list of extensions, which extensions.New declares in the registry
// (registry.Registry.Entries is the whole list, as node.extensions reports it). It shrinks as
// each extension registers itself from its own package. A new extension registers itself
// instead (docs/DESIGN.md, "Adding an extension"); an entry added here is still declared.
func Extensions() []Extension {
	e := func(name, category string, m proto.Message) Extension {
		return Extension{Name: name, Category: category, TypeName: string(m.ProtoReflect().Descriptor().FullName()), Config: m}
	}
	return []Extension{
		e("envoy.access_loggers.file", "envoy.access_loggers", &filev3.FileAccessLog{}),
		e("envoy.access_loggers.http_grpc", "envoy.access_loggers", &grpcalsv3.HttpGrpcAccessLogConfig{}),
		e("envoy.access_loggers.open_telemetry", "envoy.access_loggers", &otelalsv3.OpenTelemetryAccessLogConfig{}),
		e("envoy.access_loggers.stderr", "envoy.access_loggers", &streamv3.StderrAccessLog{}),
		e("envoy.access_loggers.stdout", "envoy.access_loggers", &streamv3.StdoutAccessLog{}),
		e("envoy.access_loggers.tcp_grpc", "envoy.access_loggers", &grpcalsv3.TcpGrpcAccessLogConfig{}),
		e("envoy.bootstrap.internal_listener", "envoy.bootstrap", &internallistenerv3.InternalListener{}),
		e("envoy.clusters.aggregate", "envoy.clusters", &aggregatev3.ClusterConfig{}),
		e("envoy.filters.http.health_check", "envoy.filters.http", &healthcheckv3.HealthCheck{}),
		e("envoy.filters.http.on_demand", "envoy.filters.http", &ondemandv3.OnDemand{}),
		e("envoy.filters.http.router", "envoy.filters.http", &routerv3.Router{}),
		e("envoy.filters.http.tap", "envoy.filters.http", &tapv3.Tap{}),
		e("envoy.filters.listener.http_inspector", "envoy.filters.listener", &httpinspectorv3.HttpInspector{}),
		e("envoy.filters.listener.original_dst", "envoy.filters.listener", &originaldstv3.OriginalDst{}),
		e("envoy.filters.listener.proxy_protocol", "envoy.filters.listener", &proxyprotocolv3.ProxyProtocol{}),
		e("envoy.filters.listener.tls_inspector", "envoy.filters.listener", &tlsinspectorv3.TlsInspector{}),
		e("envoy.filters.network.connection_limit", "envoy.filters.network", &connlimitv3.ConnectionLimit{}),
		e("envoy.filters.network.direct_response", "envoy.filters.network", &directresponsev3.Config{}),
		e("envoy.filters.network.echo", "envoy.filters.network", &echov3.Echo{}),
		e("envoy.filters.network.http_connection_manager", "envoy.filters.network", &hcmv3.HttpConnectionManager{}),
		e("envoy.filters.network.local_ratelimit", "envoy.filters.network", &netlocalratelimitv3.LocalRateLimit{}),
		e("envoy.filters.network.sni_cluster", "envoy.filters.network", &sniclusterv3.SniCluster{}),
		e("envoy.filters.network.tcp_proxy", "envoy.filters.network", &tcpproxyv3.TcpProxy{}),
		e("envoy.http.stateful_header_formatters.preserve_case", "envoy.http.stateful_header_formatters", &preservecasev3.PreserveCaseFormatterConfig{}),
		e("envoy.load_balancing_policies.cluster_provided", "envoy.load_balancing_policies", &clusterprovidedv3.ClusterProvided{}),
		e("envoy.load_balancing_policies.least_request", "envoy.load_balancing_policies", &leastrequestv3.LeastRequest{}),
		e("envoy.load_balancing_policies.maglev", "envoy.load_balancing_policies", &maglevv3.Maglev{}),
		e("envoy.load_balancing_policies.random", "envoy.load_balancing_policies", &randomv3.Random{}),
		e("envoy.load_balancing_policies.ring_hash", "envoy.load_balancing_policies", &ringhashv3.RingHash{}),
		e("envoy.load_balancing_policies.round_robin", "envoy.load_balancing_policies", &roundrobinv3.RoundRobin{}),
		e("envoy.load_balancing_policies.wrr_locality", "envoy.load_balancing_policies", &wrrlocalityv3.WrrLocality{}),
		e("envoy.regex_engines.google_re2", "envoy.regex_engines", &googlere2v3.GoogleRE2{}),
		e("envoy.resource_monitors.fixed_heap", "envoy.resource_monitors", &fixedheapv3.FixedHeapConfig{}),
		e("envoy.resource_monitors.global_downstream_max_connections", "envoy.resource_monitors", &downstreamconnectionsv3.DownstreamConnectionsConfig{}),
		e("envoy.retry_host_predicates.omit_canary_hosts", "envoy.retry_host_predicates", &omitcanaryv3.OmitCanaryHostsPredicate{}),
		e("envoy.retry_host_predicates.previous_hosts", "envoy.retry_host_predicates", &previoushostsv3.PreviousHostsPredicate{}),
		e("envoy.stat_sinks.dog_statsd", "envoy.stats_sinks", &metricsv3.DogStatsdSink{}),
		e("envoy.stat_sinks.hystrix", "envoy.stats_sinks", &metricsv3.HystrixSink{}),
		e("envoy.stat_sinks.metrics_service", "envoy.stats_sinks", &metricsv3.MetricsServiceConfig{}),
		e("envoy.stat_sinks.statsd", "envoy.stats_sinks", &metricsv3.StatsdSink{}),
		e("envoy.stat_sinks.open_telemetry", "envoy.stats_sinks", &otelsinkv3.SinkConfig{}),
		e("envoy.transport_sockets.internal_upstream", "envoy.transport_sockets.upstream", &internalupstreamv3.InternalUpstreamTransport{}),
		e("envoy.transport_sockets.raw_buffer", "envoy.transport_sockets.upstream", &rawbufferv3.RawBuffer{}),
		e("envoy.transport_sockets.tls", "envoy.transport_sockets.downstream", &tlsv3.DownstreamTlsContext{}),
		e("envoy.transport_sockets.tls", "envoy.transport_sockets.upstream", &tlsv3.UpstreamTlsContext{}),
		e("envoy.upstreams.http.http_protocol_options", "envoy.upstream_options", &httpoptionsv3.HttpProtocolOptions{}),
	}
}
