package tags

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// splitVocabulary holds tokens that make every default extractor match
// somewhere, plus near misses.
var splitVocabulary = []string{
	"cluster", "listener", "http", "vhost", "mongo", "tcp", "udp", "auth", "clientssl", "ratelimit", "sds",
	"proxy_proto", "server", "listener_manager", "thread_local_cluster_manager", "grpc", "ext_authz",
	"user_agent", "fault", "vcluster", "route", "collection", "callsite", "query", "cmd", "dynamodb", "table",
	"capacity", "operation", "error", "__partition_id=ABC1234", "ssl", "ciphers", "curves", "sigalgs",
	"versions", "certificate", "TLSv1", "3", "worker_0", "worker_12", "worker_", "rbac", "policy", "allowed",
	"shadow_denied", "rds", "scoped_rds", "http_local_rate_limit", "local_rate_limit", "admin", "0", "127",
	"0_80", "[__]_443", "v1", "v2", "upstream_rq_200", "upstream_rq_2xx", "_rq_5xx", "downstream_rq_503",
	"x_rq_", "rq_20", "_rq", "_2xx", "ok", "foo", "web", "main_thread", "dns_filter", "connection_limit",
	"thrift", "redis", "listener_local_ratelimit", "AES256-SHA", "X25519", "Query", "", "a-b",
}

// splitExamples are names that each default extractor matches.
var splitExamples = []string{
	"cluster.foo.upstream_rq_200", "cluster.foo.external.upstream_rq_503", "cluster.foo.upstream_rq_2xx",
	"cluster.foo.ssl.ciphers.ECDHE-RSA-AES128-GCM-SHA256", "cluster.g.grpc.svc.method.success",
	"cluster.foo.ssl.curves.P-256", "cluster.foo.ssl.sigalgs.rsa_pss_rsae_sha256",
	"cluster.foo.ssl.certificate.cert1.expiration_unix_time_seconds", "cluster.foo.ext_authz.authz1.ok",
	"listener.0.0.0.0_10000.downstream_cx_total", "listener.[__]_10000.downstream_cx_active",
	"listener.0.0.0.0_10000.worker_0.downstream_cx_total", "listener.admin.http.admin.downstream_rq_4xx",
	"listener.0.0.0.0_10000.http.ingress_http.downstream_rq_2xx", "listener.127.0.0.1_0.ssl.ciphers.AES256-SHA",
	"listener.0.0.0.0_443.ssl.versions.TLSv1.3", "listener.my_stat_prefix.worker_1.downstream_cx_total",
	"http.ingress_http.downstream_rq_2xx", "http.ingress_http.rds.local_route.config_reload",
	"http.rds_connection_manager.rds.route_config.123.update_success", "http.ingress.scoped_rds.my-scopes.v1.config_reload",
	"http.ingress.user_agent.ios.downstream_cx_total", "http.ingress.rbac.rules1.policy.p1.shadow_denied",
	"http.ingress.rbac.policy.my_policy.allowed", "http.ingress.rbac.rules1.denied", "http.ingress.ext_authz.authz1.denied",
	"http.egress_dynamodb_iad.dynamodb.table.bar_table.capacity.Query.__partition_id=ABC1234",
	"http.egress_dynamodb_iad.dynamodb.operation.Query.upstream_rq_time", "http.e.dynamodb.error.bar_table.BadRequest",
	"http.f.fault.fault_cluster.aborts_injected", "vhost.v1.vcluster.other.upstream_rq_200", "vhost.v1.route.r1.upstream_rq_total",
	"server.worker_3.watchdog_miss", "thread_local_cluster_manager.worker_0.clusters_inflated",
	"listener_manager.worker_123.dispatcher.loop_duration_us", "sds.xds_trusted_ca.update_attempt",
	"proxy_proto.pp1.versions.v2.found", "proxy_proto.versions.v1.error", "proxy_proto.pp1.not_found_allowed",
	"mongo.mongo_filter.collection.bar_collection.callsite.baz_callsite.query.scatter_get",
	"mongo.mongo_filter.collection.bar_collection.query.multi_get", "mongo.mongo_filter.cmd.foo_cmd.reply_size",
	"tcp.tcp_prefix.downstream_cx_total", "udp.u.downstream_sess_total", "auth.clientssl.c.auth_ip_allowlist",
	"ratelimit.r.over_limit", "my_rl.http_local_rate_limit.rate_limited", "local_rate_limit.lrl.rate_limited",
	"listener_local_ratelimit.l.rate_limited", "dns_filter.d.queries", "connection_limit.c.active",
	"x.rbac.allowed", "grpc.g.streams_total", "thrift.t.request", "redis.r.command.get.total",
}

