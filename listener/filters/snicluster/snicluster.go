// Package snicluster is Envoy's envoy.filters.network.sni_cluster network filter
// (extensions.filters.network.sni_cluster.v3.SniCluster, which has no fields): a
// non-terminal filter that makes the TCP proxy connect to the cluster named by the
// connection's SNI (the envoy.tcp_proxy.cluster filter state), when the TLS inspector read
// one. It has no stats.
package snicluster

import (
	sniv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/sni_cluster/v3"

	"github.com/legateproxy/legate/listener"
)

// Name is the filter's Envoy name.
const Name = "envoy.filters.network.sni_cluster"

// TypeURL is its typed_config type.
var TypeURL = "type.googleapis.com/" + string((&sniv3.SniCluster{}).ProtoReflect().Descriptor().FullName())

// Register adds the filter to r.
func Register(r *listener.Registry) error {
	return r.RegisterConnFilter(Name, func(*listener.ChainContext, int) (listener.ConnFilter, error) {
		return filter{}, nil
	}, TypeURL)
}

type filter struct{}

func (filter) OnConnection(c *listener.Conn) bool {
	if sni := c.ServerName(); sni != "" {
		c.SetUpstreamCluster(sni)
	}
	return true
}
