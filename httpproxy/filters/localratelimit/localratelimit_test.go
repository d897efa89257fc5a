package localratelimit

import (
	"net/http"
	"strings"
	"testing"
	"time"

	lrlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
	"github.com/legateproxy/legate/httpproxy/route"
)

// fromYAML makes the filter's typed_config from YAML.
func fromYAML(t testing.TB, y string) *anypb.Any {
	t.Helper()
	return filtertest.AnyFromYAML(t, y, &lrlv3.LocalRateLimit{})
}

func TestConfig(t *testing.T) {
	const bucket = "token_bucket: {max_tokens: 5, fill_interval: 1s}\n"
	tests := []struct {
		name, yaml, wantErr string
		check               func(t *testing.T, c *Config)
	}{
		{name: "defaults", yaml: "stat_prefix: rl\n" + bucket, check: func(t *testing.T, c *Config) {
			if c.status != 429 || c.enabled.Numerator != 0 || c.enforced.Numerator != 0 || !c.consumeDefault || c.xRateLimitHeader ||
				c.bucket.tokensPerFill != 1 || c.bucket.maxTokens != 5 || c.statPrefix != "rl.http_local_rate_limit." {
				t.Errorf("config = %+v; want 429, disabled, unenforced, default bucket consumed, 1 token per fill", c)
			}
		}},
		{name: "status below 400 is 429", yaml: "stat_prefix: rl\nstatus: {code: OK}\n", check: func(t *testing.T, c *Config) {
			if c.status != 429 || c.bucket != nil {
				t.Errorf("status = %d, bucket %v; want 429 and no bucket", c.status, c.bucket)
			}
		}},
		{name: "every implemented field", yaml: `stat_prefix: rl
status: {code: ServiceUnavailable}
token_bucket: {max_tokens: 5, tokens_per_fill: 2, fill_interval: 2s}
filter_enabled: {runtime_key: rl.on, default_value: {numerator: 50}}
filter_enforced: {default_value: {numerator: 100}}
response_headers_to_add: [{header: {key: x-limited, value: "yes"}}]
request_headers_to_add_when_not_enforced: [{header: {key: x-would-limit, value: "1"}}]
enable_x_ratelimit_headers: DRAFT_VERSION_03
always_consume_default_token_bucket: false
stage: 1
rate_limits:
- {stage: 1, actions: [{generic_key: {descriptor_value: a}}]}
- {actions: [{remote_address: {}}]}
descriptors:
- {entries: [{key: generic_key, value: a}], token_bucket: {max_tokens: 1, fill_interval: 60s}}
- {entries: [{key: generic_key, value: b}], token_bucket: {max_tokens: 1, fill_interval: 1s}}
`, check: func(t *testing.T, c *Config) {
			if c.status != 503 || c.enabled.Key != "rl.on" || c.enabled.Numerator != 50 || c.enforced.Numerator != 100 ||
				c.consumeDefault || !c.xRateLimitHeader || len(c.rateLimits) != 1 || len(c.descriptors) != 2 ||
				c.descriptors[0].entries[0].Value != "a" || c.requestHeaders == nil || c.responseHeaders == nil {
				t.Errorf("config = %+v; want every field read, stage 1's rate limit only, the slowest descriptor first", c)
			}
		}},
		{name: "no stat_prefix", yaml: bucket, wantErr: "StatPrefix"},
		{name: "short fill interval", yaml: "stat_prefix: rl\ntoken_bucket: {max_tokens: 5, fill_interval: 0.01s}\n", wantErr: "token_bucket.fill_interval = 10ms: must be at least 50ms"},
		{name: "per connection", yaml: "stat_prefix: rl\nlocal_rate_limit_per_downstream_connection: true\n", wantErr: "local_rate_limit_per_downstream_connection: not implemented by Legate"},
		{name: "cluster limit", yaml: "stat_prefix: rl\nlocal_cluster_rate_limit: {}\n", wantErr: "local_cluster_rate_limit: not implemented"},
		{name: "resource exhausted", yaml: "stat_prefix: rl\nrate_limited_as_resource_exhausted: true\n", wantErr: "rate_limited_as_resource_exhausted"},
		{name: "vh rate limits", yaml: "stat_prefix: rl\nvh_rate_limits: INCLUDE\n", wantErr: "vh_rate_limits"},
		{name: "descriptors from routes", yaml: "stat_prefix: rl\ndescriptors: [{entries: [{key: k, value: v}], token_bucket: {max_tokens: 1, fill_interval: 1s}}]\n", wantErr: "set the filter's rate_limits"},
		{name: "shadow descriptor", yaml: "stat_prefix: rl\nrate_limits: [{actions: [{remote_address: {}}]}]\ndescriptors: [{entries: [{key: k, value: v}], token_bucket: {max_tokens: 1, fill_interval: 1s}, shadow_mode: true}]\n", wantErr: "descriptors[0].shadow_mode"},
		{name: "unimplemented action", yaml: "stat_prefix: rl\nrate_limits: [{actions: [{remote_address_match: {descriptor_value: v, address_matcher: {}}}]}]\n", wantErr: "rate_limits[0].actions[0]: *routev3.RateLimit_Action_RemoteAddressMatch_: not implemented by Legate"},
		{name: "rate limit override", yaml: "stat_prefix: rl\nrate_limits: [{actions: [{remote_address: {}}], limit: {dynamic_metadata: {metadata_key: {key: k, path: [{key: p}]}}}}]\n", wantErr: "rate_limits[0].limit: not implemented"},
		{name: "bad header to add", yaml: "stat_prefix: rl\nresponse_headers_to_add: [{header: {key: ':status', value: x}}]\n", wantErr: "response_headers_to_add[0].header.key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := FromAny(fromYAML(t, tt.yaml), &filter.Context{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("FromAny error = %v; want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, f.cfg)
		})
	}
	if _, err := FromAny(nil, nil); err == nil {
		t.Error("FromAny(nil) = nil error; want typed_config required")
	}
}

