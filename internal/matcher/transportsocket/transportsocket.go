package transportsocket

import (
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/matching/common_inputs/transport_socket/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/internal/filterstate"
	"github.com/legateproxy/legate/internal/matcher"
	"github.com/legateproxy/legate/internal/registry"
)

// Data is what the inputs read when a cluster chooses an endpoint's transport socket.
type Data struct {
	Endpoint, Locality *corev3.Metadata // nil when unset
	// FilterState are the objects the downstream connection shares with the upstream
	// connection being made; nil when the choice is made for the host (no connection).
	FilterState []filterstate.Entry
}

// FilterStateInputName is the filter state input's extension name; a matcher that uses it
// chooses a socket per connection.
const FilterStateInputName = "envoy.matching.inputs.transport_socket_filter_state"

// Inputs is the kind the inputs are registered under; config compiles a cluster's
// transport_socket_matcher with it.
var Inputs = registry.Kind[matcher.InputFactory[Data]]{Category: registry.MatchingInput}

// Register adds the endpoint and locality metadata inputs.
func Register(b *registry.Builder) {
	registry.Add(b, Inputs, "envoy.matching.inputs.endpoint_metadata", &tsv3.EndpointMetadataInput{},
		func(cfg proto.Message) (matcher.Input[Data], error) {
			c := cfg.(*tsv3.EndpointMetadataInput)
			return metadataInput(func(d *Data) *corev3.Metadata { return d.Endpoint }, c.GetFilter(), keysOf(c.GetPath())), nil
		})
	registry.Add(b, Inputs, "envoy.matching.inputs.locality_metadata", &tsv3.LocalityMetadataInput{},
		func(cfg proto.Message) (matcher.Input[Data], error) {
			c := cfg.(*tsv3.LocalityMetadataInput)
			return metadataInput(func(d *Data) *corev3.Metadata { return d.Locality }, c.GetFilter(), keysOf(c.GetPath())), nil
		})
	registry.Add(b, Inputs, FilterStateInputName, &tsv3.FilterStateInput{},
		func(cfg proto.Message) (matcher.Input[Data], error) {
			return filterStateInput(cfg.(*tsv3.FilterStateInput).GetKey()), nil
		})
}

// filterStateInput reads the plain serialization of the shared object key; no object, or
// one without a plain form, has no value.
func filterStateInput(key string) matcher.Input[Data] {
	return func(d *Data) (string, bool) {
		for _, e := range d.FilterState {
			if e.Name == key {
				return e.Object.Plain()
			}
		}
		return "", false
	}
}

// keysOf reads a metadata path (each input has its own segment message).
func keysOf[S interface{ GetKey() string }](path []S) []string {
	keys := make([]string, len(path))
	for i, s := range path {
		keys[i] = s.GetKey()
	}
	return keys
}

// metadataInput reads the value at filter, then keys, of the metadata of.
func metadataInput(of func(*Data) *corev3.Metadata, filter string, keys []string) matcher.Input[Data] {
	return func(d *Data) (string, bool) {
		s := of(d).GetFilterMetadata()[filter]
		if s == nil || len(keys) == 0 {
			return "", false
		}
		var v *structpb.Value
		for i, k := range keys {
			v = s.GetFields()[k]
			if i < len(keys)-1 {
				s = v.GetStructValue()
			}
		}
		return valueText(v)
	}
}

// valueText is a metadata value as the matcher compares it.
func valueText(v *structpb.Value) (string, bool) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return k.StringValue, true
	case *structpb.Value_NumberValue:
		return strconv.FormatFloat(k.NumberValue, 'f', -1, 64), true
	case *structpb.Value_BoolValue:
		return strconv.FormatBool(k.BoolValue), true
	}
	return "", false
}
