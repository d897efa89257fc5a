package filter

import (
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/internal/registry"
)

// HTTPFilters is the kind of HTTP filter extensions. A filter package registers itself with
//
//	registry.Add(b, filter.HTTPFilters, Name, &pb.Config{}, filter.Extension{New: factory})
//
// and the server's Registry (FromRegistry) builds filters from every one so registered.
var HTTPFilters = registry.Kind[Extension]{Category: registry.HTTPFilter}

// Extension is how an HTTP filter extension is built.
type Extension struct {
	// New builds the filter from a filter chain's entry. Required.
	New Factory
	// PerRoute makes the filter's typed_per_filter_config entries, whose message is
	// PerRouteConfig; nil when the filter takes no per-route configuration.
	PerRoute       PerRouteFactory
	PerRouteConfig proto.Message
}

// FromRegistry returns the HTTP filters registered in r as a Registry. Filters added to the
// result with Register join them (the older way of registering a filter).
func FromRegistry(r *registry.Registry) (*Registry, error) {
	out := NewRegistry()
	for e, x := range registry.All(r, HTTPFilters) {
		if err := out.Register(e.Name, x.New, e.TypeURL()); err != nil {
			return nil, err
		}
		if x.PerRoute == nil {
			continue
		}
		url := registry.Entry{Config: x.PerRouteConfig}.TypeURL()
		if err := out.RegisterPerRoute(x.PerRoute, url); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Of returns a Registry of the HTTP filters that the register functions (each a filter
// package's Register) register: a small set, for a connection manager without the server's.
func Of(register ...func(*registry.Builder)) (*Registry, error) {
	r, err := registry.Of(register...)
	if err != nil {
		return nil, err
	}
	return FromRegistry(r)
}
