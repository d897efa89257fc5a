package stats

import (
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/internal/grpcclient"
	"github.com/legateproxy/legate/internal/registry"
)

// Sinks is the kind of stats sink extensions (the bootstrap's stats_sinks). A sink package
// registers itself with
//
//	registry.Add(b, stats.Sinks, Name, &pb.Config{}, factory)
//
// and the server builds each configured sink with the factory its type URL (or name) finds.
var Sinks = registry.Kind[SinkFactory]{Category: registry.StatsSink}

// SinkFactory builds a sink from its config, a message of the registered type (empty when the
// sink had no typed_config); path names the config in errors. A sink with an io.Closer-like
// Close() error is closed at shutdown.
type SinkFactory func(path string, config proto.Message, c SinkContext) (Sink, error)

// SinkContext is what the server gives a sink factory.
type SinkContext struct {
	// Node identifies Legate to collectors.
	Node *corev3.Node
	// Dial connects to a host of the named cluster, with its TLS.
	Dial grpcclient.Dial
	// ClusterExists reports whether a sink may use the named cluster: one of the bootstrap's
	// static clusters, as in Envoy, since sinks are built before the cluster manager.
	ClusterExists func(cluster string) bool
	// Clock tells the time.
	Clock clock.Clock
	// FlushInterval is the store's stats_flush_interval.
	FlushInterval time.Duration
}

// AsSink returns a sink constructor's results as a SinkFactory's: a nil Sink, not a typed nil
// pointer, with an error.
func AsSink[S Sink](k S, err error) (Sink, error) {
	if err != nil {
		return nil, err
	}
	return k, nil
}
