package tags

import (
	"regexp"
	"strings"
)

// Default tag names. They are the tag names Envoy's built-in extractors
// produce (Config::TagNames); all but CipherSuite carry the "envoy." prefix,
// which Prometheus renders as "envoy_".
const (
	ClusterName                  = "envoy.cluster_name"
	ListenerAddress              = "envoy.listener_address"
	HTTPConnManagerPrefix        = "envoy.http_conn_manager_prefix"
	HTTPUserAgent                = "envoy.http_user_agent"
	SSLCipher                    = "envoy.ssl_cipher"
	SSLCurve                     = "envoy.ssl_curve"
	SSLSigalg                    = "envoy.ssl_sigalg"
	SSLVersion                   = "envoy.ssl_version"
	CipherSuite                  = "cipher_suite"
	ClientSSLPrefix              = "envoy.clientssl_prefix"
	MongoPrefix                  = "envoy.mongo_prefix"
	MongoCmd                     = "envoy.mongo_cmd"
	MongoCollection              = "envoy.mongo_collection"
	MongoCallsite                = "envoy.mongo_callsite"
	RatelimitPrefix              = "envoy.ratelimit_prefix"
	LocalHTTPRatelimitPrefix     = "envoy.local_http_ratelimit_prefix"
	LocalNetworkRatelimitPrefix  = "envoy.local_network_ratelimit_prefix"
	LocalListenerRatelimitPrefix = "envoy.local_listener_ratelimit_prefix"
	DNSFilterPrefix              = "envoy.dns_filter_prefix"
	ConnectionLimitPrefix        = "envoy.connection_limit_prefix"
	RBACPrefix                   = "envoy.rbac_prefix"
	RBACHTTPPrefix               = "envoy.rbac_http_prefix"
	RBACPolicyName               = "envoy.rbac_policy_name"
	TCPPrefix                    = "envoy.tcp_prefix"
	UDPPrefix                    = "envoy.udp_prefix"
	FaultDownstreamCluster       = "envoy.fault_downstream_cluster"
	DynamoOperation              = "envoy.dynamo_operation"
	DynamoTable                  = "envoy.dynamo_table"
	DynamoPartitionID            = "envoy.dynamo_partition_id"
	GRPCBridgeService            = "envoy.grpc_bridge_service"
	GRPCBridgeMethod             = "envoy.grpc_bridge_method"
	VirtualHost                  = "envoy.virtual_host"
	VirtualCluster               = "envoy.virtual_cluster"
	ResponseCode                 = "envoy.response_code"
	ResponseCodeClass            = "envoy.response_code_class"
	Route                        = "envoy.route"
	ExtAuthzPrefix               = "envoy.ext_authz_prefix"
	RDSRouteConfig               = "envoy.rds_route_config"
	ScopedRDSConfig              = "envoy.scoped_rds_config"
	ThriftPrefix                 = "envoy.thrift_prefix"
	RedisPrefix                  = "envoy.redis_prefix"
	ProxyProtocolVersion         = "envoy.proxy_protocol_version"
	ProxyProtocolPrefix          = "envoy.proxy_protocol_prefix"
	GoogleGRPCClientPrefix       = "envoy.google_grpc_client_prefix"
	TLSCertificate               = "envoy.tls_certificate"
	XDSResourceName              = "envoy.xds_resource_name"
	WorkerID                     = "envoy.worker_id"
)

// regexDescriptor is one of Envoy's default RE2 extractors.
type regexDescriptor struct {
	name     string
	re       *regexp.Regexp
	substr   string // Envoy's substring hint: skip unless the name contains it
	negative string // a value equal to this is not a match
	// fast, when set, is a hand-written matcher that gives exactly the
	// regex's result (value, removed range) without the regex engine.
	fast func(name string) (value string, lo, hi int, ok bool)
	// window, when > 0, says that fast's result depends only on the last
	// window bytes of the name and that a match never holds a '.', so it
	// can be computed on a stat struct's field name alone (Fields.Extract).
	window int
}

// tokenDescriptor is one of Envoy's default tokenized extractors.
type tokenDescriptor struct {
	name    string
	pattern string
}

// expandDefault substitutes the named fragments Envoy uses to keep its default
// regexes readable.
var expandDefault = strings.NewReplacer(
	// An IPv4 or bracketed IPv6 address (colons sanitized to '_') and a port.
	"<ADDRESS>", `(?:(?:\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}|\[[a-fA-F_\d]+\])_\d+)`,
	"<CIPHER>", `[\w-]+`,
	"<TLS_VERSION>", `TLSv\d\.\d`,
	// Any single dot-free token.
	"<TAG_VALUE>", `[^\.]+`,
	// Route configuration names may hold dots and slashes.
	"<ROUTE_CONFIG_NAME>", `[\w-\./]+`,
	"<SCOPED_ROUTE_CONFIG_NAME>", `[\w-\.]+`,
	"<LISTENER_OR_CLUSTER_WITH_NAME>", `(?:listener|cluster)\..*?`,
	"<PROXY_PROTOCOL_VERSION>", `\d`,
)