// randomSplit picks an example name, changes one of its tokens at random
// half of the time, and splits it after a random dot.
func randomSplit(r *rand.Rand) (prefix, field string) {
	toks := strings.Split(splitExamples[r.IntN(len(splitExamples))], ".")
	if r.IntN(2) == 0 {
		toks[r.IntN(len(toks))] = splitVocabulary[r.IntN(len(splitVocabulary))]
	}
	at := 1 + r.IntN(len(toks)-1)
	return strings.Join(toks[:at], ".") + ".", strings.Join(toks[at:], ".")
}

func randomTokens(r *rand.Rand, n int) string {
	toks := make([]string, n)
	for i := range toks {
		toks[i] = splitVocabulary[r.IntN(len(splitVocabulary))]
	}
	return strings.Join(toks, ".")
}

// splitConfigs are producers the split is checked against: the defaults,
// custom regexes with and without a prefix token, fixed tags, and default
// names selected twice (shared tag names).
func splitConfigs(t testing.TB) map[string]*Producer {
	no := false
	return map[string]*Producer{
		"defaults": mustNew(t, Config{}),
		"custom": mustNew(t, Config{
			Fixed: []Tag{{"region", "eu"}},
			Custom: []Spec{
				{TagName: "custom", Regex: `^cluster\.(?:x\.)?((\w+)_svc\.)`},
				{TagName: "anywhere", Regex: `\.(ok)$`},
				{TagName: ClusterName},
				{TagName: ClusterName, Regex: `^cluster\.((web)\.)`},
				{TagName: "fixed_spec", FixedValue: "v"},
			},
		}),
		"selected": mustNew(t, Config{UseAllDefaultTags: &no, Custom: []Spec{
			{TagName: ClusterName}, {TagName: ResponseCode}, {TagName: HTTPConnManagerPrefix},
			{TagName: LocalHTTPRatelimitPrefix}, {TagName: RBACPrefix}, {TagName: ExtAuthzPrefix},
		}}),
	}
}

type splitResult struct {
	Name string
	Tags []Tag
}

// checkSplit compares Fields.Extract on prefix with Extract on every full
// name; it reports whether the split applied and how many tags it checked.
func checkSplit(t *testing.T, p *Producer, prefix string, fields []string) (applied bool, tags int) {
	t.Helper()
	fs := p.NewFields(fields)
	tmpl, sets, ok := fs.Extract(prefix)
	if !ok {
		return false, 0
	}
	for i, f := range fields {
		wantName, wantTags := p.Extract(prefix+f, nil)
		want := splitResult{wantName, wantTags}
		got := splitResult{tmpl.Name(i), nil}
		if idx := int(tmpl.SetIndexes()[i]); idx < len(sets) {
			got.Tags = sets[idx]
		} else if len(sets) > 0 || idx != 0 {
			t.Fatalf("Fields.Extract(%q) field %q: set index %d of %d sets", prefix, f, idx, len(sets))
		}
		if len(got.Tags) == 0 {
			got.Tags = nil
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Fields(%q).Extract(%q) differs from Extract(%q) (-want +got):\n%s", fields, prefix, prefix+f, diff)
		}
		tags += len(want.Tags)
	}
	return true, tags
}

// TestFieldsExtractMatchesExtract is the equivalence property: over random
// prefixes and field lists built from tokens that trigger every default
// extractor, Fields.Extract, when it applies, gives what Extract gives on
// each full name.
func TestFieldsExtractMatchesExtract(t *testing.T) {
	for cfgName, p := range splitConfigs(t) {
		t.Run(cfgName, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(len(cfgName))))
			applied, total, tagged := 0, 0, 0
			for range 20000 {
				prefix, field := randomSplit(r)
				if r.IntN(4) == 0 {
					prefix = randomTokens(r, 1+r.IntN(5)) + "."
				}
				fields := []string{field}
				for range r.IntN(6) {
					if r.IntN(2) == 0 {
						_, field = randomSplit(r)
					} else {
						field = randomTokens(r, 1+r.IntN(4))
					}
					fields = append(fields, field)
				}
				total++
				if ok, n := checkSplit(t, p, prefix, fields); ok {
					applied++
					tagged += n
				}
				if t.Failed() {
					return
				}
			}
			t.Logf("split applied to %d of %d prefixes, %d tags compared", applied, total, tagged)
			if applied < total/10 || tagged < total {
				t.Errorf("split applied to %d of %d prefixes with %d tags; want at least a tenth and a tag per prefix", applied, total, tagged)
			}
		})
	}
}

