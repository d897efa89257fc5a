package server

import (
	"fmt"
	"slices"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/stats/sinks/hystrix"
)

// adminStats are Legate's own admin counters (Envoy has no equivalent).
type adminStats struct {
	CrossOriginRefused stats.Counter `stat:"cross_origin_refused"`
	ForeignHostRefused stats.Counter `stat:"foreign_host_refused"`
}

// buildSinks creates the bootstrap's stats_sinks, each with the factory the extension registry
// has for its typed_config's type (or, without one, its name). Any other sink is a
// configuration error rather than a silent no-op.
func (s *Server) buildSinks() error {
	c := stats.SinkContext{Node: s.Node(), Dial: s.dialXDS, ClusterExists: s.staticCluster,
		Clock: s.clock, FlushInterval: s.store.FlushInterval()}
	for i, sink := range s.boot.Proto.GetStatsSinks() {
		path := fmt.Sprintf("stats_sinks[%d]", i)
		k, err := s.buildSink(path, sink, c)
		if err != nil {
			return err
		}
		if err := s.addSink(path, k); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) buildSink(path string, sink *metricsv3.StatsSink, c stats.SinkContext) (stats.Sink, error) {
	tc := sink.GetTypedConfig()
	newSink, e, ok := registry.Lookup(s.ext, stats.Sinks, sink.GetName(), tc.GetTypeUrl())
	switch {
	case ok && (tc == nil || e.TypeURL() == tc.GetTypeUrl()):
	case tc == nil:
		return nil, fmt.Errorf("%s.name = %q: unsupported stats sink; %s", path, sink.GetName(), s.implementedSinks())
	default:
		return nil, fmt.Errorf("%s.typed_config: unsupported stats sink %s; %s", path, tc.GetTypeUrl(), s.implementedSinks())
	}
	cfg, err := e.Decode(path+".typed_config", tc)
	if err != nil {
		return nil, err
	}
	return newSink(path+".typed_config", cfg, c)
}

// implementedSinks lists the registry's stats sinks for an error.
func (s *Server) implementedSinks() string {
	var names []string
	for e := range registry.All(s.ext, stats.Sinks) {
		names = append(names, e.Name)
	}
	return "Legate implements " + strings.Join(names, ", ")
}

// addSink adds k to the store. The one hystrix sink also serves the admin's dashboard stream;
// a sink with a socket is closed at shutdown.
func (s *Server) addSink(path string, k stats.Sink) error {
	if h, ok := k.(*hystrix.Sink); ok {
		if s.hystrix != nil {
			return fmt.Errorf("%s: a second hystrix sink; configure one", path)
		}
		s.hystrix = h
	} else if c, ok := k.(interface{ Close() error }); ok {
		s.sinkClosers = append(s.sinkClosers, c.Close)
	}
	s.store.AddSink(k)
	return nil
}

// staticCluster reports whether the bootstrap's static_resources define the cluster: a sink,
// built before the cluster manager, may only use those, as in Envoy.
func (s *Server) staticCluster(name string) bool {
	return slices.ContainsFunc(s.boot.Proto.GetStaticResources().GetClusters(), func(c *clusterv3.Cluster) bool { return c.GetName() == name })
}

// clusterMaxPending gives the hystrix sink each cluster's default-priority
// max_pending_requests.
func (s *Server) clusterMaxPending(name string) uint64 {
	if c := s.clusters.Get(name); c != nil {
		return uint64(c.Config().CircuitBreakers.Thresholds[config.PriorityDefault].MaxPendingRequests)
	}
	return 1024
}
