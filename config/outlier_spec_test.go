package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestOutlierDetectionFromProtoDefaults(t *testing.T) {
	got, err := OutlierDetectionFromProto(&clusterv3.OutlierDetection{})
	if err != nil {
		t.Fatal(err)
	}
	want := &OutlierDetection{
		Consecutive5xx:                         5,
		Interval:                               10 * time.Second,
		BaseEjectionTime:                       30 * time.Second,
		MaxEjectionTime:                        300 * time.Second,
		MaxEjectionPercent:                     10,
		EnforcingConsecutive5xx:                100,
		EnforcingSuccessRate:                   100,
		SuccessRateMinimumHosts:                5,
		SuccessRateRequestVolume:               100,
		SuccessRateStdevFactor:                 1900,
		ConsecutiveGatewayFailure:              5,
		EnforcingConsecutiveGatewayFailure:     0,
		ConsecutiveLocalOriginFailure:          5,
		EnforcingConsecutiveLocalOriginFailure: 100,
		EnforcingLocalOriginSuccessRate:        100,
		FailurePercentageThreshold:             85,
		EnforcingFailurePercentage:             0,
		EnforcingFailurePercentageLocalOrigin:  0,
		FailurePercentageMinimumHosts:          5,
		FailurePercentageRequestVolume:         50,
		SuccessfulActiveHealthCheckUnejectHost: true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if got, err := OutlierDetectionFromProto(nil); got != nil || err != nil {
		t.Errorf("OutlierDetectionFromProto(nil) = %v, %v; want nil, nil", got, err)
	}
}

func TestOutlierDetectionFromProtoValues(t *testing.T) {
	tests := []struct {
		name  string
		in    *clusterv3.OutlierDetection
		check func(*OutlierDetection) (got, want any)
	}{
		{
			name:  "max_ejection_time defaults to base_ejection_time when larger",
			in:    &clusterv3.OutlierDetection{BaseEjectionTime: durationpb.New(400 * time.Second)},
			check: func(s *OutlierDetection) (any, any) { return s.MaxEjectionTime, 400 * time.Second },
		},
		{
			name: "explicit values",
			in:   &clusterv3.OutlierDetection{Consecutive_5Xx: wrapperspb.UInt32(0), MaxEjectionTimeJitter: durationpb.New(2 * time.Second)},
			check: func(s *OutlierDetection) (any, any) {
				return [2]any{s.Consecutive5xx, s.MaxEjectionTimeJitter}, [2]any{uint32(0), 2 * time.Second}
			},
		},
		{
			name: "uneject off and always eject one on",
			in:   &clusterv3.OutlierDetection{SuccessfulActiveHealthCheckUnejectHost: wrapperspb.Bool(false), AlwaysEjectOneHost: wrapperspb.Bool(true)},
			check: func(s *OutlierDetection) (any, any) {
				return [2]bool{s.SuccessfulActiveHealthCheckUnejectHost, s.AlwaysEjectOneHost}, [2]bool{false, true}
			},
		},
		{
			name: "split",
			in:   &clusterv3.OutlierDetection{SplitExternalLocalOriginErrors: true, EnforcingFailurePercentageLocalOrigin: wrapperspb.UInt32(100)},
			check: func(s *OutlierDetection) (any, any) {
				return [2]any{s.SplitExternalLocalOriginErrors, s.EnforcingFailurePercentageLocalOrigin}, [2]any{true, uint32(100)}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := OutlierDetectionFromProto(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := tt.check(s); !cmp.Equal(got, want) {
				t.Errorf("got %v; want %v", got, want)
			}
		})
	}
}

func TestOutlierDetectionFromProtoErrors(t *testing.T) {
	tests := []struct {
		name string
		in   *clusterv3.OutlierDetection
		want string
	}{
		{"zero interval", &clusterv3.OutlierDetection{Interval: durationpb.New(0)}, "outlier_detection.interval = 0s; must be > 0"},
		{"negative base", &clusterv3.OutlierDetection{BaseEjectionTime: durationpb.New(-time.Second)}, "outlier_detection.base_ejection_time = -1s; must be > 0"},
		{"zero max", &clusterv3.OutlierDetection{MaxEjectionTime: durationpb.New(0)}, "outlier_detection.max_ejection_time = 0s; must be > 0"},
		{"negative jitter", &clusterv3.OutlierDetection{MaxEjectionTimeJitter: durationpb.New(-time.Second)}, "outlier_detection.max_ejection_time_jitter = -1s; must be >= 0"},
		{"max_ejection_percent", &clusterv3.OutlierDetection{MaxEjectionPercent: wrapperspb.UInt32(120)}, "outlier_detection.max_ejection_percent = 120; must be <= 100"},
		{"enforcing_consecutive_5xx", &clusterv3.OutlierDetection{EnforcingConsecutive_5Xx: wrapperspb.UInt32(101)}, "outlier_detection.enforcing_consecutive_5xx = 101; must be <= 100"},
		{"failure_percentage_threshold", &clusterv3.OutlierDetection{FailurePercentageThreshold: wrapperspb.UInt32(200)}, "outlier_detection.failure_percentage_threshold = 200; must be <= 100"},
		{"enforcing_failure_percentage_local_origin", &clusterv3.OutlierDetection{EnforcingFailurePercentageLocalOrigin: wrapperspb.UInt32(101)}, "outlier_detection.enforcing_failure_percentage_local_origin = 101; must be <= 100"},
		{"max below base", &clusterv3.OutlierDetection{BaseEjectionTime: durationpb.New(60 * time.Second), MaxEjectionTime: durationpb.New(30 * time.Second)}, "outlier_detection.max_ejection_time = 30s; must be >= base_ejection_time (1m0s)"},
		{"monitors", &clusterv3.OutlierDetection{Monitors: []*corev3.TypedExtensionConfig{{Name: "m"}}}, "outlier_detection.monitors: 1 monitor extension(s) configured; passive monitor extensions are not supported"},
		{"detect_degraded_hosts", &clusterv3.OutlierDetection{DetectDegradedHosts: wrapperspb.Bool(true)}, "outlier_detection.detect_degraded_hosts = true; degraded-host detection is not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := OutlierDetectionFromProto(tt.in)
			if err == nil {
				t.Fatalf("error = nil; want %q", tt.want)
			}
			if !errors.Is(err, ErrOutlierDetection) {
				t.Errorf("error %v does not wrap ErrOutlierDetection", err)
			}
			if got := strings.TrimPrefix(err.Error(), ErrOutlierDetection.Error()+": "); got != tt.want {
				t.Errorf("error = %q; want %q", got, tt.want)
			}
		})
	}
}

func FuzzOutlierDetectionFromProto(f *testing.F) {
	seeds := []*clusterv3.OutlierDetection{
		{},
		{Interval: durationpb.New(time.Second), MaxEjectionPercent: wrapperspb.UInt32(100)},
		{BaseEjectionTime: durationpb.New(time.Hour), MaxEjectionTimeJitter: durationpb.New(time.Second)},
	}
	for _, s := range seeds {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &clusterv3.OutlierDetection{}
		if proto.Unmarshal(data, in) != nil {
			return
		}
		s, err := OutlierDetectionFromProto(in)
		if err != nil {
			if !errors.Is(err, ErrOutlierDetection) {
				t.Errorf("error %v does not wrap ErrOutlierDetection", err)
			}
			return
		}
		if s.MaxEjectionTime < s.BaseEjectionTime || s.Interval <= 0 || s.MaxEjectionPercent > 100 {
			t.Errorf("accepted an invalid spec: %+v", s)
		}
	})
}
