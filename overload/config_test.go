package overload

import (
	"fmt"
	"strings"
	"testing"
	"time"

	overloadv3 "github.com/envoyproxy/go-control-plane/envoy/config/overload/v3"
	fixedheapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"github.com/legateproxy/legate/internal/registry"

	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/cpu_utilization/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
)

const (
	heapMonitor = `{name: envoy.resource_monitors.fixed_heap, typed_config: {"@type": type.googleapis.com/envoy.extensions.resource_monitors.fixed_heap.v3.FixedHeapConfig, max_heap_size_bytes: 1000}}`
	connMonitor = `{name: envoy.resource_monitors.global_downstream_max_connections, typed_config: {"@type": type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig, max_active_downstream_connections: 10}}`
)

func parse(t *testing.T, y string) (*Config, error) {
	t.Helper()
	return FromProto(decode(t, y), nil)
}

// decode reads an overload_manager from YAML.
func decode(t *testing.T, y string) *overloadv3.OverloadManager {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	var pb overloadv3.OverloadManager
	if err := protojson.Unmarshal(j, &pb); err != nil {
		t.Fatalf("protojson.Unmarshal(%s): %v", j, err)
	}
	return &pb
}

// TestFromProtoConverts checks the monitors, the actions with threshold and scaled triggers,
// and refresh_interval's default of 1 s.
func TestFromProtoConverts(t *testing.T) {
	got, err := parse(t, "resource_monitors: ["+heapMonitor+", "+connMonitor+"]\n"+
		"actions:\n"+
		"- {name: envoy.overload_actions.stop_accepting_requests, triggers: [{name: envoy.resource_monitors.fixed_heap, threshold: {value: 0.95}}]}\n"+
		"- {name: envoy.overload_actions.disable_http_keepalive, triggers: [{name: envoy.resource_monitors.fixed_heap, scaled: {scaling_threshold: 0.8, saturation_threshold: 0.9}}, {name: envoy.resource_monitors.global_downstream_max_connections, threshold: {value: 0.5}}]}\n")
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		RefreshInterval: time.Second,
		Monitors:        []Monitor{{Name: FixedHeap, MaxHeapBytes: 1000}, {Name: GlobalConnections, MaxConnections: 10}},
		Actions: []Action{
			{Name: StopAcceptingRequests, Triggers: []Trigger{{Monitor: FixedHeap, Scaling: 0.95, Saturation: 0.95}}},
			{Name: DisableHTTPKeepalive, Triggers: []Trigger{{Monitor: FixedHeap, Scaling: 0.8, Saturation: 0.9}, {Monitor: GlobalConnections, Scaling: 0.5, Saturation: 0.5}}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FromProto (-want +got):\n%s", diff)
	}
	got, err = parse(t, "refresh_interval: 0.25s\nresource_monitors: ["+heapMonitor+"]")
	if err != nil || got.RefreshInterval != 250*time.Millisecond {
		t.Errorf("refresh_interval 0.25s: got %+v, %v", got, err)
	}
}

// TestFromProtoRefuses checks that every monitor, action and option Legate does not implement
// is refused with its field path, as are inconsistent triggers.
func TestFromProtoRefuses(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown monitor", `resource_monitors: [{name: envoy.resource_monitors.cpu_utilization, typed_config: {"@type": type.googleapis.com/envoy.extensions.resource_monitors.cpu_utilization.v3.CpuUtilizationConfig}}]`,
			`overload_manager.resource_monitors[0].name: resource monitor "envoy.resource_monitors.cpu_utilization": not implemented by Legate`},
		{"reduce_timeouts without typed_config", reduceTimeouts(""), "overload_manager.actions[0].typed_config: required"},
		{"reduce_timeouts without timers", reduceTimeouts("[]"), "overload_manager.actions[0].typed_config.timer_scale_factors: at least one timer is required"},
		{"stream flush timer", reduceTimeouts("[{timer: HTTP_DOWNSTREAM_STREAM_FLUSH, min_scale: {value: 10}}]"),
			"overload_manager.actions[0].typed_config.timer_scale_factors[0].timer: HTTP_DOWNSTREAM_STREAM_FLUSH: not implemented by Legate"},
		{"unspecified timer", reduceTimeouts("[{min_scale: {value: 10}}]"), "overload_manager.actions[0].typed_config.timer_scale_factors[0].timer: UNSPECIFIED is not a timer type"},
		{"duplicate timer", reduceTimeouts("[{timer: HTTP_DOWNSTREAM_STREAM_IDLE, min_scale: {value: 10}}, {timer: HTTP_DOWNSTREAM_STREAM_IDLE, min_timeout: 1s}]"),
			"overload_manager.actions[0].typed_config.timer_scale_factors[1].timer: duplicate entry for HTTP_DOWNSTREAM_STREAM_IDLE"},
		{"no minimum", reduceTimeouts("[{timer: HTTP_DOWNSTREAM_STREAM_IDLE}]"), "overload_manager.actions[0].typed_config.timer_scale_factors[0]: min_timeout or min_scale is required"},
		{"min_scale over 100", reduceTimeouts("[{timer: HTTP_DOWNSTREAM_STREAM_IDLE, min_scale: {value: 101}}]"),
			"overload_manager.actions[0].typed_config.timer_scale_factors[0].min_scale.value: 101 is not in [0, 100]"},
		{"negative min_timeout", reduceTimeouts("[{timer: HTTP_DOWNSTREAM_STREAM_IDLE, min_timeout: -1s}]"),
			"overload_manager.actions[0].typed_config.timer_scale_factors[0].min_timeout: must be a non-negative duration"},
		{"reset_high_memory_stream", "resource_monitors: [" + heapMonitor + "]\nactions: [{name: envoy.overload_actions.reset_high_memory_stream, triggers: [{name: envoy.resource_monitors.fixed_heap, threshold: {value: 0.9}}]}]",
			`overload_manager.actions[0].name: overload action "envoy.overload_actions.reset_high_memory_stream": not implemented by Legate`},
		{"action typed_config", "resource_monitors: [" + heapMonitor + "]\nactions: [{name: envoy.overload_actions.stop_accepting_requests, typed_config: {\"@type\": type.googleapis.com/envoy.config.overload.v3.ShrinkHeapConfig}, triggers: [{name: envoy.resource_monitors.fixed_heap, threshold: {value: 0.9}}]}]",
			"overload_manager.actions[0].typed_config: set; not implemented by Legate"},
		{"shrink_heap timer_interval", "resource_monitors: [" + heapMonitor + "]\nactions: [{name: envoy.overload_actions.shrink_heap, typed_config: {\"@type\": type.googleapis.com/envoy.config.overload.v3.ShrinkHeapConfig, timer_interval: 0s}, triggers: [{name: envoy.resource_monitors.fixed_heap, threshold: {value: 0.9}}]}]",
			"overload_manager.actions[0].typed_config.timer_interval: must be a positive duration"},
		{"shrink_heap typed_config type", "resource_monitors: [" + heapMonitor + "]\nactions: [{name: envoy.overload_actions.shrink_heap, typed_config: {\"@type\": type.googleapis.com/envoy.config.overload.v3.ScaleTimersOverloadActionConfig}, triggers: [{name: envoy.resource_monitors.fixed_heap, threshold: {value: 0.9}}]}]",
			"overload_manager.actions[0].typed_config: want envoy.config.overload.v3.ShrinkHeapConfig"},
		{"loadshed_points", "loadshed_points: [{name: envoy.load_shed_points.tcp_listener_accept}]", "overload_manager.loadshed_points: set; not implemented by Legate"},
		{"buffer_factory_config", "buffer_factory_config: {minimum_account_to_track_power_of_two: 10}", "overload_manager.buffer_factory_config: set; not implemented by Legate"},
		{"max_heap_size_bytes_runtime", `resource_monitors: [{name: envoy.resource_monitors.fixed_heap, typed_config: {"@type": type.googleapis.com/envoy.extensions.resource_monitors.fixed_heap.v3.FixedHeapConfig, max_heap_size_bytes: 1, max_heap_size_bytes_runtime: {default_value: 1, runtime_key: k}}}]`,
			"overload_manager.resource_monitors[0].typed_config.max_heap_size_bytes_runtime: set; not implemented by Legate"},
		{"no heap size", `resource_monitors: [{name: envoy.resource_monitors.fixed_heap, typed_config: {"@type": type.googleapis.com/envoy.extensions.resource_monitors.fixed_heap.v3.FixedHeapConfig}}]`,
			"overload_manager.resource_monitors[0].typed_config.max_heap_size_bytes: must be greater than 0"},
		{"no typed_config", `resource_monitors: [{name: envoy.resource_monitors.fixed_heap}]`, "overload_manager.resource_monitors[0].typed_config: required"},
		{"duplicate monitor", "resource_monitors: [" + heapMonitor + ", " + heapMonitor + "]", `overload_manager.resource_monitors[1].name: duplicate resource monitor`},
		{"unknown trigger", "resource_monitors: [" + heapMonitor + "]\nactions: [{name: envoy.overload_actions.shrink_heap, triggers: [{name: x, threshold: {value: 0.9}}]}]",
			`overload_manager.actions[0].triggers[0].name: unknown resource monitor "x"`},
		{"scaled order", "resource_monitors: [" + heapMonitor + "]\nactions: [{name: envoy.overload_actions.shrink_heap, triggers: [{name: envoy.resource_monitors.fixed_heap, scaled: {scaling_threshold: 0.9, saturation_threshold: 0.8}}]}]",
			"overload_manager.actions[0].triggers[0].scaled: scaling_threshold (0.9) must be less than saturation_threshold (0.8)"},
		{"no trigger", "resource_monitors: [" + heapMonitor + "]\nactions: [{name: envoy.overload_actions.shrink_heap}]", "overload_manager.actions[0].triggers: at least one trigger is required"},
		{"refresh 0", "refresh_interval: 0s", "overload_manager.refresh_interval: must be a positive duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.yaml)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("FromProto error = %v; want prefix %q", err, tc.want)
			}
		})
	}
}

