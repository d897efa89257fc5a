package tags

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type extractCase struct {
	name string // full stat name
	want string // tag-extracted name
	tags []Tag
}

func mustNew(t testing.TB, cfg Config) *Producer {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New() error: %v", err)
	}
	return p
}

func runExtract(t *testing.T, p *Producer, cases []extractCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, tags := p.Extract(c.name, nil)
			if got != c.want {
				t.Errorf("Extract(%q) name = %q; want %q", c.name, got, c.want)
			}
			if diff := cmp.Diff(c.tags, tags); diff != "" {
				t.Errorf("Extract(%q) tags mismatch (-want +got):\n%s", c.name, diff)
			}
		})
	}
}

// TestWorkedExamples covers every example of envoy-admin-formats.md §25.3.
func TestWorkedExamples(t *testing.T) {
	p := mustNew(t, Config{})
	runExtract(t, p, []extractCase{
		{"cluster.foo.upstream_rq_200", "cluster.upstream_rq",
			[]Tag{{ResponseCode, "200"}, {ClusterName, "foo"}}},
		{"cluster.foo.upstream_rq_2xx", "cluster.upstream_rq_xx",
			[]Tag{{ResponseCodeClass, "2"}, {ClusterName, "foo"}}},
		{"cluster.foo.external.upstream_rq_503", "cluster.external.upstream_rq",
			[]Tag{{ResponseCode, "503"}, {ClusterName, "foo"}}},
		{"cluster.foo.circuit_breakers.default.cx_open", "cluster.circuit_breakers.default.cx_open",
			[]Tag{{ClusterName, "foo"}}},
		{"cluster.foo.ssl.ciphers.ECDHE-RSA-AES128-GCM-SHA256", "cluster.ssl.ciphers",
			[]Tag{{CipherSuite, "ECDHE-RSA-AES128-GCM-SHA256"}, {ClusterName, "foo"}}},
		{"cluster.g.grpc.svc.method.success", "cluster.grpc.success",
			[]Tag{{GRPCBridgeMethod, "method"}, {GRPCBridgeService, "svc"}, {ClusterName, "g"}}},
		{"listener.0.0.0.0_10000.downstream_cx_total", "listener.downstream_cx_total",
			[]Tag{{ListenerAddress, "0.0.0.0_10000"}}},
		{"listener.[__]_10000.downstream_cx_active", "listener.downstream_cx_active",
			[]Tag{{ListenerAddress, "[__]_10000"}}},
		{"listener.0.0.0.0_10000.worker_0.downstream_cx_total", "listener.worker_downstream_cx_total",
			[]Tag{{WorkerID, "0"}, {ListenerAddress, "0.0.0.0_10000"}}},
		{"listener.0.0.0.0_10000.main_thread.downstream_cx_total", "listener.main_thread.downstream_cx_total",
			[]Tag{{ListenerAddress, "0.0.0.0_10000"}}},
		{"listener.0.0.0.0_10000.http.ingress_http.downstream_rq_2xx", "listener.http.downstream_rq_xx",
			[]Tag{{ResponseCodeClass, "2"}, {HTTPConnManagerPrefix, "ingress_http"}, {ListenerAddress, "0.0.0.0_10000"}}},
		{"listener.admin.http.admin.downstream_rq_4xx", "listener.admin.http.downstream_rq_xx",
			[]Tag{{ResponseCodeClass, "4"}, {HTTPConnManagerPrefix, "admin"}}},
		{"listener.admin.main_thread.downstream_cx_total", "listener.admin.main_thread.downstream_cx_total", nil},
		{"http.ingress_http.downstream_rq_2xx", "http.downstream_rq_xx",
			[]Tag{{ResponseCodeClass, "2"}, {HTTPConnManagerPrefix, "ingress_http"}}},
		{"http.admin.downstream_rq_2xx", "http.downstream_rq_xx",
			[]Tag{{ResponseCodeClass, "2"}, {HTTPConnManagerPrefix, "admin"}}},
		{"http.ingress_http.rds.local_route.config_reload", "http.rds.config_reload",
			[]Tag{{RDSRouteConfig, "local_route"}, {HTTPConnManagerPrefix, "ingress_http"}}},
		{"http.ingress_http.user_agent.ios.downstream_cx_total", "http.user_agent.downstream_cx_total",
			[]Tag{{HTTPUserAgent, "ios"}, {HTTPConnManagerPrefix, "ingress_http"}}},
		{"vhost.v1.vcluster.other.upstream_rq_200", "vhost.vcluster.upstream_rq",
			[]Tag{{ResponseCode, "200"}, {VirtualCluster, "other"}, {VirtualHost, "v1"}}},
		{"server.worker_3.watchdog_miss", "server.worker_watchdog_miss",
			[]Tag{{WorkerID, "3"}}},
		{"thread_local_cluster_manager.worker_0.clusters_inflated", "thread_local_cluster_manager.worker_clusters_inflated",
			[]Tag{{WorkerID, "0"}}},
		{"cluster_manager.cds.update_success", "cluster_manager.cds.update_success", nil},
		{"sds.xds_trusted_ca.update_attempt", "sds.update_attempt",
			[]Tag{{XDSResourceName, "xds_trusted_ca"}}},
	})
}

