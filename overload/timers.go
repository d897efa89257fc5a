package overload

import (
	"fmt"
	"math"
	"time"

	overloadv3 "github.com/envoyproxy/go-control-plane/envoy/config/overload/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// ReduceTimeouts is the action that shortens the timers ScaleTimersOverloadActionConfig names.
const ReduceTimeouts = "envoy.overload_actions.reduce_timeouts"

// Timer is a timer reduce_timeouts may scale, by Envoy's ScaleTimersOverloadActionConfig
// TimerType.
type Timer uint8

const (
	// ConnectionIdle is the connection manager's idle_timeout
	// (HTTP_DOWNSTREAM_CONNECTION_IDLE).
	ConnectionIdle Timer = iota
	// StreamIdle is stream_idle_timeout (HTTP_DOWNSTREAM_STREAM_IDLE).
	StreamIdle
	// TransportSocketConnect is the downstream TLS handshake's limit
	// (TRANSPORT_SOCKET_CONNECT).
	TransportSocketConnect
	// ConnectionMax is max_connection_duration (HTTP_DOWNSTREAM_CONNECTION_MAX).
	ConnectionMax
	numTimers
)

// timerOf maps Envoy's timer types to Legate's. HTTP_DOWNSTREAM_STREAM_FLUSH is absent:
// Legate has no stream_flush_timeout to scale.
var timerOf = map[overloadv3.ScaleTimersOverloadActionConfig_TimerType]Timer{
	overloadv3.ScaleTimersOverloadActionConfig_HTTP_DOWNSTREAM_CONNECTION_IDLE: ConnectionIdle,
	overloadv3.ScaleTimersOverloadActionConfig_HTTP_DOWNSTREAM_STREAM_IDLE:     StreamIdle,
	overloadv3.ScaleTimersOverloadActionConfig_TRANSPORT_SOCKET_CONNECT:        TransportSocketConnect,
	overloadv3.ScaleTimersOverloadActionConfig_HTTP_DOWNSTREAM_CONNECTION_MAX:  ConnectionMax,
}

// TimerMinimum is how short reduce_timeouts may make one timer: an absolute duration
// (min_timeout) or a fraction of the configured timeout (min_scale).
type TimerMinimum struct {
	Set      bool
	Absolute time.Duration
	Scale    float64 // in [0, 1]; used when Absolute is not (IsScale)
	IsScale  bool
}

// floor is the minimum for a configured timeout d, never above d.
func (m TimerMinimum) floor(d time.Duration) time.Duration {
	if m.IsScale {
		return time.Duration(float64(d) * m.Scale)
	}
	return min(m.Absolute, d)
}

// scaleTimersFromProto reads reduce_timeouts' typed_config, a ScaleTimersOverloadActionConfig;
// path is the action's.
func scaleTimersFromProto(path string, tc *anypb.Any) ([numTimers]TimerMinimum, error) {
	var out [numTimers]TimerMinimum
	var pb overloadv3.ScaleTimersOverloadActionConfig
	if err := unpack(path, tc, &pb); err != nil {
		return out, err
	}
	path += ".typed_config"
	if len(pb.GetTimerScaleFactors()) == 0 {
		return out, fmt.Errorf("%s.timer_scale_factors: at least one timer is required", path)
	}
	for i, st := range pb.GetTimerScaleFactors() {
		tpath := fmt.Sprintf("%s.timer_scale_factors[%d]", path, i)
		kind, ok := timerOf[st.GetTimer()]
		switch {
		case st.GetTimer() == overloadv3.ScaleTimersOverloadActionConfig_HTTP_DOWNSTREAM_STREAM_FLUSH:
			return out, fmt.Errorf("%s.timer: HTTP_DOWNSTREAM_STREAM_FLUSH: not implemented by Legate (it has no stream_flush_timeout)", tpath)
		case !ok:
			return out, fmt.Errorf("%s.timer: %v is not a timer type", tpath, st.GetTimer())
		case out[kind].Set:
			return out, fmt.Errorf("%s.timer: duplicate entry for %v", tpath, st.GetTimer())
		}
		m, err := timerMinimumFromProto(tpath, st)
		if err != nil {
			return out, err
		}
		out[kind] = m
	}
	return out, nil
}

func timerMinimumFromProto(path string, st *overloadv3.ScaleTimersOverloadActionConfig_ScaleTimer) (TimerMinimum, error) {
	switch adj := st.GetOverloadAdjust().(type) {
	case *overloadv3.ScaleTimersOverloadActionConfig_ScaleTimer_MinTimeout:
		d := adj.MinTimeout
		if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
			return TimerMinimum{}, fmt.Errorf("%s.min_timeout: must be a non-negative duration", path)
		}
		return TimerMinimum{Set: true, Absolute: d.AsDuration()}, nil
	case *overloadv3.ScaleTimersOverloadActionConfig_ScaleTimer_MinScale:
		v := adj.MinScale.GetValue()
		if math.IsNaN(v) || v < 0 || v > 100 {
			return TimerMinimum{}, fmt.Errorf("%s.min_scale.value: %v is not in [0, 100]", path, v)
		}
		return TimerMinimum{Set: true, Scale: v / 100, IsScale: true}, nil
	default:
		return TimerMinimum{}, fmt.Errorf("%s: min_timeout or min_scale is required", path)
	}
}

// ScalesTimer reports whether reduce_timeouts is configured for t: only then can
// ScaleTimer change t, and only then must a running t be re-evaluated when TimersChanged
// fires.
func (s *State) ScalesTimer(t Timer) bool {
	return s != nil && s.timers[t].Set
}

// ScaleTimer returns the timeout d of timer t under reduce_timeouts' present state, as
// Envoy's scaled range timers compute it: the minimum m (min_timeout, at most d, or
// min_scale of d) plus the part of d above it scaled down by the action's state, so d
// while the action is off and m once it is saturated. Without the action for t it is d; one
// atomic load otherwise.
func (s *State) ScaleTimer(t Timer, d time.Duration) time.Duration {
	if s == nil || d <= 0 || !s.timers[t].Set {
		return d
	}
	v := s.reduceTimeouts.Load()
	if v == 0 {
		return d
	}
	m := s.timers[t].floor(d)
	if v >= scaleOne {
		return m
	}
	return m + time.Duration(float64(d-m)*float64(scaleOne-v)/scaleOne)
}

// TimersChanged returns a channel closed the next time reduce_timeouts' state changes, so
// that timers already running can be re-evaluated (Envoy's scaled timers move when the scale
// factor does). Nil without the action.
func (s *State) TimersChanged() <-chan struct{} {
	if s == nil || !s.hasTimers {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.timersChanged
}

// setReduceTimeouts publishes the action's state and wakes the waiters of TimersChanged when
// it moved.
func (s *State) setReduceTimeouts(v uint32) {
	if s.reduceTimeouts.Swap(v) == v {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.timersChanged)
	s.timersChanged = make(chan struct{})
}