// reduceTimeouts is an overload_manager with reduce_timeouts triggered by the heap monitor, its
// timer_scale_factors set to timers (no typed_config when empty).
func reduceTimeouts(timers string) string {
	tc := ""
	if timers != "" {
		tc = `, typed_config: {"@type": type.googleapis.com/envoy.config.overload.v3.ScaleTimersOverloadActionConfig, timer_scale_factors: ` + timers + `}`
	}
	return "resource_monitors: [" + heapMonitor + "]\nactions: [{name: envoy.overload_actions.reduce_timeouts" + tc + ", triggers: [{name: envoy.resource_monitors.fixed_heap, scaled: {scaling_threshold: 0.5, saturation_threshold: 0.9}}]}]"
}

// TestFromProtoReduceTimeouts checks reduce_timeouts' timers and their minimums, absolute
// and scaled.
func TestFromProtoReduceTimeouts(t *testing.T) {
	got, err := parse(t, reduceTimeouts("[{timer: HTTP_DOWNSTREAM_CONNECTION_IDLE, min_timeout: 2s}, {timer: HTTP_DOWNSTREAM_STREAM_IDLE, min_scale: {value: 25}}, "+
		"{timer: TRANSPORT_SOCKET_CONNECT, min_timeout: 0s}, {timer: HTTP_DOWNSTREAM_CONNECTION_MAX, min_scale: {value: 50}}]"))
	if err != nil {
		t.Fatal(err)
	}
	want := [numTimers]TimerMinimum{
		ConnectionIdle:         {Set: true, Absolute: 2 * time.Second},
		StreamIdle:             {Set: true, Scale: 0.25, IsScale: true},
		TransportSocketConnect: {Set: true},
		ConnectionMax:          {Set: true, Scale: 0.5, IsScale: true},
	}
	if diff := cmp.Diff(want, got.Actions[0].Timers); diff != "" {
		t.Errorf("timers (-want +got):\n%s", diff)
	}
}