// TestDefaultExtractors has at least one stat name for every default
// extractor. Tag order is the evaluation order: extractors without a prefix
// token first, then those keyed by the name's first token, each group in
// registration order (regexes before tokenized ones).
func TestDefaultExtractors(t *testing.T) {
	p := mustNew(t, Config{})
	cases := []extractCase{
		// Regex extractors.
		{"http.egress_dynamodb_iad.dynamodb.table.bar_table.capacity.Query.__partition_id=ABC1234",
			"http.dynamodb.table.capacity",
			[]Tag{{DynamoPartitionID, "ABC1234"}, {DynamoOperation, "Query"}, {DynamoTable, "bar_table"},
				{HTTPConnManagerPrefix, "egress_dynamodb_iad"}}},
		{"http.egress_dynamodb_iad.dynamodb.operation.Query.upstream_rq_time",
			"http.dynamodb.operation.upstream_rq_time",
			[]Tag{{DynamoOperation, "Query"}, {HTTPConnManagerPrefix, "egress_dynamodb_iad"}}},
		{"http.egress_dynamodb_iad.dynamodb.table.bar_table.upstream_rq_time",
			"http.dynamodb.table.upstream_rq_time",
			[]Tag{{DynamoTable, "bar_table"}, {HTTPConnManagerPrefix, "egress_dynamodb_iad"}}},
		{"http.egress_dynamodb_iad.dynamodb.error.bar_table.BadRequest",
			"http.dynamodb.error.BadRequest",
			[]Tag{{DynamoTable, "bar_table"}, {HTTPConnManagerPrefix, "egress_dynamodb_iad"}}},
		{"listener.127.0.0.1_0.ssl.ciphers.AES256-SHA", "listener.ssl.ciphers",
			[]Tag{{SSLCipher, "AES256-SHA"}, {ListenerAddress, "127.0.0.1_0"}}},
		{"listener.[2001_0db8_85a3_0000_0000_8a2e_0370_7334]_3543.ssl.ciphers.AES256-SHA", "listener.ssl.ciphers",
			[]Tag{{SSLCipher, "AES256-SHA"}, {ListenerAddress, "[2001_0db8_85a3_0000_0000_8a2e_0370_7334]_3543"}}},
		{"listener.127.0.0.1_0.ssl.curves.X25519", "listener.ssl.curves",
			[]Tag{{SSLCurve, "X25519"}, {ListenerAddress, "127.0.0.1_0"}}},
		{"cluster.foo.ssl.curves.P-256", "cluster.ssl.curves",
			[]Tag{{SSLCurve, "P-256"}, {ClusterName, "foo"}}},
		{"cluster.foo.ssl.sigalgs.rsa_pss_rsae_sha256", "cluster.ssl.sigalgs",
			[]Tag{{SSLSigalg, "rsa_pss_rsae_sha256"}, {ClusterName, "foo"}}},
		{"listener.0.0.0.0_443.ssl.versions.TLSv1.3", "listener.ssl.versions",
			[]Tag{{SSLVersion, "TLSv1.3"}, {ListenerAddress, "0.0.0.0_443"}}},
		{"cluster.ratelimit.ssl.ciphers.ECDHE-RSA-AES128-GCM-SHA256", "cluster.ssl.ciphers",
			[]Tag{{CipherSuite, "ECDHE-RSA-AES128-GCM-SHA256"}, {ClusterName, "ratelimit"}}},
		{"listener.127.0.0.1_3012.http.http_prefix.downstream_rq_5xx", "listener.http.downstream_rq_xx",
			[]Tag{{ResponseCodeClass, "5"}, {HTTPConnManagerPrefix, "http_prefix"}, {ListenerAddress, "127.0.0.1_3012"}}},
		{"listener_manager.worker_123.dispatcher.loop_duration_us", "listener_manager.worker_dispatcher.loop_duration_us",
			[]Tag{{WorkerID, "123"}}},
		{"listener.my_stat_prefix.worker_1.downstream_cx_total", "listener.worker_downstream_cx_total",
			[]Tag{{WorkerID, "1"}, {ListenerAddress, "my_stat_prefix"}}},
		{"http.rds_connection_manager.rds.route_config.123.update_success", "http.rds.update_success",
			[]Tag{{RDSRouteConfig, "route_config.123"}, {HTTPConnManagerPrefix, "rds_connection_manager"}}},
		{"http.ingress.scoped_rds.my-scopes.v1.config_reload", "http.scoped_rds.config_reload",
			[]Tag{{ScopedRDSConfig, "my-scopes.v1"}, {HTTPConnManagerPrefix, "ingress"}}},
		{"http.ingress.rbac.policy.my_policy.allowed", "http.rbac.policy.allowed",
			[]Tag{{RBACPolicyName, "my_policy"}, {HTTPConnManagerPrefix, "ingress"}}},
		{"http.ingress.rbac.rules1.policy.p1.shadow_denied", "http.rbac.policy.shadow_denied",
			[]Tag{{RBACPolicyName, "p1"}, {RBACHTTPPrefix, "rules1"}, {HTTPConnManagerPrefix, "ingress"}}},
		{"http.ingress.rbac.rules1.denied", "http.rbac.denied",
			[]Tag{{RBACHTTPPrefix, "rules1"}, {HTTPConnManagerPrefix, "ingress"}}},
		{"http.ingress.rbac.allowed", "http.rbac.allowed",
			[]Tag{{HTTPConnManagerPrefix, "ingress"}}},
		{"proxy_proto.pp1.not_found_allowed", "proxy_proto.not_found_allowed",
			[]Tag{{ProxyProtocolPrefix, "pp1"}}},
		{"proxy_proto.pp1.versions.v2.found", "proxy_proto.found",
			[]Tag{{ProxyProtocolPrefix, "pp1"}, {ProxyProtocolVersion, "2"}}},
		{"proxy_proto.versions.v1.error", "proxy_proto.error",
			[]Tag{{ProxyProtocolVersion, "1"}}},
		{"cluster.foo.ssl.certificate.cert1.expiration_unix_time_seconds",
			"cluster.ssl.certificate.expiration_unix_time_seconds",
			[]Tag{{TLSCertificate, "cert1"}, {ClusterName, "foo"}}},
		{"listener.0.0.0.0_443.ssl.certificate.server_cert.expiration_unix_time_seconds",
			"listener.ssl.certificate.expiration_unix_time_seconds",
			[]Tag{{TLSCertificate, "server_cert"}, {ListenerAddress, "0.0.0.0_443"}}},
		{"sds.xds_trusted_ca.update_attempt", "sds.update_attempt",
			[]Tag{{XDSResourceName, "xds_trusted_ca"}}},

		// Tokenized extractors.
		{"mongo.mongo_filter.op_reply", "mongo.op_reply",
			[]Tag{{MongoPrefix, "mongo_filter"}}},
		{"mongo.mongo_filter.cmd.foo_cmd.reply_size", "mongo.cmd.reply_size",
			[]Tag{{MongoCmd, "foo_cmd"}, {MongoPrefix, "mongo_filter"}}},
		{"mongo.mongo_filter.collection.bar_collection.query.multi_get", "mongo.collection.query.multi_get",
			[]Tag{{MongoCollection, "bar_collection"}, {MongoPrefix, "mongo_filter"}}},
		{"mongo.mongo_filter.collection.bar_collection.callsite.baz_callsite.query.scatter_get",
			"mongo.collection.callsite.query.scatter_get",
			[]Tag{{MongoCallsite, "baz_callsite"}, {MongoCollection, "bar_collection"}, {MongoPrefix, "mongo_filter"}}},
		{"cluster.grpc_cluster.grpc.grpc_service_1.grpc_method_1.success", "cluster.grpc.success",
			[]Tag{{GRPCBridgeMethod, "grpc_method_1"}, {GRPCBridgeService, "grpc_service_1"}, {ClusterName, "grpc_cluster"}}},
		{"http.egress.user_agent.ios.downstream_cx_total", "http.user_agent.downstream_cx_total",
			[]Tag{{HTTPUserAgent, "ios"}, {HTTPConnManagerPrefix, "egress"}}},
		{"vhost.vhost_1.vcluster.vcluster_1.upstream_rq_2xx", "vhost.vcluster.upstream_rq_xx",
			[]Tag{{ResponseCodeClass, "2"}, {VirtualCluster, "vcluster_1"}, {VirtualHost, "vhost_1"}}},
		{"http.fault_connection_manager.fault.fault_cluster.aborts_injected", "http.fault.aborts_injected",
			[]Tag{{FaultDownstreamCluster, "fault_cluster"}, {HTTPConnManagerPrefix, "fault_connection_manager"}}},
		{"tcp.tcp_prefix.downstream_flow_control_resumed_reading_total", "tcp.downstream_flow_control_resumed_reading_total",
			[]Tag{{TCPPrefix, "tcp_prefix"}}},
		{"udp.udp_prefix.downstream_sess_total", "udp.downstream_sess_total",
			[]Tag{{UDPPrefix, "udp_prefix"}}},
		{"auth.clientssl.clientssl_prefix.auth_ip_allowlist", "auth.clientssl.auth_ip_allowlist",
			[]Tag{{ClientSSLPrefix, "clientssl_prefix"}}},
		{"ratelimit.foo_ratelimiter.over_limit", "ratelimit.over_limit",
			[]Tag{{RatelimitPrefix, "foo_ratelimiter"}}},
		{"cluster.ratelimit.upstream_rq_timeout", "cluster.upstream_rq_timeout",
			[]Tag{{ClusterName, "ratelimit"}}},
		{"cluster.foo.ext_authz.authz1.ok", "cluster.ext_authz.ok",
			[]Tag{{ClusterName, "foo"}, {ExtAuthzPrefix, "authz1"}}},
		{"http.ingress.ext_authz.authz1.denied", "http.ext_authz.denied",
			[]Tag{{ExtAuthzPrefix, "authz1"}, {HTTPConnManagerPrefix, "ingress"}}},
		{"http.ingress.downstream_cx_total", "http.downstream_cx_total",
			[]Tag{{HTTPConnManagerPrefix, "ingress"}}},
		{"vhost.v1.route.r1.upstream_rq_total", "vhost.route.upstream_rq_total",
			[]Tag{{VirtualHost, "v1"}, {Route, "r1"}}},
		{"thrift.thrift_prefix.request", "thrift.request",
			[]Tag{{ThriftPrefix, "thrift_prefix"}}},
		{"redis.redis_prefix.command.get.total", "redis.command.get.total",
			[]Tag{{RedisPrefix, "redis_prefix"}}},
		{"my_rl.http_local_rate_limit.rate_limited", "http_local_rate_limit.rate_limited",
			[]Tag{{LocalHTTPRatelimitPrefix, "my_rl"}}},
		{"local_rate_limit.lrl.rate_limited", "local_rate_limit.rate_limited",
			[]Tag{{LocalNetworkRatelimitPrefix, "lrl"}}},
		{"listener_local_ratelimit.llr.rate_limited", "listener_local_ratelimit.rate_limited",
			[]Tag{{LocalListenerRatelimitPrefix, "llr"}}},
		{"dns_filter.dns1.downstream_rx_queries", "dns_filter.downstream_rx_queries",
			[]Tag{{DNSFilterPrefix, "dns1"}}},
		{"connection_limit.cl1.limited_connections", "connection_limit.limited_connections",
			[]Tag{{ConnectionLimitPrefix, "cl1"}}},
		{"tcp_rbac.rbac.allowed", "rbac.allowed",
			[]Tag{{RBACPrefix, "tcp_rbac"}}},
		{"grpc.ads_cluster.streams_total", "grpc.streams_total",
			[]Tag{{GoogleGRPCClientPrefix, "ads_cluster"}}},

		// Near misses.
		{"cluster.foo.ext_authz.ok", "cluster.ext_authz.ok", []Tag{{ClusterName, "foo"}}},
		{"tcp.only_prefix", "tcp.only_prefix", nil},
		{"http.x.dynamodbXoperation.Query.y", "http.dynamodbXoperation.Query.y",
			[]Tag{{HTTPConnManagerPrefix, "x"}}},
		{"upstream_rq_200", "upstream_rq", []Tag{{ResponseCode, "200"}}},
		{"", "", nil},
		{".", ".", nil},
	}
	runExtract(t, p, cases)

	// Every default name must be exercised above.
	seen := map[string]bool{}
	for _, c := range cases {
		for _, tag := range c.tags {
			seen[tag.Name] = true
		}
	}
	for _, name := range DefaultNames() {
		if !seen[name] {
			t.Errorf("no test case produces default tag %q", name)
		}
	}
}

