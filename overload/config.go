package overload

import (
	"fmt"
	"math"
	"strings"
	"time"

	overloadv3 "github.com/envoyproxy/go-control-plane/envoy/config/overload/v3"
	downstreamconnectionsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	fixedheapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/internal/registry"
)

// The resource monitors and actions Legate implements, by Envoy's names.
const (
	FixedHeap         = "envoy.resource_monitors.fixed_heap"
	GlobalConnections = "envoy.resource_monitors.global_downstream_max_connections"

	StopAcceptingRequests     = "envoy.overload_actions.stop_accepting_requests"
	DisableHTTPKeepalive      = "envoy.overload_actions.disable_http_keepalive"
	StopAcceptingConnections  = "envoy.overload_actions.stop_accepting_connections"
	RejectIncomingConnections = "envoy.overload_actions.reject_incoming_connections"
	ShrinkHeap                = "envoy.overload_actions.shrink_heap"
)

// DefaultRefreshInterval is refresh_interval's default, as in Envoy.
const DefaultRefreshInterval = time.Second

// Config is the bootstrap's overload_manager as Legate implements it.
type Config struct {
	RefreshInterval time.Duration
	Monitors        []Monitor
	Actions         []Action
}

// Monitor is one resource monitor. Exactly one of its limits is set, by Name.
type Monitor struct {
	Name string
	// MaxHeapBytes is fixed_heap's max_heap_size_bytes.
	MaxHeapBytes uint64
	// MaxConnections is global_downstream_max_connections' max_active_downstream_connections.
	MaxConnections int64
}

// Action is one overload action with its triggers; its state is the highest of theirs.
type Action struct {
	Name     string
	Triggers []Trigger
	// Timers are reduce_timeouts' minimums, by Timer; unset for every other action.
	Timers [numTimers]TimerMinimum
	// ShrinkInterval and MaxUnfreedBytes are shrink_heap's ShrinkHeapConfig: while the
	// action is saturated, every ShrinkInterval the free heap is returned to the OS when it
	// holds at least MaxUnfreedBytes.
	ShrinkInterval  time.Duration
	MaxUnfreedBytes uint64
}

// shrink_heap's defaults, as Envoy's heap shrinker's.
const (
	DefaultShrinkInterval  = 10 * time.Second
	DefaultMaxUnfreedBytes = 100 << 20
)

// Trigger turns the pressure of Monitor into an action state in [0, 1]. A threshold trigger
// has Scaling == Saturation: the state is 1 from that pressure on, 0 below.
type Trigger struct {
	Monitor             string
	Scaling, Saturation float64
}

// state is the trigger's action state at pressure p: 0 below the scaling threshold, 1 at or
// over saturation, linear in between (Envoy's ScaledTrigger; a ThresholdTrigger is the case
// with no range).
func (t Trigger) state(p float64) float64 {
	switch {
	case p >= t.Saturation:
		return 1
	case p < t.Scaling:
		return 0
	default:
		return (p - t.Scaling) / (t.Saturation - t.Scaling)
	}
}

