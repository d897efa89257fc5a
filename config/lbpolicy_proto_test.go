package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// lbp returns a cluster "a" whose load_balancing_policy lists the given policies, each a
// "'@type': …" YAML object body.
func lbp(extra string, policies ...string) string {
	y := "name: a\n" + extra + "load_balancing_policy:\n  policies:\n"
	for i, p := range policies {
		y += "  - typed_extension_config:\n      name: p" + string(rune('0'+i)) + "\n      typed_config: {" + p + "}\n"
	}
	return y
}

const lbTypes = "'@type': type.googleapis.com/envoy.extensions.load_balancing_policies."

// lbSettings is what a policy sets in Cluster, for comparison.
type lbSettings struct {
	Policy       string
	RingHash     RingHashLbConfig
	LeastRequest LeastRequestLbConfig
	Maglev       MaglevLbConfig
	CommonLb     CommonLbConfig
}

func settingsOf(c *Cluster) lbSettings {
	return lbSettings{c.LbPolicy, c.RingHash, c.LeastRequest, c.Maglev, c.CommonLb}
}

// TestLoadBalancingPolicy checks that each typed policy produces the same Cluster values as
// the lb_policy spelling of the same settings, and the typed-only mappings.
func TestLoadBalancingPolicy(t *testing.T) {
	tests := []struct {
		name   string
		typed  string
		legacy string // the same cluster with lb_policy; "" when there is none
		want   func(*lbSettings)
	}{
		{
			name:   "round robin",
			typed:  lbp("", lbTypes+"round_robin.v3.RoundRobin"),
			legacy: "name: a\nlb_policy: ROUND_ROBIN",
		},
		{
			name:   "round robin locality weighted",
			typed:  lbp("", lbTypes+"round_robin.v3.RoundRobin, locality_lb_config: {locality_weighted_lb_config: {}}"),
			legacy: "name: a\ncommon_lb_config: {locality_weighted_lb_config: {}}",
		},
		{
			name:   "round robin zone aware",
			typed:  lbp("", lbTypes+"round_robin.v3.RoundRobin, locality_lb_config: {zone_aware_lb_config: {routing_enabled: {value: 40}, min_cluster_size: 3, fail_traffic_on_panic: true}}"),
			legacy: "name: a\ncommon_lb_config: {zone_aware_lb_config: {routing_enabled: {value: 40}, min_cluster_size: 3, fail_traffic_on_panic: true}}",
		},
		{
			name:   "least request",
			typed:  lbp("", lbTypes+"least_request.v3.LeastRequest, choice_count: 5, active_request_bias: {default_value: 0.5, runtime_key: k}"),
			legacy: "name: a\nlb_policy: LEAST_REQUEST\nleast_request_lb_config: {choice_count: 5, active_request_bias: {default_value: 0.5, runtime_key: k}}",
		},
		{
			name:   "least request defaults",
			typed:  lbp("", lbTypes+"least_request.v3.LeastRequest"),
			legacy: "name: a\nlb_policy: LEAST_REQUEST",
		},
		{
			name:   "random",
			typed:  lbp("", lbTypes+"random.v3.Random"),
			legacy: "name: a\nlb_policy: RANDOM",
		},
		{
			name:   "ring hash",
			typed:  lbp("", lbTypes+"ring_hash.v3.RingHash, minimum_ring_size: 64, maximum_ring_size: 4096, hash_function: MURMUR_HASH_2, use_hostname_for_hashing: true"),
			legacy: "name: a\nlb_policy: RING_HASH\nring_hash_lb_config: {minimum_ring_size: 64, maximum_ring_size: 4096, hash_function: MURMUR_HASH_2}\ncommon_lb_config: {consistent_hashing_lb_config: {use_hostname_for_hashing: true}}",
		},
		{
			name:   "ring hash default hash and hostname through consistent hashing config",
			typed:  lbp("", lbTypes+"ring_hash.v3.RingHash, hash_function: DEFAULT_HASH, consistent_hashing_lb_config: {use_hostname_for_hashing: true}, locality_weighted_lb_config: {}"),
			legacy: "name: a\nlb_policy: RING_HASH\ncommon_lb_config: {locality_weighted_lb_config: {}, consistent_hashing_lb_config: {use_hostname_for_hashing: true}}",
		},
		{
			name:   "maglev",
			typed:  lbp("", lbTypes+"maglev.v3.Maglev, table_size: 5003"),
			legacy: "name: a\nlb_policy: MAGLEV\nmaglev_lb_config: {table_size: 5003}",
		},
		{
			name:   "cluster provided for original destination",
			typed:  lbp("type: ORIGINAL_DST\n", lbTypes+"cluster_provided.v3.ClusterProvided"),
			legacy: "name: a\ntype: ORIGINAL_DST\nlb_policy: CLUSTER_PROVIDED",
		},
		{
			name:   "wrr locality over round robin",
			typed:  lbp("", lbTypes+"wrr_locality.v3.WrrLocality, endpoint_picking_policy: {policies: [{typed_extension_config: {name: rr, typed_config: {"+lbTypes+"round_robin.v3.RoundRobin}}}]}"),
			legacy: "name: a\ncommon_lb_config: {locality_weighted_lb_config: {}}",
		},
		{
			name:   "wrr locality over least request skips an unimplemented policy",
			typed:  lbp("", lbTypes+"wrr_locality.v3.WrrLocality, endpoint_picking_policy: {policies: [{typed_extension_config: {name: cswrr, typed_config: {"+lbTypes+"client_side_weighted_round_robin.v3.ClientSideWeightedRoundRobin}}}, {typed_extension_config: {name: lr, typed_config: {"+lbTypes+"least_request.v3.LeastRequest, choice_count: 3}}}]}"),
			legacy: "name: a\nlb_policy: LEAST_REQUEST\nleast_request_lb_config: {choice_count: 3}\ncommon_lb_config: {locality_weighted_lb_config: {}}",
		},
		{
			name:   "first implemented entry wins",
			typed:  lbp("", lbTypes+"pick_first.v3.PickFirst", lbTypes+"maglev.v3.Maglev", lbTypes+"random.v3.Random"),
			legacy: "name: a\nlb_policy: MAGLEV",
		},
		{
			name:   "overrides lb_policy and its config",
			typed:  lbp("lb_policy: RING_HASH\nring_hash_lb_config: {minimum_ring_size: 8}\n", lbTypes+"random.v3.Random"),
			legacy: "name: a\nlb_policy: RANDOM",
		},
		{
			name:   "replaces common_lb_config locality settings, keeps the rest",
			typed:  lbp("common_lb_config: {locality_weighted_lb_config: {}, healthy_panic_threshold: {value: 20}}\n", lbTypes+"random.v3.Random"),
			legacy: "name: a\nlb_policy: RANDOM\ncommon_lb_config: {healthy_panic_threshold: {value: 20}}",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := settingsOf(mustCluster(t, tt.typed))
			want := settingsOf(mustCluster(t, tt.legacy))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("load_balancing_policy settings (-lb_policy form +typed form):\n%s", diff)
			}
		})
	}
}

