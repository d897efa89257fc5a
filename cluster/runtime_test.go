package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/runtime"
)

// A runtime override of upstream.healthy_panic_threshold takes effect on
// the next pick, without a configuration change.
func TestRuntimePanicThresholdOverride(t *testing.T) {
	rt, err := runtime.New(runtime.Config{Layers: []runtime.LayerConfig{{Name: "admin", Admin: true}}})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *ManagerConfig) { c.Runtime = rt })
	y := staticYAML("web", "10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4") + "common_lb_config: {update_merge_window: 0s}\n"
	if err := e.m.AddStatic([]*config.Cluster{parseCluster(t, y)}); err != nil {
		t.Fatal(err)
	}
	c := e.m.Get("web")
	// One healthy host of four: 25% is below the default 50% panic threshold.
	hosts := c.Snapshot().PrioritySet.Sets()[0].Hosts()
	for _, h := range hosts[1:] {
		h.SetHealthFlag(host.FailedActiveHC)
	}
	c.HealthChanged()
	picked := func() map[string]bool {
		seen := map[string]bool{}
		for range 64 {
			h, err := c.Pick(&lb.Context{})
			if err != nil {
				t.Fatal(err)
			}
			seen[h.Address()] = true
		}
		return seen
	}
	if got := picked(); len(got) != 4 {
		t.Fatalf("in panic, picks reached %v; want every host", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.m.watchRuntime(ctx)
	}()
	if err := rt.Modify(map[string]string{runtime.KeyHealthyPanicThreshold: "10"}); err != nil {
		t.Fatal(err)
	}
	// watchRuntime rebuilds asynchronously and nothing signals the rebuild,
	// so wait (bounded) for picks to leave panic mode.
	deadline := time.After(10 * time.Second)
	for {
		got := picked()
		if len(got) == 1 && got[hosts[0].Address()] {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("with the threshold at 10%%, picks still reach %v; want only the healthy host", got)
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	<-done
}
