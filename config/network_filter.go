package config

import (
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/internal/registry"
)

// NetworkFilterConfigs is the kind of network filter extensions as package config reads
// them: how a filter's typed_config becomes the value its factory builds from
// (NetworkFilter.Config). The listener manager builds the same extensions with its own kinds
// (listener.ConnFilters, listener.TerminalFilters), registered under the same names.
var NetworkFilterConfigs = registry.Kind[NetworkFilterParser]{Category: registry.NetworkFilter, Facet: "config"}

// NetworkFilterParser converts a network filter's typed_config, already decoded into the
// extension's message, into the value its factory builds from: the message's checks
// (Validate, for the filters that run its protoc-gen-validate rules), Envoy's defaults
// applied, fields Legate does not implement refused with "not implemented by Legate" and
// their path. It keeps nothing that lives longer than the configuration (no stats, no
// connections); the factory makes those.
type NetworkFilterParser func(m proto.Message) (any, error)

// Validate runs m's protoc-gen-validate rules, when it has them; the error names the
// extension.
func Validate(name string, m proto.Message) error {
	v, ok := m.(interface{ ValidateAll() error })
	if !ok {
		return nil
	}
	if err := v.ValidateAll(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// decodeNetworkFilter decodes the typed_config tc of the network filter name with the
// extension of r that takes it (by type URL, else by name): its message, converted by the
// extension's parser when it has one. It returns nil, and no error, when
// no extension of r takes the filter: the listener manager refuses it then, naming those it
// knows.
func decodeNetworkFilter(r *registry.Registry, name string, tc *anypb.Any) (any, error) {
	return decodeFilter(r, NetworkFilterConfigs, name, tc)
}

// decodeFilter decodes the typed_config tc of the filter name with the extension of kind k
// that takes it: decodeNetworkFilter's steps, for network filters and UDP listener filters
// alike.
func decodeFilter(r *registry.Registry, k registry.Kind[NetworkFilterParser], name string, tc *anypb.Any) (any, error) {
	parse, e, hasParser := registry.Lookup(r, k, name, tc.GetTypeUrl())
	if e.Config == nil {
		return nil, nil
	}
	m, err := e.Decode(e.Name+": typed_config", tc)
	if err != nil {
		return nil, err
	}
	if !hasParser {
		return m, nil
	}
	return parse(m)
}

// parseTCPProxy is the TCP proxy's NetworkFilterParser: a *TCPProxy.
func parseTCPProxy(m proto.Message) (any, error) {
	return TCPProxyFromProto(m.(*tcpproxyv3.TcpProxy))
}

// parseHTTPConnectionManager is the connection manager's NetworkFilterParser: a
// *HTTPConnectionManager. The parts other owners serve (rds, scoped_routes, HTTP filters with
// config_discovery, tracing) are taken out of the message into their own fields, so that the
// rest converts as an inline route_config does; the connection manager subscribes to them.
func parseHTTPConnectionManager(m proto.Message) (any, error) {
	if err := Validate(HTTPConnectionManagerFilter, m); err != nil {
		return nil, err
	}
	p := m.(*hcmv3.HttpConnectionManager)
	rds, scoped := takeRouteSpecifier(p)
	discovered := takeDiscoveredFilters(p)
	tracing := p.GetTracing()
	p.Tracing = nil // read by the tracing package, from HTTPConnectionManager.Tracing
	h, err := HTTPConnectionManagerFromProto(p)
	if err != nil {
		return nil, err
	}
	h.RDS, h.ScopedRoutes, h.DiscoveredFilters, h.Tracing = rds, scoped, discovered, tracing
	return h, nil
}

// takeRouteSpecifier removes p's rds or scoped_routes and puts an empty inline route_config
// of the same name in its place; the tables then come from RDS or SRDS.
func takeRouteSpecifier(p *hcmv3.HttpConnectionManager) (*hcmv3.Rds, *hcmv3.ScopedRoutes) {
	rds, scoped := p.GetRds(), p.GetScopedRoutes()
	switch {
	case rds != nil:
		p.RouteSpecifier = &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: rds.GetRouteConfigName()}}
	case scoped != nil:
		p.RouteSpecifier = &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: scoped.GetName()}}
	}
	return rds, scoped
}

// DiscoveredFilter is an HTTP filter of a connection manager whose configuration comes from
// ECDS (http_filters[].config_discovery).
type DiscoveredFilter struct {
	// Pos is the filter's position among the connection manager's built filters (the router
	// excluded), Name its name, Source its config_discovery.
	Pos    int
	Name   string
	Source *corev3.ExtensionConfigSource
}

// takeDiscoveredFilters removes the HTTP filters with config_discovery from p, so that the
// rest converts as usual, and returns them with the position each takes among the built
// filters.
func takeDiscoveredFilters(p *hcmv3.HttpConnectionManager) []DiscoveredFilter {
	var out []DiscoveredFilter
	kept := p.HttpFilters[:0:0]
	for _, f := range p.GetHttpFilters() {
		if cd := f.GetConfigDiscovery(); cd != nil {
			out = append(out, DiscoveredFilter{Pos: len(kept) + len(out), Name: f.GetName(), Source: cd})
			continue
		}
		kept = append(kept, f)
	}
	if out != nil {
		p.HttpFilters = kept
	}
	return out
}
