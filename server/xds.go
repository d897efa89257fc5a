package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"

	"github.com/legateproxy/legate/admin/configdump"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/xds"
)

// buildXDS creates the xDS client when the bootstrap has dynamic resources
// or EDS clusters, and registers the clusters config dump: the client's,
// which adds CDS error states, or the cluster manager's.
func (s *Server) buildXDS() error {
	needed := s.boot.Proto.GetDynamicResources() != nil
	for _, c := range s.boot.Clusters {
		if c.Proto.GetEdsClusterConfig() != nil {
			needed = true
		}
	}
	if !needed {
		return s.dumps.Add(configdump.Tracker{Key: "clusters", Dump: s.clusters.ConfigDump})
	}
	client, err := xds.New(xds.Config{
		DynamicResources: s.boot.Proto.GetDynamicResources(),
		Node:             s.Node(),
		Clusters:         s.clusters,
		Stats:            s.store,
		Logger:           s.logs.Logger("config"),
		Init: func(name string) (func(), error) {
			t, err := s.init.Add(name)
			if err != nil {
				return nil, err
			}
			return t.Ready, nil
		},
		Dial:   s.dialXDS,
		Limits: config.Limits{MaxObjNameLen: s.opts.MaxObjNameLen},
	})
	if err != nil {
		return err
	}
	s.xds = client
	return s.dumps.Add(configdump.Tracker{Key: "clusters", Dump: client.ClustersConfigDump})
}

// dialXDS connects to a host of the bootstrap cluster serving xDS, with the
// cluster's TLS (and h2 by ALPN) when it has a transport socket.
func (s *Server) dialXDS(ctx context.Context, name string) (net.Conn, error) {
	c := s.clusters.Get(name)
	if c == nil {
		return nil, fmt.Errorf("xds: cluster %q not found", name)
	}
	h, err := c.Pick(&lb.Context{})
	if err != nil {
		return nil, fmt.Errorf("xds: cluster %q: %w", name, err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", h.Address())
	if err != nil {
		return nil, err
	}
	tctx, err := s.clusterTLS(c.Config())
	if err != nil || tctx == nil {
		return conn, err
	}
	cfg := tctx.Config().Clone()
	if len(cfg.NextProtos) == 0 {
		cfg.NextProtos = []string{"h2"}
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("xds: TLS to cluster %q: %w", name, err)
	}
	return tc, nil
}
