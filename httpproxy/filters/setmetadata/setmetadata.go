package setmetadata

import (
	"fmt"
	"net/http"

	smv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/set_metadata/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/stats"
)

// Name and TypeURL select the filter in http_filters.
const (
	Name    = "envoy.filters.http.set_metadata"
	TypeURL = "type.googleapis.com/envoy.extensions.filters.http.set_metadata.v3.Config"
)

// Stats are the filter's stats (http.<stat_prefix>.set_metadata.*).
type Stats struct {
	OverwriteDenied stats.Counter `stat:"overwrite_denied"`
}

// entry is one namespace's value.
type entry struct {
	namespace string
	fields    map[string]*structpb.Value
	overwrite bool // merge into a namespace that already has metadata
}

// Filter is one configured set_metadata filter. Immutable; safe for concurrent use.
type Filter struct {
	entries []entry
	stats   *Stats
	release func()
}

// Register registers the filter (it takes no per-route configuration).
func Register(b *registry.Builder) {
	registry.Add(b, filter.HTTPFilters, Name, &smv3.Config{}, filter.Extension{
		New: func(cfg *anypb.Any, ctx *filter.Context) (filter.Filter, error) { return FromAny(cfg, ctx) },
	})
}

// FromAny builds the filter from its typed_config (nil sets nothing).
func FromAny(cfg *anypb.Any, ctx *filter.Context) (*Filter, error) {
	var pb smv3.Config
	if cfg != nil {
		if cfg.GetTypeUrl() != TypeURL {
			return nil, fmt.Errorf("%s: typed_config: type %q; want %s", Name, cfg.GetTypeUrl(), TypeURL)
		}
		if err := cfg.UnmarshalTo(&pb); err != nil {
			return nil, fmt.Errorf("%s: typed_config: %w", Name, err)
		}
	}
	if err := pb.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	if ctx == nil {
		ctx = &filter.Context{}
	}
	f := &Filter{}
	if pb.GetMetadataNamespace() != "" && pb.GetValue() != nil {
		// The deprecated form merges whatever is there.
		f.entries = append(f.entries, entry{namespace: pb.GetMetadataNamespace(), fields: pb.GetValue().GetFields(), overwrite: true})
	}
	for i, m := range pb.GetMetadata() {
		if m.GetTypedValue() != nil {
			return nil, fmt.Errorf("%s: metadata[%d].typed_value: typed metadata is not implemented by Legate", Name, i)
		}
		if m.GetValue() == nil {
			continue
		}
		f.entries = append(f.entries, entry{namespace: m.GetMetadataNamespace(), fields: m.GetValue().GetFields(), overwrite: m.GetAllowOverwrite()})
	}
	f.stats, f.release = filter.AcquireStats[Stats](ctx.Stats, ctx.StatPrefix+"set_metadata.")
	return f, nil
}

// Close drops the filter's hold on its stats.
func (f *Filter) Close() error {
	f.release()
	return nil
}

// OnRequest writes the configured values into the request's dynamic metadata.
func (f *Filter) OnRequest(x *filter.Exchange) *filter.Reply {
	for i := range f.entries {
		e := &f.entries[i]
		if _, exists := x.Metadata[e.namespace]; exists && !e.overwrite {
			f.stats.OverwriteDenied.Inc()
			continue
		}
		x.SetMetadata(e.namespace, e.fields)
	}
	return nil
}

// OnResponse does nothing: the filter acts on requests only.
func (f *Filter) OnResponse(*filter.Exchange, http.Header) {}
