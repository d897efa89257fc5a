package server

import (
	"strings"
	"testing"

	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/legateproxy/legate/extensions"
	"github.com/legateproxy/legate/stats"
)

// TestBuildSinkLooksUpTheRegistry checks that a stats sink is found in the extension registry
// by its typed_config's type, or by its name (a deprecated one too) without one, and that any
// other sink is refused with the registry's list.
func TestBuildSinkLooksUpTheRegistry(t *testing.T) {
	ext, err := extensions.New()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{ext: ext}
	other, err := anypb.New(durationpb.New(0))
	if err != nil {
		t.Fatal(err)
	}
	dog, err := anypb.New(&metricsv3.DogStatsdSink{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		sink *metricsv3.StatsSink
		want string
	}{
		{"deprecated name", &metricsv3.StatsSink{Name: "envoy.statsd"},
			"stats_sinks[0].typed_config: one of address or tcp_cluster_name must be set"},
		{"type over name", &metricsv3.StatsSink{Name: "envoy.statsd", ConfigType: &metricsv3.StatsSink_TypedConfig{TypedConfig: dog}},
			"stats_sinks[0].typed_config.address: must be set"},
		{"unknown name", &metricsv3.StatsSink{Name: "envoy.stat_sinks.wasm"},
			`stats_sinks[0].name = "envoy.stat_sinks.wasm": unsupported stats sink; Legate implements envoy.stat_sinks.dog_statsd, envoy.stat_sinks.hystrix, `},
		{"unknown type", &metricsv3.StatsSink{Name: "envoy.statsd", ConfigType: &metricsv3.StatsSink_TypedConfig{TypedConfig: other}},
			"stats_sinks[0].typed_config: unsupported stats sink type.googleapis.com/google.protobuf.Duration; Legate implements "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.buildSink("stats_sinks[0]", tt.sink, stats.SinkContext{})
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("buildSink() = %v; want an error starting %q", err, tt.want)
			}
		})
	}
}