func re2(name, expr, substr, negative string) regexDescriptor {
	return regexDescriptor{
		name:     name,
		re:       regexp.MustCompile(expandDefault.Replace(expr)),
		substr:   substr,
		negative: negative,
	}
}

func withFast(d regexDescriptor, window int, fast func(string) (string, int, int, bool)) regexDescriptor {
	d.fast, d.window = fast, window
	return d
}

// matchResponseCode is `_rq(_(\d{3}))$`: the name ends in "_rq_" and three
// ASCII digits; "_" and the digits go, the digits are the value.
func matchResponseCode(name string) (string, int, int, bool) {
	n := len(name)
	if n < 7 || name[n-7:n-3] != "_rq_" || !isDigit(name[n-3]) || !isDigit(name[n-2]) || !isDigit(name[n-1]) {
		return "", 0, 0, false
	}
	return name[n-3:], n - 4, n, true
}

// matchResponseCodeClass is `_rq_((\d))xx$`: the name ends in "_rq_", one
// ASCII digit and "xx"; the digit is both removed and the value.
func matchResponseCodeClass(name string) (string, int, int, bool) {
	n := len(name)
	if n < 7 || name[n-7:n-3] != "_rq_" || !isDigit(name[n-3]) || name[n-2:] != "xx" {
		return "", 0, 0, false
	}
	return name[n-3 : n-2], n - 3, n - 2, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// defaultRegexes are Envoy's RE2 extractors in registration order. The
// compiled regexes are shared by every Producer; regexp.Regexp is safe for
// concurrent use and nothing here is modified after package initialisation.
var defaultRegexes = []regexDescriptor{
	// <anything>_rq(_<code>)
	withFast(re2(ResponseCode, `_rq(_(\d{3}))$`, "_rq_", ""), len("_rq_200"), matchResponseCode),
	// <anything>_rq_(<class>)xx
	withFast(re2(ResponseCodeClass, `_rq_((\d))xx$`, "_rq_", ""), len("_rq_2xx"), matchResponseCodeClass),
	// http.<prefix>.dynamodb.table.<table>.capacity.<op>(.__partition_id=<id>)
	re2(DynamoPartitionID, `^http\.<TAG_VALUE>\.dynamodb\.table\.<TAG_VALUE>\.capacity\.<TAG_VALUE>(\.__partition_id=(\w{7}))$`, ".dynamodb.table.", ""),
	// http.<prefix>.dynamodb.operation(.<op>).… or …table.<table>.capacity(.<op>)…
	re2(DynamoOperation, `^http\.<TAG_VALUE>\.dynamodb.(?:operation|table\.<TAG_VALUE>\.capacity)(\.(<TAG_VALUE>))(?:\.|$)`, ".dynamodb.", ""),
	// http.<prefix>.dynamodb.(table|error).(<table>.)…
	re2(DynamoTable, `^http\.<TAG_VALUE>\.dynamodb.(?:table|error)\.((<TAG_VALUE>)\.)`, ".dynamodb.", ""),
	// listener.<address>.ssl.ciphers(.<cipher>)
	re2(SSLCipher, `^listener\..*?\.ssl\.ciphers(\.(<CIPHER>))$`, ".ssl.ciphers.", ""),
	re2(SSLCurve, `^<LISTENER_OR_CLUSTER_WITH_NAME>\.ssl\.curves(\.(<CIPHER>))$`, ".ssl.curves.", ""),
	re2(SSLSigalg, `^<LISTENER_OR_CLUSTER_WITH_NAME>\.ssl\.sigalgs(\.(<CIPHER>))$`, ".ssl.sigalgs.", ""),
	re2(SSLVersion, `^<LISTENER_OR_CLUSTER_WITH_NAME>\.ssl\.versions(\.(<TLS_VERSION>))$`, ".ssl.versions.", ""),
	// cluster.<cluster>.ssl.ciphers(.<cipher>)
	re2(CipherSuite, `^cluster\.<TAG_VALUE>\.ssl\.ciphers(\.(<CIPHER>))$`, ".ssl.ciphers.", ""),
	// listener.<address>.http.(<prefix>.)…
	re2(HTTPConnManagerPrefix, `^listener\..*?\.http\.((<TAG_VALUE>)\.)`, ".http.", ""),
	// (listener.<address>|server|listener_manager|thread_local_cluster_manager).worker_(<id>.)…
	// Only the digits and their dot go: "worker_" stays in the name (Envoy 1.24+).
	re2(WorkerID, `^(?:listener\.(?:<ADDRESS>|<TAG_VALUE>)|server|listener_manager|thread_local_cluster_manager)\.worker_((\d+)\.)`, "", ""),
	// listener.(<address or stat_prefix>.)…, except the admin listener
	re2(ListenerAddress, `^listener\.((<ADDRESS>|<TAG_VALUE>)\.)`, "", "admin"),
	// http.<prefix>.rds.(<route config>.)<stat>; the route config name may hold dots
	re2(RDSRouteConfig, `^http\.<TAG_VALUE>\.rds\.((<ROUTE_CONFIG_NAME>)\.)\w+?$`, ".rds.", ""),
	re2(ScopedRDSConfig, `^http\.<TAG_VALUE>\.scoped_rds\.((<SCOPED_ROUTE_CONFIG_NAME>)\.)\w+?$`, ".scoped_rds.", ""),
	// http.<prefix>.rbac.[<rules prefix>.]policy.(<policy>.)(allowed|shadow_allowed|denied|shadow_denied)
	re2(RBACPolicyName, `^http\.<TAG_VALUE>\.rbac\.(?:<TAG_VALUE>\.)?policy\.((<TAG_VALUE>)\.)(allowed|shadow_allowed|denied|shadow_denied)$`, "", ""),
	// http.<prefix>.rbac.(<rules prefix>.)…, except "policy"
	re2(RBACHTTPPrefix, `^http\.<TAG_VALUE>\.rbac\.((<TAG_VALUE>)\.).*?`, "", "policy"),
	// proxy_proto.(<prefix>.)…, except "versions"
	re2(ProxyProtocolPrefix, `^proxy_proto\.((<TAG_VALUE>)\.).+$`, "", "versions"),
	// proxy_proto.([<prefix>.]versions.v<N>.)<stat>
	re2(ProxyProtocolVersion, `^proxy_proto\.((?:<TAG_VALUE>\.)?versions\.v(<PROXY_PROTOCOL_VERSION>)\.)\w+$`, "", ""),
	// (listener|cluster).<name>.ssl.certificate.(<cert>.)…
	re2(TLSCertificate, `^<LISTENER_OR_CLUSTER_WITH_NAME>\.ssl\.certificate\.((<TAG_VALUE>)\.).*$`, ".ssl.certificate", ""),
	// sds.(<resource>.)…
	re2(XDSResourceName, `^sds\.((<TAG_VALUE>)\.).+`, "", ""),
}

// defaultTokens are Envoy's tokenized extractors in registration order; they
// are registered after all of defaultRegexes.
var defaultTokens = []tokenDescriptor{
	{MongoCallsite, "mongo.*.collection.*.callsite.$.query.**"},
	{MongoCollection, "mongo.*.collection.$.**.query.*"},
	{MongoCmd, "mongo.*.cmd.$.**"},
	{GRPCBridgeMethod, "cluster.*.grpc.*.$.**"},
	{HTTPUserAgent, "http.*.user_agent.$.**"},
	{VirtualCluster, "vhost.*.vcluster.$.**"},
	{FaultDownstreamCluster, "http.*.fault.$.**"},
	{GRPCBridgeService, "cluster.*.grpc.$.**"},
	{TCPPrefix, "tcp.$.**"},
	{UDPPrefix, "udp.$.**"},
	{ClientSSLPrefix, "auth.clientssl.$.**"},
	{RatelimitPrefix, "ratelimit.$.**"},
	{ClusterName, "cluster.$.**"},
	{ExtAuthzPrefix, "cluster.*.ext_authz.$.**"},
	{ExtAuthzPrefix, "http.*.ext_authz.$.**"},
	{HTTPConnManagerPrefix, "http.$.**"},
	{VirtualHost, "vhost.$.**"},
	{MongoPrefix, "mongo.$.**"},
	{Route, "vhost.*.route.$.**"},
	{ThriftPrefix, "thrift.$.**"},
	{RedisPrefix, "redis.$.**"},
	{LocalHTTPRatelimitPrefix, "$.http_local_rate_limit.**"},
	{LocalNetworkRatelimitPrefix, "local_rate_limit.$.**"},
	{LocalListenerRatelimitPrefix, "listener_local_ratelimit.$.**"},
	{DNSFilterPrefix, "dns_filter.$.**"},
	{ConnectionLimitPrefix, "connection_limit.$.**"},
	{RBACPrefix, "$.rbac.**"},
	{GoogleGRPCClientPrefix, "grpc.$.**"},
}

// DefaultNames returns the names of Envoy's default tag extractors in
// registration order (all regex extractors, then the tokenized ones), each
// name once. Two names have more than one extractor:
// envoy.http_conn_manager_prefix and envoy.ext_authz_prefix. A stats_tags
// entry with only one of these names as tag_name selects its extractors.
func DefaultNames() []string {
	names := make([]string, 0, len(defaultRegexes)+len(defaultTokens))
	seen := make(map[string]bool, cap(names))
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	for _, d := range defaultRegexes {
		add(d.name)
	}
	for _, d := range defaultTokens {
		add(d.name)
	}
	return names
}
