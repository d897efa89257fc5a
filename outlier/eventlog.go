package outlier

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"time"

	datav3 "github.com/envoyproxy/go-control-plane/envoy/data/cluster/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// EventLog writes Envoy's outlier detection event log
// (cluster_manager.outlier_detection.event_log_path): one envoy.data.cluster.v3.OutlierDetectionEvent
// per line, as compact JSON with proto field names and every scalar field printed, as Envoy's
// logger does. One EventLog is shared by the detectors of every cluster.
//
// Safe for concurrent use: each line is written with a single Write call under a mutex. Write
// errors are dropped, as Envoy drops them; the writer (a file, reopened on SIGUSR1 by its owner)
// reports them itself if it must.
type EventLog struct {
	mu sync.Mutex // serialises writes to w and guards buf
	w  io.Writer
	b  bytes.Buffer
}

// NewEventLog returns an event log writing to w.
func NewEventLog(w io.Writer) *EventLog { return &EventLog{w: w} }

var eventJSON = protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: true}

func (l *EventLog) write(ev *datav3.OutlierDetectionEvent) {
	raw, err := eventJSON.Marshal(ev)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Reset()
	// protojson varies its whitespace on purpose; compacting gives Envoy's stable form.
	if json.Compact(&l.b, raw) != nil {
		return
	}
	l.b.WriteByte('\n')
	_, _ = l.w.Write(l.b.Bytes())
}

// event fills the fields every event carries (Envoy's setCommonEventParams); since is the time of
// the previous opposite action, zero when there was none.
func (d *Detector) event(m *monitor, now, since time.Time) *datav3.OutlierDetectionEvent {
	ev := &datav3.OutlierDetectionEvent{
		Timestamp:    timestamppb.New(now),
		ClusterName:  d.cluster,
		UpstreamUrl:  m.host.Address(),
		NumEjections: m.numEjections,
	}
	if !since.IsZero() {
		ev.SecsSinceLastAction = wrapperspb.UInt64(uint64(max(now.Sub(since), 0) / time.Second))
	}
	return ev
}

func (d *Detector) logEject(m *monitor, t EjectionType, enforced bool, now time.Time) {
	if d.events == nil {
		return
	}
	ev := d.event(m, now, m.lastUnejection)
	ev.Type = datav3.OutlierEjectionType(t)
	ev.Action = datav3.Action_EJECT
	ev.Enforced = enforced
	switch t {
	case SuccessRate, SuccessRateLocalOrigin:
		o := originOf(t)
		ev.Event = &datav3.OutlierDetectionEvent_EjectSuccessRateEvent{EjectSuccessRateEvent: &datav3.OutlierEjectSuccessRate{
			HostSuccessRate:                     percentField(m.rate(o)),
			ClusterAverageSuccessRate:           percentField(d.clusterRate(o, false)),
			ClusterSuccessRateEjectionThreshold: percentField(d.clusterRate(o, true)),
		}}
	case FailurePercentage, FailurePercentageLocalOrigin:
		ev.Event = &datav3.OutlierDetectionEvent_EjectFailurePercentageEvent{EjectFailurePercentageEvent: &datav3.OutlierEjectFailurePercentage{
			HostSuccessRate: percentField(m.rate(originOf(t))),
		}}
	default:
		ev.Event = &datav3.OutlierDetectionEvent_EjectConsecutiveEvent{EjectConsecutiveEvent: &datav3.OutlierEjectConsecutive{}}
	}
	d.events.write(ev)
}

func (d *Detector) logUneject(m *monitor, now time.Time) {
	if d.events == nil {
		return
	}
	ev := d.event(m, now, m.lastEjection)
	ev.Action = datav3.Action_UNEJECT
	d.events.write(ev)
}

func originOf(t EjectionType) origin {
	if t == SuccessRateLocalOrigin || t == FailurePercentageLocalOrigin {
		return local
	}
	return external
}

// percentField converts a rate to the event's uint32 fields, truncating as Envoy's implicit
// double-to-uint32 conversion does. A negative value (a threshold below zero) is written as 0.
func percentField(v float64) uint32 {
	if v <= 0 {
		return 0
	}
	return uint32(v)
}
