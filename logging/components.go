package logging

// componentNames is Envoy's ALL_LOGGER_IDS list for 1.36 (reference §12), in
// registry order. /logging lists loggers in this order, not sorted.
var componentNames = [...]string{
	"admin", "alternate_protocols_cache", "aws", "assert", "backtrace", "basic_auth",
	"cache_filter", "client", "config", "connection", "conn_handler", "compression",
	"credential_injector", "decompression", "dns", "dubbo", "envoy_bug", "ext_authz",
	"ext_proc", "rocketmq", "file", "filter", "forward_proxy", "geolocation", "grpc",
	"happy_eyeballs", "hc", "health_checker", "http", "http2", "hystrix", "init", "io",
	"jwt", "kafka", "key_value_store", "lua", "local_rate_limit", "main", "matcher",
	"mcp", "misc", "mongo", "multi_connection", "notification", "oauth2", "quic",
	"quic_stream", "pool", "rate_limit_quota", "rbac", "rds", "redis", "router",
	"runtime", "stats", "secret", "tap", "testing", "thrift", "tracing", "upstream",
	"udp", "wasm", "websocket", "golang", "stats_sinks", "dynamic_modules",
}

// ComponentNames returns the component logger names in registry order.
func ComponentNames() []string {
	out := make([]string, len(componentNames))
	copy(out, componentNames[:])
	return out
}