// FromProto converts overload_manager; nil when pb is nil. Every monitor, action and field
// Legate does not implement is refused with its path under "overload_manager", never accepted
// and ignored. Resource monitors are those r registers (Monitors); nil r means this
// package's.
func FromProto(pb *overloadv3.OverloadManager, r *registry.Registry) (*Config, error) {
	if pb == nil {
		return nil, nil
	}
	if r == nil {
		b := registry.NewBuilder()
		Register(b)
		var err error
		if r, err = b.Build(); err != nil {
			return nil, err
		}
	}
	const root = "overload_manager"
	if len(pb.GetLoadshedPoints()) > 0 {
		return nil, notImplemented(root + ".loadshed_points")
	}
	if pb.GetBufferFactoryConfig() != nil {
		return nil, notImplemented(root + ".buffer_factory_config")
	}
	c := &Config{RefreshInterval: DefaultRefreshInterval}
	if ri := pb.GetRefreshInterval(); ri != nil {
		if err := ri.CheckValid(); err != nil || ri.AsDuration() <= 0 {
			return nil, fmt.Errorf("%s.refresh_interval: must be a positive duration", root)
		}
		c.RefreshInterval = ri.AsDuration()
	}
	monitors := map[string]bool{}
	for i, m := range pb.GetResourceMonitors() {
		path := fmt.Sprintf("%s.resource_monitors[%d]", root, i)
		mon, err := monitorFromProto(path, m, r)
		if err != nil {
			return nil, err
		}
		if monitors[mon.Name] {
			return nil, fmt.Errorf("%s.name: duplicate resource monitor %q", path, mon.Name)
		}
		monitors[mon.Name] = true
		c.Monitors = append(c.Monitors, mon)
	}
	actions := map[string]bool{}
	for i, a := range pb.GetActions() {
		path := fmt.Sprintf("%s.actions[%d]", root, i)
		act, err := actionFromProto(path, a, monitors)
		if err != nil {
			return nil, err
		}
		if actions[act.Name] {
			return nil, fmt.Errorf("%s.name: duplicate overload action %q", path, act.Name)
		}
		actions[act.Name] = true
		c.Actions = append(c.Actions, act)
	}
	return c, nil
}

func notImplemented(path string) error {
	return fmt.Errorf("%s: set; not implemented by Legate", path)
}

// monitorFromProto converts a resource monitor with the decoder r registers for its name.
func monitorFromProto(path string, m *overloadv3.ResourceMonitor, r *registry.Registry) (Monitor, error) {
	decode, e, ok := registry.Lookup(r, Monitors, m.GetName(), "")
	if !ok {
		var names []string
		for e := range registry.All(r, Monitors) {
			names = append(names, e.Name)
		}
		return Monitor{}, fmt.Errorf("%s.name: resource monitor %q: not implemented by Legate (it implements %s)", path, m.GetName(), strings.Join(names, " and "))
	}
	config := e.Config.ProtoReflect().New().Interface()
	if err := unpack(path, m.GetTypedConfig(), config); err != nil {
		return Monitor{}, err
	}
	out, err := decode(path, config)
	out.Name = m.GetName()
	return out, err
}

// fixedHeap decodes envoy.resource_monitors.fixed_heap.
func fixedHeap(path string, config proto.Message) (Monitor, error) {
	fh := config.(*fixedheapv3.FixedHeapConfig)
	if fh.GetMaxHeapSizeBytesRuntime() != nil {
		return Monitor{}, notImplemented(path + ".typed_config.max_heap_size_bytes_runtime")
	}
	if fh.GetMaxHeapSizeBytes() == 0 {
		return Monitor{}, fmt.Errorf("%s.typed_config.max_heap_size_bytes: must be greater than 0", path)
	}
	return Monitor{MaxHeapBytes: fh.GetMaxHeapSizeBytes()}, nil
}

// globalConnections decodes envoy.resource_monitors.global_downstream_max_connections.
func globalConnections(path string, config proto.Message) (Monitor, error) {
	dc := config.(*downstreamconnectionsv3.DownstreamConnectionsConfig)
	if dc.GetMaxActiveDownstreamConnections() <= 0 {
		return Monitor{}, fmt.Errorf("%s.typed_config.max_active_downstream_connections: must be greater than 0", path)
	}
	return Monitor{MaxConnections: dc.GetMaxActiveDownstreamConnections()}, nil
}

// unpack reads the monitor's typed_config into m; the configuration is required.
func unpack(path string, tc *anypb.Any, m proto.Message) error {
	if tc == nil {
		return fmt.Errorf("%s.typed_config: required", path)
	}
	if err := tc.UnmarshalTo(m); err != nil {
		return fmt.Errorf("%s.typed_config: want %s: %v", path, m.ProtoReflect().Descriptor().FullName(), err)
	}
	return nil
}

