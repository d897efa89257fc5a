package cluster

import (
	"fmt"
	"strings"
	"testing"

	"github.com/legateproxy/legate/config"
)

func TestBatch(t *testing.T) {
	t.Run("publishes once at the end", func(t *testing.T) {
		e := newEnv(t, nil)
		if _, err := e.m.AddOrUpdate(parseCluster(t, staticYAML("old", "10.0.0.9")), "1"); err != nil {
			t.Fatal(err)
		}
		if e.m.Get("old") == nil {
			t.Fatal(`Get("old") = nil before the batch; want the cluster`)
		}
		e.m.Batch(func() {
			for i := range 3 {
				if _, err := e.m.AddOrUpdate(parseCluster(t, staticYAML(fmt.Sprint("c", i), "10.0.0.1")), "2"); err != nil {
					t.Fatal(err)
				}
			}
			if !e.m.Remove("old") {
				t.Fatal(`Remove("old") = false; want true`)
			}
			e.m.Batch(func() {}) // nested: the outer batch still defers
			if got := e.m.Get("c0"); got != nil {
				t.Errorf(`Get("c0") inside the batch = %v; want nil (not yet published)`, got.Name())
			}
			if e.m.Get("old") == nil {
				t.Errorf(`Get("old") inside the batch = nil; want the cluster until the batch ends`)
			}
		})
		var got []string
		for _, c := range e.m.Snapshot() {
			got = append(got, c.Name())
		}
		if want := []string{"c0", "c1", "c2"}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Snapshot() after the batch = %v; want %v", got, want)
		}
		e.wantStats(t, map[string]uint64{"cluster_manager.active_clusters": 3, "cluster_manager.warming_clusters": 0})
	})
	t.Run("aggregate rebuilt after the batch", func(t *testing.T) {
		e := newEnv(t, nil)
		agg := aggregateCluster(t, "member")
		if err := e.m.AddStatic([]*config.Cluster{agg}); err != nil {
			t.Fatal(err)
		}
		e.m.Batch(func() {
			if _, err := e.m.AddOrUpdate(parseCluster(t, staticYAML("member", "10.0.0.1")), "1"); err != nil {
				t.Fatal(err)
			}
		})
		h, err := e.m.Get("agg").Pick(nil)
		if err != nil || h.Address() != "10.0.0.1:80" {
			t.Errorf("aggregate Pick() after the batch = %v, %v; want 10.0.0.1:80", h, err)
		}
		e.m.Batch(func() { e.m.Remove("member") })
		if h, err := e.m.Get("agg").Pick(nil); err == nil {
			t.Errorf("aggregate Pick() after removing its member = %v; want an error", h)
		}
	})
}

// aggregateCluster is an envoy.clusters.aggregate cluster called "agg" over members.
func aggregateCluster(t *testing.T, members ...string) *config.Cluster {
	t.Helper()
	return parseCluster(t, `
name: agg
lb_policy: CLUSTER_PROVIDED
cluster_type:
  name: envoy.clusters.aggregate
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.clusters.aggregate.v3.ClusterConfig
    clusters: [`+strings.Join(members, ", ")+`]
`)
}

// TestPublished: Published follows what Get returns for the cluster's name, through an add, a
// replacement, a batch that defers publication and a removal.
func TestPublished(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := e.m.AddOrUpdate(parseCluster(t, staticYAML("a", "10.0.0.1")), "1"); err != nil {
		t.Fatal(err)
	}
	v1 := e.m.Get("a")
	if v1 == nil || !v1.Published() {
		t.Fatalf(`Get("a") = %v; want a published cluster`, v1)
	}
	e.m.Batch(func() {
		if _, err := e.m.AddOrUpdate(parseCluster(t, staticYAML("a", "10.0.0.2")), "2"); err != nil {
			t.Fatal(err)
		}
		if !v1.Published() {
			t.Error("version 1 is not published while the batch still defers its replacement")
		}
	})
	v2 := e.m.Get("a")
	if v2 == v1 || !v2.Published() || v1.Published() {
		t.Errorf("after the replacement: version 1 published %v, version 2 (%p, was %p) published %v; want only version 2", v1.Published(), v2, v1, v2.Published())
	}
	if !e.m.Remove("a") {
		t.Fatal(`Remove("a") = false; want true`)
	}
	if v2.Published() {
		t.Error("a removed cluster is still published")
	}
}
