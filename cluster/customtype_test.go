package cluster

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/registry"
)

// TestCustomTypesMatchConfig holds the manager's cluster types and the names config accepts
// equal, so a cluster that config accepts always has a behaviour here.
func TestCustomTypesMatchConfig(t *testing.T) {
	r := ownExtensions()
	if r == nil {
		t.Fatal("config's and the manager's registrations conflict")
	}
	var got []string
	for e, ct := range registry.All(r, customTypes) {
		got = append(got, e.Name)
		if ct.dependencies == nil || ct.build == nil {
			t.Errorf("custom type %q = %+v; want dependencies and build set", e.Name, ct)
		}
	}
	if diff := cmp.Diff(config.ClusterTypes(r), got); diff != "" {
		t.Errorf("custom type names mismatch (-config.ClusterTypes +customTypes):\n%s", diff)
	}
}

// TestCustomTypeRejected checks that a hand-built config naming a type the manager does not
// implement (config would refuse it) is an error, not a crash.
func TestCustomTypeRejected(t *testing.T) {
	tests := []struct {
		name string
		ct   *config.CustomClusterType
		want string
	}{
		{name: "unknown name", ct: &config.CustomClusterType{Name: "envoy.clusters.redis"}, want: `cluster_type.name = "envoy.clusters.redis"; must match a supported cluster type (envoy.clusters.aggregate, envoy.clusters.dynamic_forward_proxy)`},
		{name: "missing cluster_type", ct: nil, want: "cluster_type is missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			cfg := parseCluster(t, staticYAML("odd", "10.0.0.1"))
			cfg.Type = config.Custom
			cfg.CustomType = tc.ct
			_, err := e.m.AddOrUpdate(cfg, "1")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("AddOrUpdate() = %v; want an error containing %q", err, tc.want)
			}
		})
	}
	t.Run("aggregate without decoded settings", func(t *testing.T) {
		e := newEnv(t, nil)
		cfg := parseCluster(t, staticYAML("agg", "10.0.0.1"))
		cfg.Type = config.Custom
		cfg.CustomType = &config.CustomClusterType{Name: config.AggregateClusterType}
		if _, err := e.m.AddOrUpdate(cfg, "1"); err != nil {
			t.Fatalf("AddOrUpdate() = %v; want nil", err)
		}
		if h, err := e.m.Get("agg").Pick(nil); err == nil {
			t.Errorf("Pick() on an aggregate without members = %v; want an error", h)
		}
	})
}