// TestFieldsExtractApplies checks that the common shapes take the split path
// and share one template, and that the result is right.
func TestFieldsExtractApplies(t *testing.T) {
	p := mustNew(t, Config{})
	cluster := []string{"upstream_rq_total", "upstream_rq_200", "upstream_rq_5xx", "circuit_breakers.default.cx_open",
		"g3.upstream_rq_per_try_idle_timeout_total_c", "lb_healthy_panic", "ssl.handshake", "ext_authz_x", "grpc"}
	tests := []struct {
		name   string
		prefix string
		fields []string
	}{
		{"cluster", "cluster.service_00001_with_a_long_name.", cluster},
		{"cluster with dots", "cluster.a.", cluster},
		{"vhost", "vhost.v1.", []string{"vcluster.other.upstream_rq_200", "route.r1.upstream_rq_total"}},
		{"tcp", "tcp.ingress.", []string{"downstream_cx_total", "upstream_flush_total"}},
		{"server", "server.", []string{"uptime", "live", "memory_allocated"}},
		{"cluster_manager", "cluster_manager.", []string{"cds.update_success", "active_clusters"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if ok, _ := checkSplit(t, p, tt.prefix, tt.fields); !ok {
				t.Errorf("Fields.Extract(%q) did not apply; want the split path", tt.prefix)
			}
		})
	}
	t.Run("shared template", func(t *testing.T) {
		fs := p.NewFields(cluster)
		t1, s1, ok1 := fs.Extract("cluster.a.")
		t2, s2, ok2 := fs.Extract("cluster.bbbbbbb.")
		if !ok1 || !ok2 || t1 != t2 {
			t.Fatalf("Extract(cluster.a.), Extract(cluster.bbbbbbb.) = %p %v, %p %v; want one shared template", t1, ok1, t2, ok2)
		}
		if got, want := s1[t1.SetIndexes()[0]][0].Value, "a"; got != want {
			t.Errorf("cluster.a. cluster_name = %q; want %q", got, want)
		}
		if got, want := s2[t2.SetIndexes()[0]][0].Value, "bbbbbbb"; got != want {
			t.Errorf("cluster.bbbbbbb. cluster_name = %q; want %q", got, want)
		}
	})
}

func TestFieldsExtractFallsBack(t *testing.T) {
	p := mustNew(t, Config{})
	tests := []struct {
		name   string
		prefix string
		fields []string
	}{
		{"no trailing dot", "cluster.a", []string{"upstream_rq_total"}},
		{"empty field", "cluster.a.", []string{""}},
		{"field starts with dot", "cluster.a.", []string{".x"}},
		{"no fields", "cluster.a.", nil},
		{"listener address in prefix", "listener.0.0.0.0_80.", []string{"downstream_cx_total"}},
		{"short response code field", "cluster.a.upstream", []string{"_rq_200"}},
		{"ssl literal spans the boundary", "cluster.a.ssl.", []string{"ciphers.AES256-SHA"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, ok := p.NewFields(tt.fields).Extract(tt.prefix); ok {
				t.Errorf("Fields.Extract(%q) on %q applied; want a fallback", tt.prefix, tt.fields)
			}
		})
	}
}

// FuzzFieldsExtract checks the equivalence property on arbitrary prefixes
// and field names.
func FuzzFieldsExtract(f *testing.F) {
	for _, seed := range [][3]string{
		{"cluster.web.", "upstream_rq_200", "ssl.ciphers.AES256-SHA"},
		{"cluster.a.ssl.", "ciphers.X", "curves.P-256"},
		{"x.", "rbac.y", "http_local_rate_limit.z"},
		{"listener.0.0.0.0_80.", "worker_0.x", "http.ingress.downstream_rq_2xx"},
		{"mongo.m.collection.", "c.callsite.s.query.q", "c.query.x"},
		{"cluster.g.grpc.", "svc.method.success", "x"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	ps := splitConfigs(f)
	f.Fuzz(func(t *testing.T, prefix, a, b string) {
		if len(prefix)+len(a)+len(b) > 512 {
			t.Skip()
		}
		for _, p := range ps {
			checkSplit(t, p, prefix, []string{a, b})
		}
	})
}