func actionFromProto(path string, a *overloadv3.OverloadAction, monitors map[string]bool) (Action, error) {
	out := Action{Name: a.GetName()}
	switch a.GetName() {
	case StopAcceptingRequests, DisableHTTPKeepalive, StopAcceptingConnections, RejectIncomingConnections:
		if a.GetTypedConfig() != nil {
			return out, notImplemented(path + ".typed_config")
		}
	case ShrinkHeap:
		if err := shrinkHeapFromProto(path, a.GetTypedConfig(), &out); err != nil {
			return out, err
		}
	case ReduceTimeouts:
		timers, err := scaleTimersFromProto(path, a.GetTypedConfig())
		if err != nil {
			return out, err
		}
		out.Timers = timers
	default:
		return out, fmt.Errorf("%s.name: overload action %q: not implemented by Legate", path, a.GetName())
	}
	if len(a.GetTriggers()) == 0 {
		return out, fmt.Errorf("%s.triggers: at least one trigger is required", path)
	}
	seen := map[string]bool{}
	for j, t := range a.GetTriggers() {
		tpath := fmt.Sprintf("%s.triggers[%d]", path, j)
		if !monitors[t.GetName()] {
			return out, fmt.Errorf("%s.name: unknown resource monitor %q", tpath, t.GetName())
		}
		if seen[t.GetName()] {
			return out, fmt.Errorf("%s.name: duplicate trigger for resource monitor %q", tpath, t.GetName())
		}
		seen[t.GetName()] = true
		tr, err := triggerFromProto(tpath, t)
		if err != nil {
			return out, err
		}
		out.Triggers = append(out.Triggers, tr)
	}
	return out, nil
}

func triggerFromProto(path string, t *overloadv3.Trigger) (Trigger, error) {
	out := Trigger{Monitor: t.GetName()}
	valid := func(v float64) bool { return !math.IsNaN(v) && v >= 0 && v <= 1 }
	switch x := t.GetTriggerOneof().(type) {
	case *overloadv3.Trigger_Threshold:
		v := x.Threshold.GetValue()
		if !valid(v) {
			return out, fmt.Errorf("%s.threshold.value: %v is not in [0, 1]", path, v)
		}
		out.Scaling, out.Saturation = v, v
	case *overloadv3.Trigger_Scaled:
		lo, hi := x.Scaled.GetScalingThreshold(), x.Scaled.GetSaturationThreshold()
		if !valid(lo) || !valid(hi) {
			return out, fmt.Errorf("%s.scaled: thresholds must be in [0, 1]", path)
		}
		if lo >= hi {
			return out, fmt.Errorf("%s.scaled: scaling_threshold (%v) must be less than saturation_threshold (%v)", path, lo, hi)
		}
		out.Scaling, out.Saturation = lo, hi
	default:
		return out, fmt.Errorf("%s: a threshold or scaled trigger is required", path)
	}
	return out, nil
}

// shrinkHeapFromProto reads shrink_heap's optional ShrinkHeapConfig into a.
func shrinkHeapFromProto(path string, tc *anypb.Any, a *Action) error {
	a.ShrinkInterval, a.MaxUnfreedBytes = DefaultShrinkInterval, DefaultMaxUnfreedBytes
	if tc == nil {
		return nil
	}
	var pb overloadv3.ShrinkHeapConfig
	if err := unpack(path, tc, &pb); err != nil {
		return err
	}
	if ti := pb.GetTimerInterval(); ti != nil {
		if err := ti.CheckValid(); err != nil || ti.AsDuration() <= 0 {
			return fmt.Errorf("%s.typed_config.timer_interval: must be a positive duration", path)
		}
		a.ShrinkInterval = ti.AsDuration()
	}
	if mu := pb.GetMaxUnfreedMemoryBytes(); mu != nil {
		a.MaxUnfreedBytes = mu.GetValue()
	}
	return nil
}
