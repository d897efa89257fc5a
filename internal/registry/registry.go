package registry

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Category is an Envoy extension category, as node.extensions and /server_info name it.
type Category string

// The categories Legate implements extensions of.
const (
	HTTPFilter                Category = "envoy.filters.http"
	NetworkFilter             Category = "envoy.filters.network"
	ListenerFilter            Category = "envoy.filters.listener"
	AccessLogger              Category = "envoy.access_loggers"
	StatsSink                 Category = "envoy.stats_sinks"
	Tracer                    Category = "envoy.tracers"
	OTelResourceDetector      Category = "envoy.tracers.opentelemetry.resource_detectors"
	OTelSampler               Category = "envoy.tracers.opentelemetry.samplers"
	ResourceMonitor           Category = "envoy.resource_monitors"
	ClusterType               Category = "envoy.clusters"
	LBPolicy                  Category = "envoy.load_balancing_policies"
	UpstreamTransportSocket   Category = "envoy.transport_sockets.upstream"
	DownstreamTransportSocket Category = "envoy.transport_sockets.downstream"
	RetryHostPredicate        Category = "envoy.retry_host_predicates"
	RetryPriority             Category = "envoy.retry_priorities"
	Bootstrap                 Category = "envoy.bootstrap"
	RegexEngine               Category = "envoy.regex_engines"
	UpstreamOptions           Category = "envoy.upstream_options"
	HeaderFormatter           Category = "envoy.http.stateful_header_formatters"
	Compressor                Category = "envoy.compression.compressor"
	Decompressor              Category = "envoy.compression.decompressor"
	UDPListenerFilter         Category = "envoy.filters.udp_listener"
	// The unified matcher API's inputs and custom matchers (xds.type.matcher.v3.Matcher).
	MatchingNetworkInput         Category = "envoy.matching.network.input"
	MatchingHTTPInput            Category = "envoy.matching.http.input"
	MatchingNetworkCustomMatcher Category = "envoy.matching.network.custom_matchers"
	// MatchingInput is Envoy's category of the transport socket matcher's inputs.
	MatchingInput Category = "envoy.matching.inputs"
	DNSResolver   Category = "envoy.network.dns_resolver"
)

// Kind is one way of building extensions of a category: the category and F, the Go type of
// the factories its consumer calls. The package that consumes a kind declares it (the HTTP
// connection manager's filter.HTTPFilters, for one). A category has several kinds when
// different layers build different parts of one extension: package config decodes a cluster
// type's typed_config and the cluster manager builds its hosts, each with its own factory
// registered under the same name. Facet tells such kinds apart; it is "" for a category's
// only kind.
type Kind[F any] struct {
	Category Category
	Facet    string
}

// Entry is one extension: its Envoy name, its category and its typed_config message.
type Entry struct {
	Name     string
	Category Category
	// Config is an empty message of the typed_config type; the loader decodes through it.
	Config proto.Message
}

// TypeName is the full name of the config message (envoy.extensions.filters.http.tap.v3.Tap).
func (e Entry) TypeName() string { return string(e.Config.ProtoReflect().Descriptor().FullName()) }

// TypeURL is the type URL of an Any that holds the config message.
func (e Entry) TypeURL() string { return "type.googleapis.com/" + e.TypeName() }

