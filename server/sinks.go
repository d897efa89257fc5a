package server

import (
	"context"
	"fmt"
	"net"
	"slices"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	otelsinkv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/stat_sinks/open_telemetry/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/stats/sinks/hystrix"
	"github.com/legateproxy/legate/stats/sinks/metricsservice"
	"github.com/legateproxy/legate/stats/sinks/opentelemetry"
	"github.com/legateproxy/legate/stats/sinks/statsd"
)

// adminStats are Legate's own admin counters (Envoy has no equivalent).
type adminStats struct {
	CrossOriginRefused stats.Counter `stat:"cross_origin_refused"`
	ForeignHostRefused stats.Counter `stat:"foreign_host_refused"`
}

// The stats sinks Legate implements, by typed_config type (or, without one, by name).
var (
	hystrixSinkURL   = typeURL(&metricsv3.HystrixSink{})
	statsdSinkURL    = typeURL(&metricsv3.StatsdSink{})
	dogStatsdSinkURL = typeURL(&metricsv3.DogStatsdSink{})
	metricsSinkURL   = typeURL(&metricsv3.MetricsServiceConfig{})
	otelSinkURL      = typeURL(&otelsinkv3.SinkConfig{})
	sinkURLByName    = map[string]string{
		"envoy.stat_sinks.hystrix": hystrixSinkURL, "envoy.hystrix": hystrixSinkURL,
		"envoy.stat_sinks.statsd": statsdSinkURL, "envoy.statsd": statsdSinkURL,
		"envoy.stat_sinks.dog_statsd": dogStatsdSinkURL, "envoy.dog_statsd": dogStatsdSinkURL,
		"envoy.stat_sinks.metrics_service": metricsSinkURL, "envoy.metrics_service": metricsSinkURL,
		"envoy.stat_sinks.open_telemetry": otelSinkURL,
	}
)

func typeURL(m proto.Message) string {
	return "type.googleapis.com/" + string(m.ProtoReflect().Descriptor().FullName())
}

// buildSinks creates the bootstrap's stats_sinks: envoy.stat_sinks.hystrix, statsd, dog_statsd,
// metrics_service and open_telemetry. Any other sink is a configuration error rather than a silent no-op.
func (s *Server) buildSinks() error {
	for i, sink := range s.boot.Proto.GetStatsSinks() {
		path := fmt.Sprintf("stats_sinks[%d]", i)
		tc := sink.GetTypedConfig()
		u := tc.GetTypeUrl()
		if tc == nil {
			u = sinkURLByName[sink.GetName()]
		}
		var err error
		switch u {
		case hystrixSinkURL:
			err = s.addHystrixSink(path, tc)
		case statsdSinkURL:
			var cfg metricsv3.StatsdSink
			if err = unmarshalSink(path, tc, &cfg); err == nil {
				err = s.addClosingSink(statsd.FromStatsd(path+".typed_config", &cfg, s.statsdCluster))
			}
		case dogStatsdSinkURL:
			var cfg metricsv3.DogStatsdSink
			if err = unmarshalSink(path, tc, &cfg); err == nil {
				err = s.addClosingSink(statsd.FromDogStatsd(path+".typed_config", &cfg))
			}
		case metricsSinkURL:
			var cfg metricsv3.MetricsServiceConfig
			if err = unmarshalSink(path, tc, &cfg); err == nil {
				err = s.addClosingSink(metricsservice.New(path+".typed_config", &cfg, metricsservice.Deps{
					Node: s.Node(), Dial: s.dialXDS, ClusterExists: s.staticCluster}))
			}
		case otelSinkURL:
			var cfg otelsinkv3.SinkConfig
			if err = unmarshalSink(path, tc, &cfg); err == nil {
				err = s.addClosingSink(opentelemetry.New(path+".typed_config", &cfg, opentelemetry.Deps{
					Dial: s.dialXDS, ClusterExists: s.staticCluster, Clock: s.clock}))
			}
		case "":
			err = fmt.Errorf("%s.name = %q: unsupported stats sink; %s", path, sink.GetName(), implementedSinks)
		default:
			err = fmt.Errorf("%s.typed_config: unsupported stats sink %s; %s", path, u, implementedSinks)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

const implementedSinks = "Legate implements envoy.stat_sinks.hystrix, statsd, dog_statsd, metrics_service and open_telemetry"

func unmarshalSink(path string, tc *anypb.Any, m proto.Message) error {
	if tc == nil {
		return nil
	}
	if err := tc.UnmarshalTo(m); err != nil {
		return fmt.Errorf("%s.typed_config: %w", path, err)
	}
	return nil
}

func (s *Server) addHystrixSink(path string, tc *anypb.Any) error {
	var cfg metricsv3.HystrixSink
	if err := unmarshalSink(path, tc, &cfg); err != nil {
		return err
	}
	if s.hystrix != nil {
		return fmt.Errorf("%s: a second hystrix sink; configure one", path)
	}
	h, err := hystrix.New(&cfg, s.store.FlushInterval())
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	s.hystrix = h
	s.store.AddSink(h)
	return nil
}

// closingSink is a sink with a socket to close at shutdown.
type closingSink interface {
	stats.Sink
	Close() error
}

func (s *Server) addClosingSink(k closingSink, err error) error {
	if err != nil {
		return err
	}
	s.sinkClosers = append(s.sinkClosers, k.Close)
	s.store.AddSink(k)
	return nil
}

// statsdCluster is the Dialer of a statsd sink's tcp_cluster_name. As in Envoy the cluster must
// be a static one; each connection goes to a host its load balancer picks, with the cluster's
// connect_timeout, bind and socket options and transport socket (the dialer xDS uses).
func (s *Server) statsdCluster(name string) (statsd.Dialer, error) {
	if !s.staticCluster(name) {
		return nil, fmt.Errorf("not a static cluster of the bootstrap")
	}
	return func() (net.Conn, error) { return s.dialXDS(context.Background(), name) }, nil
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
