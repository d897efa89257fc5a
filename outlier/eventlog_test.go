package outlier

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	datav3 "github.com/envoyproxy/go-control-plane/envoy/data/cluster/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/config"
)

// lineBuffer collects event log output; safe for concurrent use.
type lineBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lineBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lineBuffer) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := strings.TrimSuffix(l.b.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// events parses every line strictly as an OutlierDetectionEvent.
func (l *lineBuffer) events(t *testing.T) []*datav3.OutlierDetectionEvent {
	t.Helper()
	var out []*datav3.OutlierDetectionEvent
	for _, line := range l.lines() {
		ev := &datav3.OutlierDetectionEvent{}
		if err := protojson.Unmarshal([]byte(line), ev); err != nil {
			t.Fatalf("event line %q does not parse as OutlierDetectionEvent: %v", line, err)
		}
		// Envoy writes UNEJECT events without the event oneof its own validation requires.
		if err := ev.ValidateAll(); err != nil && ev.GetAction() == datav3.Action_EJECT {
			t.Errorf("event line %q fails validation: %v", line, err)
		}
		out = append(out, ev)
	}
	return out
}

func TestEventLogConsecutive(t *testing.T) {
	buf := &lineBuffer{}
	f := newFixture(t, fixtureOpts{hosts: 1, mod: allowAll, log: NewEventLog(buf)})
	ejectionLengths(t, f, 2) // the second ejection starts as the first one ends

	want := []string{
		`{"type":"CONSECUTIVE_5XX","timestamp":"2026-03-04T05:06:07Z","cluster_name":"web","upstream_url":"10.0.0.1:80","action":"EJECT","num_ejections":1,"enforced":true,"eject_consecutive_event":{}}`,
	}
	if got := buf.lines(); len(got) < 1 || got[0] != want[0] {
		t.Errorf("first line = %q; want %q", got, want[0])
	}
	events := buf.events(t)
	if len(events) != 4 {
		t.Fatalf("got %d events; want 4 (eject, uneject, eject, uneject): %q", len(events), buf.lines())
	}
	ts := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(epoch.Add(d)) }
	wantEvents := []*datav3.OutlierDetectionEvent{
		{Type: datav3.OutlierEjectionType_CONSECUTIVE_5XX, Timestamp: ts(0), ClusterName: "web", UpstreamUrl: "10.0.0.1:80",
			Action: datav3.Action_EJECT, NumEjections: 1, Enforced: true,
			Event: &datav3.OutlierDetectionEvent_EjectConsecutiveEvent{EjectConsecutiveEvent: &datav3.OutlierEjectConsecutive{}}},
		{Timestamp: ts(30 * time.Second), SecsSinceLastAction: wrapperspb.UInt64(30), ClusterName: "web", UpstreamUrl: "10.0.0.1:80",
			Action: datav3.Action_UNEJECT, NumEjections: 1},
		{Type: datav3.OutlierEjectionType_CONSECUTIVE_5XX, Timestamp: ts(30 * time.Second), SecsSinceLastAction: wrapperspb.UInt64(0),
			ClusterName: "web", UpstreamUrl: "10.0.0.1:80", Action: datav3.Action_EJECT, NumEjections: 2, Enforced: true,
			Event: &datav3.OutlierDetectionEvent_EjectConsecutiveEvent{EjectConsecutiveEvent: &datav3.OutlierEjectConsecutive{}}},
		{Timestamp: ts(90 * time.Second), SecsSinceLastAction: wrapperspb.UInt64(60), ClusterName: "web", UpstreamUrl: "10.0.0.1:80",
			Action: datav3.Action_UNEJECT, NumEjections: 2},
	}
	if diff := cmp.Diff(wantEvents, events, protocmp.Transform()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// Every scalar is printed, defaults included (always_print_primitive_fields).
	if got := buf.lines()[1]; !strings.Contains(got, `"type":"CONSECUTIVE_5XX"`) || !strings.Contains(got, `"enforced":false`) {
		t.Errorf("uneject line %q; want default type and enforced printed", got)
	}
}

func TestEventLogRates(t *testing.T) {
	buf := &lineBuffer{}
	f := newFixture(t, fixtureOpts{hosts: 11, log: NewEventLog(buf), mod: func(s *config.OutlierDetection) {
		noConsecutive(s)
		s.MaxEjectionPercent = 20
		s.EnforcingFailurePercentage = 100
		s.FailurePercentageThreshold = 40
	}})
	// Hosts 0..9 have success-rate volume: mean 95, stdev 15, threshold 66.5, host 0 (50%) is
	// out. Host 10 has only failure-percentage volume and fails 50% >= 40%.
	f.requests(0, 100, 50)
	for i := 1; i < 10; i++ {
		f.requests(i, 100, 100)
	}
	f.requests(10, 60, 30)
	f.sweepAfter(10 * time.Second)
	at := timestamppb.New(epoch.Add(10 * time.Second))
	want := []*datav3.OutlierDetectionEvent{
		{Type: datav3.OutlierEjectionType_SUCCESS_RATE, Timestamp: at, ClusterName: "web", UpstreamUrl: "10.0.0.1:80",
			Action: datav3.Action_EJECT, NumEjections: 1, Enforced: true,
			Event: &datav3.OutlierDetectionEvent_EjectSuccessRateEvent{EjectSuccessRateEvent: &datav3.OutlierEjectSuccessRate{
				HostSuccessRate: 50, ClusterAverageSuccessRate: 95, ClusterSuccessRateEjectionThreshold: 66,
			}}},
		{Type: datav3.OutlierEjectionType_FAILURE_PERCENTAGE, Timestamp: at, ClusterName: "web", UpstreamUrl: "10.0.0.11:80",
			Action: datav3.Action_EJECT, NumEjections: 1, Enforced: true,
			Event: &datav3.OutlierDetectionEvent_EjectFailurePercentageEvent{EjectFailurePercentageEvent: &datav3.OutlierEjectFailurePercentage{
				HostSuccessRate: 50,
			}}},
	}
	if diff := cmp.Diff(want, buf.events(t), protocmp.Transform()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestPercentField(t *testing.T) {
	tests := []struct {
		in   float64
		want uint32
	}{{-3.5, 0}, {0, 0}, {66.99, 66}, {100, 100}}
	for _, tt := range tests {
		if got := percentField(tt.in); got != tt.want {
			t.Errorf("percentField(%v) = %d; want %d", tt.in, got, tt.want)
		}
	}
}