func TestBucket(t *testing.T) {
	start := time.Unix(1000, 0)
	b := newBucket(3, 2, time.Second)
	take := func(at time.Duration, wantOK bool, wantLeft uint32, wantReset time.Duration) {
		t.Helper()
		ok, left, reset := b.take(start.Add(at))
		if ok != wantOK || left != wantLeft || reset != wantReset {
			t.Errorf("take at %v = %v, %d, %v; want %v, %d, %v", at, ok, left, reset, wantOK, wantLeft, wantReset)
		}
	}
	take(0, true, 2, time.Second)
	take(0, true, 1, time.Second)
	take(100*time.Millisecond, true, 0, 900*time.Millisecond)
	take(999*time.Millisecond, false, 0, time.Millisecond)
	take(time.Second, true, 1, time.Second)    // one fill: 2 tokens
	take(10*time.Second, true, 2, time.Second) // many fills: capped at 3
}

// fixedClock is a clock a test moves.
type fixedClock struct{ t time.Time }

func (c *fixedClock) now() time.Time { return c.t }

// TestDescriptors: the request's descriptors pick the buckets; a request without one uses the
// default bucket only, and with always_consume_default_token_bucket off a matched descriptor
// spares the default bucket.
func TestDescriptors(t *testing.T) {
	f, err := FromAny(fromYAML(t, `stat_prefix: rl
token_bucket: {max_tokens: 2, fill_interval: 3600s}
filter_enabled: {default_value: {numerator: 100}}
filter_enforced: {default_value: {numerator: 100}}
always_consume_default_token_bucket: false
rate_limits:
- actions: [{request_headers: {header_name: x-user, descriptor_key: user}}]
- actions: [{header_value_match: {descriptor_value: admin, headers: [{name: ":path", string_match: {prefix: /admin}}]}}]
descriptors:
- {entries: [{key: user, value: alice}], token_bucket: {max_tokens: 1, fill_interval: 3600s}}
- {entries: [{key: user}], token_bucket: {max_tokens: 3, fill_interval: 3600s}}
- {entries: [{key: header_match, value: admin}], token_bucket: {max_tokens: 1, fill_interval: 7200s}}
`), &filter.Context{})
	if err != nil {
		t.Fatal(err)
	}
	clk := &fixedClock{t: time.Unix(1000, 0)}
	f.now = clk.now
	send := func(path, user string) int {
		h := http.Header{}
		if user != "" {
			h.Set("X-User", user)
		}
		x := &filter.Exchange{Request: &route.Request{Path: path, Method: "GET", Header: h}, Downstream: filtertest.Routed{}}
		if r := f.OnRequest(x); r != nil {
			return r.Status
		}
		return 200
	}
	steps := []struct {
		path, user string
		want       int
	}{
		{"/", "alice", 200}, // alice's bucket (1) and any user's bucket (3 → 2)
		{"/", "alice", 429}, // alice's bucket is empty
		{"/", "bob", 200},   // any user (2 → 1)
		{"/", "carol", 200}, // any user (1 → 0)
		{"/", "dave", 429},  // any user is empty
		{"/", "", 200},      // no descriptor: the default bucket (2 → 1)
		{"/admin", "", 200}, // the admin descriptor (1 → 0); the default bucket is spared
		{"/admin", "", 429}, // the admin descriptor is empty
		{"/", "", 200},      // the default bucket still has its last token
		{"/", "", 429},      // and now it is empty
	}
	for i, s := range steps {
		if got := send(s.path, s.user); got != s.want {
			t.Errorf("step %d: %s as %q = %d; want %d", i, s.path, s.user, got, s.want)
		}
	}
	if st := f.cfg.stats; st.Enabled.Value() != 10 || st.OK.Value() != 6 || st.RateLimited.Value() != 4 || st.Enforced.Value() != 4 {
		t.Errorf("stats enabled %d ok %d rate_limited %d enforced %d; want 10 6 4 4", st.Enabled.Value(), st.OK.Value(), st.RateLimited.Value(), st.Enforced.Value())
	}
}

// BenchmarkLocalRateLimit is the filter's cost for an allowed request on its default bucket.
func BenchmarkLocalRateLimit(b *testing.B) {
	f, err := FromAny(fromYAML(b, `stat_prefix: rl
token_bucket: {max_tokens: 1000000000, tokens_per_fill: 1000000000, fill_interval: 1s}
filter_enabled: {default_value: {numerator: 100}}
filter_enforced: {default_value: {numerator: 100}}
`), &filter.Context{})
	if err != nil {
		b.Fatal(err)
	}
	req := &route.Request{Path: "/", Method: "GET", Header: http.Header{}}
	h := http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		x := filter.Exchange{Request: req, Downstream: filtertest.Routed{}}
		if f.OnRequest(&x) != nil {
			b.Fatal("limited")
		}
		f.OnResponse(&x, h)
	}
}
