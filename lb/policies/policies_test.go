package policies

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/lb/internal/lbtest"
)

func TestRegistry(t *testing.T) {
	r := Registry()
	want := []string{"CLUSTER_PROVIDED", "LEAST_REQUEST", "MAGLEV", "ORIGINAL_DST_LB", "RANDOM", "RING_HASH", "ROUND_ROBIN"}
	if diff := cmp.Diff(want, r.Policies()); diff != "" {
		t.Errorf("Policies() mismatch (-want +got):\n%s", diff)
	}
	ps := lbtest.PrioritySet(t, lbtest.Hosts(t, 3))
	for _, name := range want {
		t.Run(name, func(t *testing.T) {
			b, err := r.Build(lb.Params{PrioritySet: ps}, &lb.Config{Policy: name})
			if err != nil {
				t.Fatalf("Build(%s) error = %v", name, err)
			}
			ctx := &lb.Context{OverrideHost: ps.Sets()[0].Hosts()[1].Address()}
			if h, err := b.Pick(ctx); err != nil || h == nil {
				t.Errorf("Pick() = %v, %v; want a host", h, err)
			}
		})
	}
	t.Run("unknown", func(t *testing.T) {
		if _, err := r.Build(lb.Params{PrioritySet: ps}, &lb.Config{Policy: "LOAD_BALANCING_POLICY_CONFIG"}); err == nil {
			t.Errorf("Build(unknown) error = nil; want error")
		}
	})
	t.Run("duplicate", func(t *testing.T) {
		if err := r.Register(lb.RoundRobin, nil); err == nil {
			t.Errorf("Register(ROUND_ROBIN) twice error = nil; want error")
		}
	})
	t.Run("no hosts", func(t *testing.T) {
		empty := lbtest.PrioritySet(t, nil)
		for _, name := range want {
			b, err := r.Build(lb.Params{PrioritySet: empty}, &lb.Config{Policy: name})
			if err != nil {
				t.Fatalf("Build(%s) error = %v", name, err)
			}
			if _, err := b.Pick(&lb.Context{OverrideHost: "1.2.3.4:80"}); !errors.Is(err, lb.ErrNoHealthyHost) {
				t.Errorf("%s: Pick() with no hosts error = %v; want ErrNoHealthyHost", name, err)
			}
		}
	})
}
