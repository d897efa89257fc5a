package resource

import (
	"errors"
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/bootstrap"
	"github.com/legateproxy/legate/xds/watch"
)

// hcmTypeURL is the typed_config type of envoy.filters.network.http_connection_manager.
const hcmTypeURL = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"

// downstreamTLSTypeURL is the typed_config type of a listener's TLS transport socket.
const downstreamTLSTypeURL = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext"

// Listener is an LDS listener's name and the dynamic resources it depends on: a listener warms
// until each of them has arrived (or its initial fetch timed out). LDS's decoder
// (listener/lds.DecodeListener) adds the converted configuration.
type Listener struct {
	Name string
	// Routes are the route configurations its connection managers load through rds.
	Routes []Dependency
	// Secrets are the SDS secrets its TLS transport sockets name with an sds_config.
	Secrets []Dependency
	// Extensions are the ECDS filter configurations its connection managers' HTTP filters
	// discover (config_discovery without apply_default_config_without_warming).
	Extensions []Dependency
	// ScopedRoutes are the scoped_rds of its connection managers (Name is the scoped_routes
	// name, Source the SRDS source): the listener waits for the first SRDS response and the
	// route configurations of the scopes it lists.
	ScopedRoutes []Dependency
}

// Dependency is a resource a listener or connection manager subscribes to by name.
type Dependency struct {
	Name   string
	Source Source
	// Config is the config source Source was read from (route configurations, secrets and
	// extension configs, which their owners watch).
	Config *corev3.ConfigSource
	// StatPrefix is the connection manager's stat_prefix (routes and scoped routes).
	StatPrefix string
	// Scoped is the connection manager's scoped_routes (scoped routes only).
	Scoped *hcmv3.ScopedRoutes
	// TypeURLs is the HTTP filter's config_discovery.type_urls (extension configs only).
	TypeURLs []string
}

// ListenerDependencies returns the dynamic resources a validated listener l depends on: the rds,
// scoped_rds and config_discovery sources of its connection managers and the sds_config
// secrets of its TLS transport sockets, each once.
func ListenerDependencies(l *listenerv3.Listener) (*Listener, error) {
	at := fmt.Sprintf("listener %q", l.GetName())
	out := &Listener{Name: l.GetName()}
	chains := append([]*listenerv3.FilterChain(nil), l.GetFilterChains()...)
	if d := l.GetDefaultFilterChain(); d != nil {
		chains = append(chains, d)
	}
	seenRoute, seenSecret := map[string]bool{}, map[string]bool{}
	for i, fc := range chains {
		path := fmt.Sprintf("%s: filter_chains[%d]", at, i)
		for j, f := range fc.GetFilters() {
			if f.GetTypedConfig().GetTypeUrl() != hcmTypeURL {
				continue
			}
			var hcm hcmv3.HttpConnectionManager
			if err := f.GetTypedConfig().UnmarshalTo(&hcm); err != nil {
				return nil, fmt.Errorf("%s.filters[%d].typed_config: %v", path, j, err)
			}
			exts, err := hcmExtensionDependencies(fmt.Sprintf("%s.filters[%d].typed_config", path, j), &hcm)
			if err != nil {
				return nil, err
			}
			for _, d := range exts {
				// Filters sharing a configuration but not type_urls each wait with their own.
				if key := "ecds\x00" + d.Source.Key() + "\x00" + d.Name + "\x00" + strings.Join(d.TypeURLs, "\x00"); !seenRoute[key] {
					seenRoute[key] = true
					out.Extensions = append(out.Extensions, d)
				}
			}
			if sr := hcm.GetScopedRoutes(); sr.GetScopedRds() != nil {
				src, err := SourceFromProto(sr.GetScopedRds().GetScopedRdsConfigSource())
				if err != nil {
					return nil, fmt.Errorf("%s.filters[%d].typed_config.scoped_routes.scoped_rds.scoped_rds_config_source.%w", path, j, err)
				}
				if key := "srds\x00" + src.Key() + "\x00" + sr.GetName(); !seenRoute[key] {
					seenRoute[key] = true
					out.ScopedRoutes = append(out.ScopedRoutes, Dependency{Name: sr.GetName(), Source: src, StatPrefix: hcm.GetStatPrefix(), Scoped: sr})
				}
			}
			rds := hcm.GetRds()
			if rds == nil {
				continue
			}
			src, err := SourceFromProto(rds.GetConfigSource())
			if err != nil {
				return nil, fmt.Errorf("%s.filters[%d].typed_config.rds.config_source.%w", path, j, err)
			}
			if src.Self {
				return nil, fmt.Errorf("%s.filters[%d].typed_config.rds.config_source.self is not supported", path, j)
			}
			key := src.Key() + "\x00" + rds.GetRouteConfigName()
			if !seenRoute[key] {
				seenRoute[key] = true
				out.Routes = append(out.Routes, Dependency{Name: rds.GetRouteConfigName(), Source: src, Config: rds.GetConfigSource(), StatPrefix: hcm.GetStatPrefix()})
			}
		}
		ts := fc.GetTransportSocket().GetTypedConfig()
		if ts.GetTypeUrl() != downstreamTLSTypeURL {
			continue
		}
		var tc tlsv3.DownstreamTlsContext
		if err := ts.UnmarshalTo(&tc); err != nil {
			return nil, fmt.Errorf("%s.transport_socket.typed_config: %v", path, err)
		}
		deps, err := SecretDependencies(path+".transport_socket.typed_config.common_tls_context", tc.GetCommonTlsContext())
		if err != nil {
			return nil, err
		}
		if s := tc.GetSessionTicketKeysSdsSecretConfig(); s.GetSdsConfig() != nil {
			d, err := secretDependency(path+".transport_socket.typed_config.session_ticket_keys_sds_secret_config", s)
			if err != nil {
				return nil, err
			}
			deps = append(deps, d)
		}
		for _, d := range deps {
			if key := d.Source.Key() + "\x00" + d.Name; !seenSecret[key] {
				seenSecret[key] = true
				out.Secrets = append(out.Secrets, d)
			}
		}
	}
	return out, nil
}

