package server

import (
	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/legateproxy/legate/admin/configdump"
)

// addStaticDumps registers the /config_dump sections that come straight
// from the bootstrap: the bootstrap itself, inline route configurations of
// static listeners, static secrets, and scoped routes (those of SRDS and inline lists).
func (s *Server) addStaticDumps() error {
	for _, t := range []configdump.Tracker{
		{Key: "bootstrap", Dump: s.bootstrapDump},
		{Key: "routes", Dump: s.routesDump},
		{Key: "route_scopes", Dump: s.scopedRoutesDump},
		{Key: "secrets", Dump: s.secretsDump},
	} {
		if err := s.dumps.Add(t); err != nil {
			return err
		}
	}
	return nil
}

// bootstrapDump is the effective bootstrap, with the node as Legate reports
// it. The name filter does not apply to the bootstrap.
func (s *Server) bootstrapDump(func(string) bool) proto.Message {
	b := proto.Clone(s.boot.Proto).(*bootstrapv3.Bootstrap)
	b.Node = s.Node()
	return &adminv3.BootstrapConfigDump{Bootstrap: b, LastUpdated: timestamppb.New(s.bootLoadedAt)}
}

// routesDump lists the route configurations written inline in the HTTP
// connection managers of static listeners, as Envoy's static_route_configs.
func (s *Server) routesDump(match func(string) bool) proto.Message {
	d := s.xdsRoutesDump(match)
	for _, l := range s.boot.Proto.GetStaticResources().GetListeners() {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				var hcm hcmv3.HttpConnectionManager
				if f.GetTypedConfig() == nil || f.GetTypedConfig().UnmarshalTo(&hcm) != nil {
					continue
				}
				rc := hcm.GetRouteConfig()
				if rc == nil || !match(rc.GetName()) {
					continue
				}
				packed, err := anypb.New(rc)
				if err != nil {
					continue
				}
				d.StaticRouteConfigs = append(d.StaticRouteConfigs, &adminv3.RoutesConfigDump_StaticRouteConfig{
					RouteConfig: packed, LastUpdated: timestamppb.New(s.bootLoadedAt),
				})
			}
		}
	}
	return d
}

// secretsDump lists static_resources.secrets; configdump redacts them.
func (s *Server) secretsDump(match func(string) bool) proto.Message {
	d := s.xdsSecretsDump(match)
	for _, sec := range s.boot.Proto.GetStaticResources().GetSecrets() {
		if !match(sec.GetName()) {
			continue
		}
		packed, err := anypb.New(sec)
		if err != nil {
			continue
		}
		d.StaticSecrets = append(d.StaticSecrets, &adminv3.SecretsConfigDump_StaticSecret{
			Name: sec.GetName(), LastUpdated: timestamppb.New(s.bootLoadedAt), Secret: packed,
		})
	}
	return d
}
