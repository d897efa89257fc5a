// Package snicluster is Envoy's envoy.filters.network.sni_cluster network filter
// (extensions.filters.network.sni_cluster.v3.SniCluster, which has no fields): a
// non-terminal filter that makes the TCP proxy connect to the cluster named by the
// connection's SNI (the envoy.tcp_proxy.cluster filter state), when the TLS inspector read
// one. It has no stats.
package snicluster

import (
	"github.com/legateproxy/legate/listener"
)

// Name is the filter's Envoy name.
const Name = "envoy.filters.network.sni_cluster"

type filter struct{}

func (filter) OnConnection(c *listener.Conn) bool {
	if sni := c.ServerName(); sni != "" {
		c.SetUpstreamCluster(sni)
	}
	return true
}