// TestFromProtoShrinkHeap checks shrink_heap's ShrinkHeapConfig and its defaults (10 s,
// 100 MiB, as Envoy's).
func TestFromProtoShrinkHeap(t *testing.T) {
	const action = "resource_monitors: [" + heapMonitor + "]\nactions: [{name: envoy.overload_actions.shrink_heap%s, triggers: [{name: envoy.resource_monitors.fixed_heap, threshold: {value: 0.9}}]}]"
	for _, tc := range []struct {
		typedConfig string
		interval    time.Duration
		unfreed     uint64
	}{
		{"", 10 * time.Second, 100 << 20},
		{`, typed_config: {"@type": type.googleapis.com/envoy.config.overload.v3.ShrinkHeapConfig, timer_interval: 2s, max_unfreed_memory_bytes: 4096}`, 2 * time.Second, 4096},
		{`, typed_config: {"@type": type.googleapis.com/envoy.config.overload.v3.ShrinkHeapConfig, max_unfreed_memory_bytes: 0}`, 10 * time.Second, 0},
	} {
		got, err := parse(t, fmt.Sprintf(action, tc.typedConfig))
		if err != nil {
			t.Fatalf("%q: %v", tc.typedConfig, err)
		}
		if a := got.Actions[0]; a.ShrinkInterval != tc.interval || a.MaxUnfreedBytes != tc.unfreed {
			t.Errorf("%q: interval %v, max unfreed %d; want %v, %d", tc.typedConfig, a.ShrinkInterval, a.MaxUnfreedBytes, tc.interval, tc.unfreed)
		}
	}
}

