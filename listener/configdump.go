package listener

import (
	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// ConfigDump returns the listeners' envoy.admin.v3.ListenersConfigDump for /config_dump (a
// configdump.Tracker's Dump): bootstrap listeners in static_listeners in manager order; LDS
// listeners grouped by name in dynamic_listeners with their active state (warming_state before
// Start) and the draining state of a replaced version. Listeners whose names match returns
// false for are left out.
func (m *Manager) ConfigDump(match func(string) bool) proto.Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := &adminv3.ListenersConfigDump{}
	dynamic := map[string]*adminv3.ListenersConfigDump_DynamicListener{}
	dyn := func(name string) *adminv3.ListenersConfigDump_DynamicListener {
		d := dynamic[name]
		if d == nil {
			d = &adminv3.ListenersConfigDump_DynamicListener{Name: name}
			dynamic[name] = d
			out.DynamicListeners = append(out.DynamicListeners, d)
		}
		return d
	}
	for _, e := range m.entries {
		if !match(e.name) {
			continue
		}
		l := packListener(e.cur.Load())
		if e.static {
			out.StaticListeners = append(out.StaticListeners, &adminv3.ListenersConfigDump_StaticListener{Listener: l, LastUpdated: timestamppb.New(e.lastUpdated)})
			continue
		}
		st := &adminv3.ListenersConfigDump_DynamicListenerState{VersionInfo: e.versionInfo, Listener: l, LastUpdated: timestamppb.New(e.lastUpdated)}
		if m.bound {
			dyn(e.name).ActiveState = st
		} else {
			dyn(e.name).WarmingState = st
		}
	}
	for _, r := range m.retiring {
		if !r.whole || r.static || !match(r.name) {
			continue
		}
		dyn(r.name).DrainingState = &adminv3.ListenersConfigDump_DynamicListenerState{VersionInfo: r.versionInfo, Listener: packListener(r.v), LastUpdated: timestamppb.New(r.lastUpdated)}
	}
	return out
}

func packListener(v *version) *anypb.Any {
	if v.cfg.Proto == nil {
		return nil
	}
	a, err := anypb.New(v.cfg.Proto)
	if err != nil {
		return nil
	}
	return a
}