// SecretDependencies returns the SDS secrets a TLS context loads from a config source (those
// with an sds_config; the others are static_resources.secrets).
func SecretDependencies(path string, c *tlsv3.CommonTlsContext) ([]Dependency, error) {
	var cfgs []*tlsv3.SdsSecretConfig
	cfgs = append(cfgs, c.GetTlsCertificateSdsSecretConfigs()...)
	cfgs = append(cfgs, c.GetValidationContextSdsSecretConfig(), c.GetCombinedValidationContext().GetValidationContextSdsSecretConfig())
	var out []Dependency
	for _, s := range cfgs {
		if s.GetSdsConfig() == nil {
			continue
		}
		d, err := secretDependency(path, s)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func secretDependency(path string, s *tlsv3.SdsSecretConfig) (Dependency, error) {
	src, err := SourceFromProto(s.GetSdsConfig())
	if err != nil {
		return Dependency{}, fmt.Errorf("%s: sds_config.%w", path, err)
	}
	if src.Self {
		return Dependency{}, fmt.Errorf("%s: sds_config.self is not supported", path)
	}
	if s.GetName() == "" {
		return Dependency{}, fmt.Errorf("%s: name is empty; an SDS secret needs a name", path)
	}
	return Dependency{Name: s.GetName(), Source: src, Config: s.GetSdsConfig()}, nil
}

// ListenerName returns the name of an LDS resource without validating it, or "".
func ListenerName(a *anypb.Any) string {
	l, err := UnmarshalListener(a)
	if err != nil {
		return ""
	}
	return l.GetName()
}

// UnmarshalListener checks an LDS resource's type URL, decodes it and opens its typed_structs;
// it does not validate it.
func UnmarshalListener(a *anypb.Any) (*listenerv3.Listener, error) {
	if a == nil {
		return nil, errors.New("listener: resource is empty")
	}
	if err := watch.CheckTypeURL(a.GetTypeUrl(), ListenerType); err != nil {
		return nil, fmt.Errorf("listener: %w", err)
	}
	l := &listenerv3.Listener{}
	if err := proto.Unmarshal(a.GetValue(), l); err != nil {
		return nil, fmt.Errorf("listener: cannot decode the resource: %v", err)
	}
	if err := bootstrap.OpenTypedStructs("", l); err != nil {
		return nil, fmt.Errorf("listener %q: %w", l.GetName(), err)
	}
	return l, nil
}
