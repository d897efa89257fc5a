package server

import (
	"fmt"

	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/stats/sinks/hystrix"
)

// adminStats are Legate's own admin counters (Envoy has no equivalent).
type adminStats struct {
	CrossOriginRefused stats.Counter `stat:"cross_origin_refused"`
	ForeignHostRefused stats.Counter `stat:"foreign_host_refused"`
}

// buildSinks creates the bootstrap's stats_sinks. Legate implements
// envoy.stat_sinks.hystrix; any other sink is a configuration error rather
// than a silent no-op.
func (s *Server) buildSinks() error {
	for i, sink := range s.boot.Proto.GetStatsSinks() {
		var cfg metricsv3.HystrixSink
		if tc := sink.GetTypedConfig(); tc == nil || tc.MessageIs(&cfg) {
			if tc != nil {
				if err := tc.UnmarshalTo(&cfg); err != nil {
					return fmt.Errorf("stats_sinks[%d].typed_config: %w", i, err)
				}
			}
			if sink.GetName() != "envoy.stat_sinks.hystrix" && tc == nil {
				return fmt.Errorf("stats_sinks[%d].name = %q: unsupported stats sink; Legate implements envoy.stat_sinks.hystrix", i, sink.GetName())
			}
			if s.hystrix != nil {
				return fmt.Errorf("stats_sinks[%d]: a second hystrix sink; configure one", i)
			}
			h, err := hystrix.New(&cfg, s.store.FlushInterval())
			if err != nil {
				return fmt.Errorf("stats_sinks[%d]: %w", i, err)
			}
			s.hystrix = h
			s.store.AddSink(h)
			continue
		}
		return fmt.Errorf("stats_sinks[%d].typed_config: unsupported stats sink %s; Legate implements envoy.stat_sinks.hystrix", i, sink.GetTypedConfig().GetTypeUrl())
	}
	return nil
}

// clusterMaxPending gives the hystrix sink each cluster's default-priority
// max_pending_requests.
func (s *Server) clusterMaxPending(name string) uint64 {
	if c := s.clusters.Get(name); c != nil {
		return uint64(c.Config().CircuitBreakers.Thresholds[config.PriorityDefault].MaxPendingRequests)
	}
	return 1024
}
