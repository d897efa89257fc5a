package tracing

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tracingv3 "github.com/envoyproxy/go-control-plane/envoy/type/tracing/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/internal/grpcclient"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/stats"
)

// OTelName and OTelTypeURL name the OpenTelemetry provider.
const (
	OTelName    = "envoy.tracers.opentelemetry"
	OTelTypeURL = "type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig"
)

// Config is one connection manager's tracing: its sampling, its tags and its exporter.
type Config struct {
	Sampling
	MaxPathTagLength int
	Tags             []CustomTag
	// Runtime returns the runtime's value of key, or def; nil uses def.
	Runtime func(key string, def uint64) uint64
	// NodeID and Zone are the node_id and zone tags.
	NodeID, Zone string
	Exporter     Exporter
	// Format is the provider's context headers; SharedContext and TraceID128 are Zipkin's
	// shared_span_context and trace_id_128bit.
	Format                    Format
	SharedContext, TraceID128 bool
	// Sample is the provider's sampler (OpenTelemetry's sampler), which decides instead of
	// the sampling fractions and a propagated flag; nil for none.
	Sample Sampler
	// Verbose is verbose: spans carry timing events (Span.Events).
	Verbose bool
	// Spawn is spawn_upstream_span: the router's request gets a CLIENT span of its own, child
	// of the downstream span, whose context the upstream receives.
	Spawn bool
}

// Sampling are client_sampling, random_sampling and overall_sampling as numerators out of
// 10000: the connection manager's, or a route's tracing block's.
type Sampling struct {
	Client, Random, Overall uint64
}

// Exporter sends finished spans off the request path.
type Exporter interface {
	// Export queues a span without blocking.
	Export(*Span)
	// Close sends what is queued and stops.
	Close()
}

// CustomTag is one custom_tags entry: a literal, an environment variable (read once, at load,
// as Envoy does), a request header, or a value of the request's or the route's metadata.
type CustomTag struct {
	Name   string
	Value  string // the literal or environment value, or the header's or metadata's default
	Header string // the request header to read; "" for a fixed value
	// Metadata, when set, is where the value is read (Value is the default).
	Metadata *MetadataTag
}

// MetadataKind is whose metadata a metadata tag reads.
type MetadataKind uint8

const (
	RequestMetadata MetadataKind = iota // the stream's dynamic metadata
	RouteMetadata                       // the route's metadata
	ClusterMetadata                     // the upstream cluster's metadata
	HostMetadata                        // the upstream host's envoy.lb metadata
)

// hostNamespace is the one namespace of host metadata Legate keeps (stringified values).
const hostNamespace = "envoy.lb"

// MetadataTag is a metadata custom tag's source: the namespace (metadata_key.key) and the path
// of keys into it.
type MetadataTag struct {
	Kind      MetadataKind
	Namespace string
	Path      []string
}

// Lookup reads the tag's value from metadata (by namespace): a string as it is, a number as
// Envoy prints it, a bool as true or false, a list or struct as JSON; ok is false when the
// path leads nowhere (the tag's default applies).
func (m *MetadataTag) Lookup(metadata map[string]*structpb.Struct) (string, bool) {
	st := metadata[m.Namespace]
	if st == nil {
		return "", false
	}
	var v *structpb.Value
	fields := st.GetFields()
	for i, k := range m.Path {
		v = fields[k]
		if v == nil {
			return "", false
		}
		if i < len(m.Path)-1 {
			fields = v.GetStructValue().GetFields()
		}
	}
	switch x := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return x.StringValue, true
	case *structpb.Value_NumberValue:
		return strconv.FormatFloat(x.NumberValue, 'g', -1, 64), true
	case *structpb.Value_BoolValue:
		return strconv.FormatBool(x.BoolValue), true
	case *structpb.Value_ListValue, *structpb.Value_StructValue:
		b, err := protojson.Marshal(v)
		if err != nil {
			return "", false
		}
		return string(b), true
	}
	return "", false
}

// Deps are what a tracer is built with.
type Deps struct {
	Dial          grpcclient.Dial
	ClusterExists func(string) bool
	Stats         *stats.Store
	Runtime       func(key string, def uint64) uint64
	NodeID, Zone  string
	// LocalCluster is node.cluster: Zipkin's localEndpoint service name.
	LocalCluster string
	// Clock ticks the exporters' flush interval; nil means the system clock.
	Clock clock.Clock
	// Getenv reads the environment (OTEL_RESOURCE_ATTRIBUTES); nil is os.Getenv.
	Getenv func(string) string
	// Tracers are the tracers' factories (the kind Tracers); nil means this package's
	// (OpenTelemetry and Zipkin).
	Tracers *registry.Registry
	// Default is the bootstrap's tracing.http: the provider of a connection manager whose
	// tracing names none, as in Envoy.
	Default *tracev3.Tracing_Http
}

// HCMStats are the http.<stat_prefix>.tracing.* counters of a connection manager.
type HCMStats struct {
	RandomSampling stats.Counter `stat:"random_sampling"`
	ServiceForced  stats.Counter `stat:"service_forced"`
	ClientEnabled  stats.Counter `stat:"client_enabled"`
	NotTraceable   stats.Counter `stat:"not_traceable"`
	HealthCheck    stats.Counter `stat:"health_check"`
}