func TestLoadBalancingPolicyErrors(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"no implemented policy", lbp("", lbTypes+"pick_first.v3.PickFirst"),
			`load_balancing_policy.policies: none of "p0" (type.googleapis.com/envoy.extensions.load_balancing_policies.pick_first.v3.PickFirst) is implemented by Legate`},
		{"empty policies", "name: a\nload_balancing_policy: {}", "load_balancing_policy.policies is empty"},
		{"round robin slow start", lbp("", lbTypes+"round_robin.v3.RoundRobin, slow_start_config: {slow_start_window: 10s}"),
			"load_balancing_policy.policies[0].typed_extension_config.typed_config.slow_start_config: set; not implemented by Legate"},
		{"least request slow start", lbp("", lbTypes+"least_request.v3.LeastRequest, slow_start_config: {slow_start_window: 10s}"),
			"typed_config.slow_start_config: set; not implemented by Legate"},
		{"least request full scan", lbp("", lbTypes+"least_request.v3.LeastRequest, enable_full_scan: true"),
			"typed_config.enable_full_scan = true; not implemented by Legate"},
		{"least request selection method", lbp("", lbTypes+"least_request.v3.LeastRequest, selection_method: FULL_SCAN"),
			"typed_config.selection_method = FULL_SCAN; not implemented by Legate"},
		{"least request choice count", lbp("", lbTypes+"least_request.v3.LeastRequest, choice_count: 1"),
			"typed_config.choice_count = 1; must be >= 2"},
		{"ring hash balance factor", lbp("", lbTypes+"ring_hash.v3.RingHash, hash_balance_factor: 150"),
			"typed_config.hash_balance_factor: set; not implemented by Legate"},
		{"ring hash consistent hashing balance factor", lbp("", lbTypes+"ring_hash.v3.RingHash, consistent_hashing_lb_config: {hash_balance_factor: 150}"),
			"typed_config.consistent_hashing_lb_config.hash_balance_factor: set; not implemented by Legate"},
		{"ring hash hash policy", lbp("", lbTypes+"ring_hash.v3.RingHash, consistent_hashing_lb_config: {hash_policy: [{header: {header_name: x}}]}"),
			"typed_config.consistent_hashing_lb_config.hash_policy: set; not implemented by Legate"},
		{"ring min above max", lbp("", lbTypes+"ring_hash.v3.RingHash, minimum_ring_size: 10, maximum_ring_size: 5"),
			"typed_config.minimum_ring_size = 10; must be <= maximum_ring_size (5)"},
		{"maglev table size", lbp("", lbTypes+"maglev.v3.Maglev, table_size: 100"),
			"typed_config.table_size = 100; must be a prime <= 5000011"},
		{"zone aware forced direct routing", lbp("", lbTypes+"random.v3.Random, locality_lb_config: {zone_aware_lb_config: {force_locality_direct_routing: true}}"),
			"locality_lb_config.zone_aware_lb_config.force_locality_direct_routing = true; not implemented by Legate"},
		{"zone aware locality basis", lbp("", lbTypes+"random.v3.Random, locality_lb_config: {zone_aware_lb_config: {locality_basis: HEALTHY_HOSTS_WEIGHT}}"),
			"zone_aware_lb_config.locality_basis = HEALTHY_HOSTS_WEIGHT; not implemented by Legate"},
		{"wrr locality nested", lbp("", lbTypes+"wrr_locality.v3.WrrLocality, endpoint_picking_policy: {policies: [{typed_extension_config: {name: w, typed_config: {"+lbTypes+"wrr_locality.v3.WrrLocality, endpoint_picking_policy: {policies: [{typed_extension_config: {name: rr, typed_config: {"+lbTypes+"round_robin.v3.RoundRobin}}}]}}}}]}"),
			"a WrrLocality inside a WrrLocality is not supported"},
		{"wrr locality without implemented endpoint policy", lbp("", lbTypes+"wrr_locality.v3.WrrLocality, endpoint_picking_policy: {policies: [{typed_extension_config: {name: pf, typed_config: {"+lbTypes+"pick_first.v3.PickFirst}}}]}"),
			"typed_config.endpoint_picking_policy.policies: none of"},
		{"original dst with round robin", lbp("type: ORIGINAL_DST\n", lbTypes+"round_robin.v3.RoundRobin"),
			"load_balancing_policy = ROUND_ROBIN is not valid for type ORIGINAL_DST"},
		{"cluster provided on static", lbp("", lbTypes+"cluster_provided.v3.ClusterProvided"),
			"load_balancing_policy = CLUSTER_PROVIDED needs type ORIGINAL_DST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pc, err := clusterYAML(t, tt.yaml)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			_, err = ClusterFromProto(pc, Limits{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ClusterFromProto() error = %v; want it to contain %q", err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), `cluster "a": `) {
				t.Errorf("error %q does not name the cluster", err)
			}
		})
	}
}

func TestAggregateClusterProvided(t *testing.T) {
	c := mustCluster(t, lbp("cluster_type: {name: envoy.clusters.aggregate, typed_config: {'@type': type.googleapis.com/envoy.extensions.clusters.aggregate.v3.ClusterConfig, clusters: [x]}}\n", lbTypes+"cluster_provided.v3.ClusterProvided"))
	if c.LbPolicy != "CLUSTER_PROVIDED" {
		t.Errorf("LbPolicy = %q; want CLUSTER_PROVIDED", c.LbPolicy)
	}
}