func TestDefaultNames(t *testing.T) {
	got := DefaultNames()
	if len(got) != 47 {
		t.Errorf("len(DefaultNames()) = %d; want 47", len(got))
	}
	if got[0] != ResponseCode || got[len(got)-1] != GoogleGRPCClientPrefix {
		t.Errorf("DefaultNames() = %v; want %s first and %s last", got, ResponseCode, GoogleGRPCClientPrefix)
	}
	seen := map[string]bool{}
	for _, n := range got {
		if seen[n] {
			t.Errorf("DefaultNames() repeats %q", n)
		}
		seen[n] = true
	}
}

func TestEvaluationOrder(t *testing.T) {
	p := mustNew(t, Config{})
	var without []string
	for _, e := range p.unprefixed {
		without = append(without, e.name)
	}
	want := []string{ResponseCode, ResponseCodeClass, SSLCurve, SSLSigalg, SSLVersion, WorkerID,
		TLSCertificate, LocalHTTPRatelimitPrefix, RBACPrefix}
	if diff := cmp.Diff(want, without); diff != "" {
		t.Errorf("extractors without prefix (-want +got):\n%s", diff)
	}
	var http []string
	for _, e := range p.byPrefix["http"] {
		http = append(http, e.name)
	}
	wantHTTP := []string{DynamoPartitionID, DynamoOperation, DynamoTable, RDSRouteConfig, ScopedRDSConfig,
		RBACPolicyName, RBACHTTPPrefix, HTTPUserAgent, FaultDownstreamCluster, ExtAuthzPrefix, HTTPConnManagerPrefix}
	if diff := cmp.Diff(wantHTTP, http); diff != "" {
		t.Errorf("extractors with prefix http (-want +got):\n%s", diff)
	}
}