// TestTriggerState checks threshold and scaled triggers at and around their thresholds.
func TestTriggerState(t *testing.T) {
	th := Trigger{Scaling: 0.5, Saturation: 0.5}
	sc := Trigger{Scaling: 0.5, Saturation: 0.9}
	for _, tc := range []struct {
		tr   Trigger
		p    float64
		want float64
	}{
		{th, 0.49, 0}, {th, 0.5, 1}, {th, 2, 1},
		{sc, 0.4, 0}, {sc, 0.5, 0}, {sc, 0.7, 0.5}, {sc, 0.9, 1}, {sc, 1.5, 1},
	} {
		if got := tc.tr.state(tc.p); got < tc.want-1e-9 || got > tc.want+1e-9 {
			t.Errorf("%+v.state(%v) = %v; want %v", tc.tr, tc.p, got, tc.want)
		}
	}
}

// TestFromProtoUsesTheRegisteredMonitors checks that a resource monitor is converted by the
// decoder the registry has under its name, and that a monitor it lacks is refused.
func TestFromProtoUsesTheRegisteredMonitors(t *testing.T) {
	b := registry.NewBuilder()
	registry.Add(b, Monitors, FixedHeap, &fixedheapv3.FixedHeapConfig{}, func(path string, config proto.Message) (Monitor, error) {
		return Monitor{MaxHeapBytes: 2 * config.(*fixedheapv3.FixedHeapConfig).GetMaxHeapSizeBytes()}, nil
	})
	r, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	c, err := FromProto(decode(t, "resource_monitors: ["+heapMonitor+"]"), r)
	if err != nil || len(c.Monitors) != 1 || c.Monitors[0] != (Monitor{Name: FixedHeap, MaxHeapBytes: 2000}) {
		t.Fatalf("FromProto = %+v, %v; want the registered decoder's monitor", c, err)
	}
	_, err = FromProto(decode(t, "resource_monitors: ["+connMonitor+"]"), r)
	if want := "not implemented by Legate (it implements " + FixedHeap + ")"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("FromProto(unregistered monitor) = %v; want an error containing %q", err, want)
	}
}