// FromProto builds the tracing of a connection manager; path names t in errors. The caller
// closes the returned exporter (Config.Exporter.Close) with the connection manager.
func FromProto(path string, t *hcmv3.HttpConnectionManager_Tracing, d Deps) (*Config, error) {
	switch {
	case t.GetOperation() != "":
		return nil, fmt.Errorf("%s.operation: not implemented by Legate", path)
	case t.GetUpstreamOperation() != "":
		return nil, fmt.Errorf("%s.upstream_operation: not implemented by Legate", path)
	case t.GetNoContextPropagation():
		return nil, fmt.Errorf("%s.no_context_propagation: not implemented by Legate", path)
	}
	c := &Config{
		Sampling:         Sampling{Client: percent(t.GetClientSampling()), Random: percent(t.GetRandomSampling()), Overall: percent(t.GetOverallSampling())},
		MaxPathTagLength: 256, Runtime: d.Runtime, NodeID: d.NodeID, Zone: d.Zone,
		Spawn: t.GetSpawnUpstreamSpan().GetValue(), Verbose: t.GetVerbose(),
	}
	if m := t.GetMaxPathTagLength(); m != nil {
		c.MaxPathTagLength = int(m.GetValue())
	}
	for i, ct := range t.GetCustomTags() {
		tag, err := CustomTagFromProto(fmt.Sprintf("%s.custom_tags[%d]", path, i), ct)
		if err != nil {
			return nil, err
		}
		c.Tags = append(c.Tags, tag)
	}
	if d.Tracers == nil {
		var err error
		if d.Tracers, err = builtin(); err != nil {
			return nil, err
		}
	}
	p := t.GetProvider()
	if p == nil {
		p = d.Default
	}
	if p == nil {
		return nil, fmt.Errorf("%s.provider: required when the bootstrap sets no tracing.http", path)
	}
	prov, err := provider(path+".provider", p, d)
	if err != nil {
		return nil, err
	}
	c.Exporter, c.Sample, c.Format, c.SharedContext, c.TraceID128 = prov.Exporter, prov.Sample, prov.Format, prov.SharedContext, prov.TraceID128
	return c, nil
}

// provider builds a tracing provider with the factory Deps.Tracers has for its type; path
// names it in errors.
func provider(path string, p *tracev3.Tracing_Http, d Deps) (Provider, error) {
	tc := p.GetTypedConfig()
	newTracer, e, ok := registry.Lookup(d.Tracers, Tracers, "", tc.GetTypeUrl())
	if !ok {
		var names []string
		for e := range registry.All(d.Tracers, Tracers) {
			names = append(names, e.Name)
		}
		return Provider{}, fmt.Errorf("%s: %q (%s): only %s are implemented; other tracers are not implemented by Legate", path, p.GetName(), tc.GetTypeUrl(), strings.Join(names, " and "))
	}
	tpath := path + ".typed_config"
	cfg := e.Config.ProtoReflect().New().Interface().(validated)
	if err := unpack(tpath, tc, cfg); err != nil {
		return Provider{}, err
	}
	return newTracer(tpath, cfg, d)
}

// validated is a config message with its protoc-gen-validate rules.
type validated interface {
	proto.Message
	ValidateAll() error
}

// unpack unmarshals and validates a typed_config.
func unpack(path string, a *anypb.Any, m validated) error {
	if err := a.UnmarshalTo(m); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := m.ValidateAll(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// percent converts a sampling Percent (default 100 %) to a numerator out of 10000.
func percent(p *typev3.Percent) uint64 {
	if p == nil {
		return 10000
	}
	return uint64(math.Round(p.GetValue() * 100))
}

// CustomTagFromProto converts one custom_tags entry (of a connection manager or a route);
// path names it in errors. Metadata tags are refused.
func CustomTagFromProto(path string, ct *tracingv3.CustomTag) (CustomTag, error) {
	tag := CustomTag{Name: ct.GetTag()}
	switch {
	case ct.GetLiteral() != nil:
		tag.Value = ct.GetLiteral().GetValue()
	case ct.GetEnvironment() != nil:
		v, ok := os.LookupEnv(ct.GetEnvironment().GetName())
		if !ok {
			v = ct.GetEnvironment().GetDefaultValue()
		}
		tag.Value = v
	case ct.GetRequestHeader() != nil:
		tag.Header, tag.Value = ct.GetRequestHeader().GetName(), ct.GetRequestHeader().GetDefaultValue()
	case ct.GetMetadata() != nil:
		md := ct.GetMetadata()
		mt := &MetadataTag{Namespace: md.GetMetadataKey().GetKey()}
		switch {
		case md.GetKind().GetRequest() != nil:
			mt.Kind = RequestMetadata
		case md.GetKind().GetRoute() != nil:
			mt.Kind = RouteMetadata
		case md.GetKind().GetCluster() != nil:
			mt.Kind = ClusterMetadata
		case md.GetKind().GetHost() != nil:
			mt.Kind = HostMetadata
		default:
			return tag, fmt.Errorf("%s.metadata.kind: required", path)
		}
		for i, seg := range md.GetMetadataKey().GetPath() {
			if seg.GetKey() == "" {
				return tag, fmt.Errorf("%s.metadata.metadata_key.path[%d].key: required", path, i)
			}
			mt.Path = append(mt.Path, seg.GetKey())
		}
		if mt.Namespace == "" || len(mt.Path) == 0 {
			return tag, fmt.Errorf("%s.metadata.metadata_key: a key and a path are required", path)
		}
		if mt.Kind == HostMetadata && (mt.Namespace != hostNamespace || len(mt.Path) != 1) {
			return tag, fmt.Errorf("%s.metadata: host metadata tags read %s keys only (one path element); other namespaces are not implemented by Legate", path, hostNamespace)
		}
		tag.Metadata, tag.Value = mt, md.GetDefaultValue()
	default:
		return tag, fmt.Errorf("%s: not implemented by Legate (only literal, environment, request_header and metadata)", path)
	}
	return tag, nil
}