func boolPtr(b bool) *bool { return &b }

func TestCustomTags(t *testing.T) {
	tests := []struct {
		desc  string
		cfg   Config
		cases []extractCase
	}{
		{
			desc: "custom regex runs after the defaults with its prefix",
			cfg:  Config{Custom: []Spec{{TagName: "my_cluster", Regex: `^cluster\.((.+?)\.)`}}},
			cases: []extractCase{{"cluster.foo.upstream_rq_200", "cluster.upstream_rq",
				[]Tag{{ResponseCode, "200"}, {ClusterName, "foo"}, {"my_cluster", "foo"}}}},
		},
		{
			desc: "prefixed custom regex with a default name loses to the default",
			cfg:  Config{Custom: []Spec{{TagName: ClusterName, Regex: `^cluster\.((.+?)\.)upstream`}}},
			cases: []extractCase{{"cluster.foo.upstream_cx_total", "cluster.upstream_cx_total",
				[]Tag{{ClusterName, "foo"}}}},
		},
		{
			desc: "unprefixed custom regex with a default name wins over a prefixed default",
			cfg:  Config{Custom: []Spec{{TagName: ClusterName, Regex: `^(?:cluster)\.(([^.]+)_svc\.)`}}},
			cases: []extractCase{
				{"cluster.foo_svc.upstream_cx_total", "cluster.upstream_cx_total", []Tag{{ClusterName, "foo"}}},
				{"cluster.bar.upstream_cx_total", "cluster.upstream_cx_total", []Tag{{ClusterName, "bar"}}},
			},
		},
		{
			desc: "one capture group is both removed and the value",
			cfg:  Config{UseAllDefaultTags: boolPtr(false), Custom: []Spec{{TagName: "listener_port", Regex: `^listener\.(\d+?\.)`}}},
			cases: []extractCase{{"listener.80.downstream_cx_total", "listener.downstream_cx_total",
				[]Tag{{"listener_port", "80."}}}},
		},
		{
			desc:  "no capture group never matches",
			cfg:   Config{UseAllDefaultTags: boolPtr(false), Custom: []Spec{{TagName: "x", Regex: `^listener\.`}}},
			cases: []extractCase{{"listener.80.downstream_cx_total", "listener.80.downstream_cx_total", nil}},
		},
		{
			desc: "custom regex keeps an empty second group as the value",
			cfg:  Config{UseAllDefaultTags: boolPtr(false), Custom: []Spec{{TagName: "x", Regex: `^a\.(b(c?)\.)`}}},
			cases: []extractCase{
				{"a.b.d", "a.d", []Tag{{"x", ""}}},
				{"a.bc.d", "a.d", []Tag{{"x", "c"}}},
			},
		},
		{
			desc:  "custom regex with an unmatched first group adds an empty tag and removes nothing",
			cfg:   Config{UseAllDefaultTags: boolPtr(false), Custom: []Spec{{TagName: "x", Regex: `^a\.(?:(b)|c)`}}},
			cases: []extractCase{{"a.c", "a.c", []Tag{{"x", ""}}}},
		},
		{
			desc: "tag name alone selects the default extractors of that name",
			cfg:  Config{UseAllDefaultTags: boolPtr(false), Custom: []Spec{{TagName: ClusterName}}},
			cases: []extractCase{{"cluster.foo.upstream_rq_200", "cluster.upstream_rq_200",
				[]Tag{{ClusterName, "foo"}}}},
		},
		{
			desc: "tag name alone selects every extractor of a name with several",
			cfg:  Config{UseAllDefaultTags: boolPtr(false), Custom: []Spec{{TagName: HTTPConnManagerPrefix}}},
			cases: []extractCase{
				{"http.ingress.downstream_rq_2xx", "http.downstream_rq_2xx", []Tag{{HTTPConnManagerPrefix, "ingress"}}},
				{"listener.1.2.3.4_80.http.ingress.downstream_rq_2xx", "listener.1.2.3.4_80.http.downstream_rq_2xx",
					[]Tag{{HTTPConnManagerPrefix, "ingress"}}},
			},
		},
		{
			desc: "a default selected twice contributes once",
			cfg:  Config{Custom: []Spec{{TagName: ClusterName}}},
			cases: []extractCase{{"cluster.foo.upstream_cx_total", "cluster.upstream_cx_total",
				[]Tag{{ClusterName, "foo"}}}},
		},
		{
			desc: "use_all_default_tags false extracts nothing by itself",
			cfg:  Config{UseAllDefaultTags: boolPtr(false)},
			cases: []extractCase{
				{"cluster.foo.upstream_rq_200", "cluster.foo.upstream_rq_200", nil},
				{"listener.0.0.0.0_80.worker_0.downstream_cx_total", "listener.0.0.0.0_80.worker_0.downstream_cx_total", nil},
			},
		},
		{
			desc: "use_all_default_tags true is the default",
			cfg:  Config{UseAllDefaultTags: boolPtr(true)},
			cases: []extractCase{{"cluster.foo.upstream_rq_200", "cluster.upstream_rq",
				[]Tag{{ResponseCode, "200"}, {ClusterName, "foo"}}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			runExtract(t, mustNew(t, tt.cfg), tt.cases)
		})
	}
}

func TestFixedTags(t *testing.T) {
	tests := []struct {
		desc      string
		cfg       Config
		cases     []extractCase
		wantFixed []Tag
	}{
		{
			desc: "command-line tags come after the unprefixed defaults",
			cfg:  Config{Fixed: []Tag{{"region", "eu"}, {"zone", "a"}}},
			cases: []extractCase{
				{"cluster.foo.upstream_rq_200", "cluster.upstream_rq",
					[]Tag{{ResponseCode, "200"}, {"region", "eu"}, {"zone", "a"}, {ClusterName, "foo"}}},
				{"server.uptime", "server.uptime", []Tag{{"region", "eu"}, {"zone", "a"}}},
				{"nodots", "nodots", []Tag{{"region", "eu"}, {"zone", "a"}}},
			},
			wantFixed: []Tag{{"region", "eu"}, {"zone", "a"}},
		},
		{
			desc: "fixed_value entries follow command-line tags",
			cfg: Config{
				Fixed:  []Tag{{"region", "eu"}},
				Custom: []Spec{{TagName: "tier", FixedValue: "gold"}},
			},
			cases: []extractCase{{"cluster.foo.upstream_cx_total", "cluster.upstream_cx_total",
				[]Tag{{"region", "eu"}, {"tier", "gold"}, {ClusterName, "foo"}}}},
			wantFixed: []Tag{{"region", "eu"}, {"tier", "gold"}},
		},
		{
			desc: "a fixed tag named like a default shadows it and nothing is removed",
			cfg:  Config{Fixed: []Tag{{ClusterName, "fixed"}}},
			cases: []extractCase{{"cluster.foo.upstream_cx_total", "cluster.foo.upstream_cx_total",
				[]Tag{{ClusterName, "fixed"}}}},
			wantFixed: []Tag{{ClusterName, "fixed"}},
		},
		{
			desc: "a fixed value that looks like an anchored regex gets a prefix, as in Envoy",
			cfg:  Config{UseAllDefaultTags: boolPtr(false), Custom: []Spec{{TagName: "t", FixedValue: `^foo\.bar`}}},
			cases: []extractCase{
				{"foo.x", "foo.x", []Tag{{"t", `^foo\.bar`}}},
				{"bar.x", "bar.x", nil},
			},
			wantFixed: []Tag{{"t", `^foo\.bar`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p := mustNew(t, tt.cfg)
			runExtract(t, p, tt.cases)
			if diff := cmp.Diff(tt.wantFixed, p.FixedTags()); diff != "" {
				t.Errorf("FixedTags() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		desc string
		spec Spec
		want string
	}{
		{"bad regex", Spec{TagName: "x", Regex: "+invalid"},
			`stats_config.stats_tags[1].regex = "+invalid": must be a valid ECMAScript regular expression`},
		{"unbalanced lookahead", Spec{TagName: "x", Regex: `^a(?=\.`},
			`stats_config.stats_tags[1].regex = "^a(?=\\.": must be a valid ECMAScript regular expression`},
		{"empty tag name", Spec{Regex: `^a\.(b)`},
			`stats_config.stats_tags[1].tag_name is empty`},
		{"unknown default", Spec{TagName: "no_such_tag"},
			`stats_config.stats_tags[1].tag_name = "no_such_tag": no regex specified`},
		{"regex and fixed value", Spec{TagName: "x", Regex: "(a)", FixedValue: "v"},
			`stats_config.stats_tags[1]: regex "(a)" and fixed_value "v" are both set`},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			_, err := New(Config{Custom: []Spec{{TagName: "ok", Regex: "(a)"}, tt.spec}})
			if err == nil {
				t.Fatalf("New() error = nil; want one containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New() error = %q; want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestExtractAppends(t *testing.T) {
	p := mustNew(t, Config{})
	in := []Tag{{"pre", "existing"}, {ClusterName, "given"}}
	got, tags := p.Extract("cluster.foo.upstream_cx_total", in)
	if got != "cluster.upstream_cx_total" {
		t.Errorf("Extract() name = %q; want %q", got, "cluster.upstream_cx_total")
	}
	// Tags already in the slice do not take part in the one-per-name rule.
	want := []Tag{{"pre", "existing"}, {ClusterName, "given"}, {ClusterName, "foo"}}
	if diff := cmp.Diff(want, tags); diff != "" {
		t.Errorf("Extract() tags mismatch (-want +got):\n%s", diff)
	}
}

func TestNilProducer(t *testing.T) {
	var p *Producer
	got, tags := p.Extract("cluster.foo.x", nil)
	if got != "cluster.foo.x" || tags != nil {
		t.Errorf("nil Producer Extract() = %q, %v; want the name unchanged and no tags", got, tags)
	}
	if p.FixedTags() != nil {
		t.Errorf("nil Producer FixedTags() = %v; want nil", p.FixedTags())
	}
	got, tags = (&Producer{}).Extract("cluster.foo.x", nil)
	if got != "cluster.foo.x" || tags != nil {
		t.Errorf("zero Producer Extract() = %q, %v; want the name unchanged and no tags", got, tags)
	}
}

func TestExtractConcurrent(t *testing.T) {
	p := mustNew(t, Config{Fixed: []Tag{{"region", "eu"}}})
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			var buf []Tag
			for range 200 {
				name, tags := p.Extract("listener.0.0.0.0_10000.http.ingress_http.downstream_rq_2xx", buf[:0])
				if name != "listener.http.downstream_rq_xx" || len(tags) != 4 {
					t.Errorf("Extract() = %q, %v", name, tags)
					return
				}
				buf = tags
			}
		}()
	}
	for range 4 {
		<-done
	}
}

// TestCustomRegexECMAScript: stats_config.stats_tags regexes are ECMAScript (Envoy's std::regex),
// so lookahead, which RE2 lacks, works, with the same tag and name as Envoy.
func TestCustomRegexECMAScript(t *testing.T) {
	p := mustNew(t, Config{UseAllDefaultTags: new(false), Custom: []Spec{
		// Istio's shape: a tag from a listener stat, the prefix checked by lookahead.
		{TagName: "http_conn", Regex: `^listener(?=\.).*?\.http\.(((?:[_.[:digit:]]*|[_\[\]aAbBcCdDeEfF[:digit:]]*))\.)`},
		{TagName: "reporter", Regex: `(reporter=\.=(.*?);\.;)`},
		{TagName: "cluster", Regex: `^cluster(?=\.)\.((\w+)\.)`},
	}})
	runExtract(t, p, []extractCase{
		{"listener.0.0.0.0_80.http.10.1.2.3_8080.downstream_rq", "listener.0.0.0.0_80.http.downstream_rq",
			[]Tag{{"http_conn", "10.1.2.3_8080"}}},
		{"istio.reporter=.=destination;.;requests_total", "istio.requests_total",
			[]Tag{{"reporter", "destination"}}},
		{"cluster.é.x", "cluster.é.x", nil},
		{"cluster.web.upstream_rq", "cluster.upstream_rq", []Tag{{"cluster", "web"}}},
	})
}