// Decode returns a new config message of the entry's type holding tc; an empty one when tc is
// nil (an extension configured by name alone). path names tc in the error.
func (e Entry) Decode(path string, tc *anypb.Any) (proto.Message, error) {
	m := e.Config.ProtoReflect().New().Interface()
	if tc == nil {
		return m, nil
	}
	if err := tc.UnmarshalTo(m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// entry is an Entry and the factories registered for it, by Kind.Facet.
type entry struct {
	Entry
	factories map[string]any
}

type nameKey struct {
	category Category
	name     string
}

type urlKey struct {
	category Category
	url      string
}

// Builder collects registrations. It is used by one goroutine, until Build. The zero value is
// not usable; call NewBuilder.
type Builder struct {
	entries []*entry
	byName  map[nameKey]*entry
	aliases map[nameKey]string
	errs    []error
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder {
	return &Builder{byName: map[nameKey]*entry{}, aliases: map[nameKey]string{}}
}

// Alias makes old, a deprecated name Envoy still accepts (envoy.statsd), find the extension
// of category c named name. Build reports an alias of an unregistered name.
func (b *Builder) Alias(c Category, old, name string) {
	b.aliases[nameKey{c, old}] = name
}

// Declare registers an extension that its consumer implements itself, without a factory
// (the router, which the HTTP connection manager runs, for one). Declaring an extension that
// a kind also registers is allowed; both must name the same config message.
func (b *Builder) Declare(c Category, name string, config proto.Message) {
	b.entry(c, name, config)
}

// Add registers factory as how k builds the extension name, whose typed_config is a config
// message. Errors (an empty name, a nil config, a name registered twice for k or with another
// message) are reported by Build.
func Add[F any](b *Builder, k Kind[F], name string, config proto.Message, factory F) {
	e := b.entry(k.Category, name, config)
	if e == nil {
		return
	}
	if _, dup := e.factories[k.Facet]; dup {
		b.errs = append(b.errs, fmt.Errorf("registry: %s %q is registered twice%s", k.Category, name, facetText(k.Facet)))
		return
	}
	e.factories[k.Facet] = factory
}

func facetText(facet string) string {
	if facet == "" {
		return ""
	}
	return " (" + facet + ")"
}

// entry returns the entry of c and name, made on first use; nil (with the error recorded)
// when the registration is invalid.
func (b *Builder) entry(c Category, name string, config proto.Message) *entry {
	switch {
	case name == "":
		b.errs = append(b.errs, fmt.Errorf("registry: a %s extension has no name", c))
		return nil
	case config == nil:
		b.errs = append(b.errs, fmt.Errorf("registry: %s %q has no config message", c, name))
		return nil
	}
	k := nameKey{c, name}
	if e, ok := b.byName[k]; ok {
		if got, want := string(config.ProtoReflect().Descriptor().FullName()), e.TypeName(); got != want {
			b.errs = append(b.errs, fmt.Errorf("registry: %s %q is registered with %s and with %s", c, name, want, got))
			return nil
		}
		return e
	}
	e := &entry{Entry: Entry{Name: name, Category: c, Config: config}, factories: map[string]any{}}
	b.byName[k] = e
	b.entries = append(b.entries, e)
	return e
}

// Build checks the registrations and returns the frozen Registry. The Builder must not be
// used afterwards.
func (b *Builder) Build() (*Registry, error) {
	r := &Registry{byName: make(map[nameKey]*entry, len(b.entries)), byURL: make(map[urlKey]*entry, len(b.entries))}
	errs := b.errs
	for k, name := range b.aliases {
		e, ok := b.byName[nameKey{k.category, name}]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("registry: %s alias %q names %q, which is not registered", k.category, k.name, name))
		case b.byName[k] != nil:
			errs = append(errs, fmt.Errorf("registry: %s alias %q is also an extension's name", k.category, k.name))
		default:
			r.byName[k] = e
		}
	}
	for _, e := range b.entries {
		k := urlKey{e.Category, e.TypeURL()}
		if other, dup := r.byURL[k]; dup {
			errs = append(errs, fmt.Errorf("registry: %s %q and %q both take %s", e.Category, other.Name, e.Name, e.TypeName()))
			continue
		}
		r.byURL[k] = e
		r.byName[nameKey{e.Category, e.Name}] = e
		r.entries = append(r.entries, e)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.SortFunc(r.entries, func(a, b *entry) int {
		return cmp.Or(cmp.Compare(a.Category, b.Category), cmp.Compare(a.Name, b.Name))
	})
	b.entries, b.byName, b.aliases = nil, nil, nil
	return r, nil
}

// Of builds the registry of what the register functions (each a package's Register) add.
func Of(register ...func(*Builder)) (*Registry, error) {
	b := NewBuilder()
	for _, reg := range register {
		reg(b)
	}
	return b.Build()
}

// Registry is the frozen table of extensions. It is never modified, so it is safe for
// concurrent use. A nil *Registry has no extensions.
type Registry struct {
	entries []*entry // sorted by category, then name
	byName  map[nameKey]*entry
	byURL   map[urlKey]*entry
}

// Entries lists every extension, sorted by category then name.
func (r *Registry) Entries() []Entry {
	if r == nil {
		return nil
	}
	out := make([]Entry, len(r.entries))
	for i, e := range r.entries {
		out[i] = e.Entry
	}
	return out
}

// Find returns the extension whose typed_config type is typeURL, in any category (the first
// by category when several categories take the message).
func (r *Registry) Find(typeURL string) (Entry, bool) {
	if r == nil {
		return Entry{}, false
	}
	for _, e := range r.entries {
		if e.TypeURL() == typeURL {
			return e.Entry, true
		}
	}
	return Entry{}, false
}

// Has reports whether an extension of category c takes typeURL.
func (r *Registry) Has(c Category, typeURL string) bool {
	if r == nil {
		return false
	}
	_, ok := r.byURL[urlKey{c, typeURL}]
	return ok
}

// Lookup returns how k builds an extension: the one whose typed_config type is typeURL,
// else (typeURL empty or unknown) the one named name or by an alias of it, as Envoy finds a
// factory by type first.
// ok is false when neither is registered for k.
func Lookup[F any](r *Registry, k Kind[F], name, typeURL string) (f F, e Entry, ok bool) {
	if r == nil {
		return f, e, false
	}
	found, ok := r.byURL[urlKey{k.Category, typeURL}]
	if !ok {
		found, ok = r.byName[nameKey{k.Category, name}]
	}
	if !ok {
		return f, e, false
	}
	f, ok = found.factories[k.Facet].(F)
	return f, found.Entry, ok
}

// All yields every extension k builds and its factory, in Entries' order.
func All[F any](r *Registry, k Kind[F]) iter.Seq2[Entry, F] {
	return func(yield func(Entry, F) bool) {
		if r == nil {
			return
		}
		for _, e := range r.entries {
			if e.Category != k.Category {
				continue
			}
			if f, ok := e.factories[k.Facet].(F); ok && !yield(e.Entry, f) {
				return
			}
		}
	}
}
