package runtime

import (
	"sort"

	"google.golang.org/protobuf/types/known/structpb"
)

// ViewEntry is one key of the /runtime listing.
type ViewEntry struct {
	Key string
	// LayerValues has one raw value per loaded layer, in layer order; ""
	// where the layer lacks the key.
	LayerValues []string
	// FinalValue is the value of the last layer holding a non-empty value.
	FinalValue string
}

// View is the data of GET /runtime: the loaded layers' names in order and
// every key of any layer, sorted. A disk layer whose directory is missing is
// not loaded and so not listed, as in Envoy.
type View struct {
	Layers  []string
	Entries []ViewEntry
}

// View returns the /runtime data of this snapshot.
func (s *Snapshot) View() View {
	v := View{Layers: make([]string, len(s.layers))}
	keys := make([]string, 0, len(s.values))
	for k := range s.values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, l := range s.layers {
		v.Layers[i] = l.name
	}
	for _, k := range keys {
		e := ViewEntry{Key: k, LayerValues: make([]string, len(s.layers))}
		for i, l := range s.layers {
			if le, ok := l.values[k]; ok {
				e.LayerValues[i] = le.raw
				if le.raw != "" {
					e.FinalValue = le.raw
				}
			}
		}
		v.Entries = append(v.Entries, e)
	}
	return v
}

// AdminView returns the body of GET /runtime as Envoy builds it, a
// google.protobuf.Struct: {"entries": {<key>: {"final_value": …,
// "layer_values": […]}}, "layers": […]}. (There is no envoy.admin.v3 message
// for /runtime; Envoy prints this Struct with all fields, pretty.)
func (r *Runtime) AdminView() *structpb.Struct {
	v := r.Snapshot().View()
	layers := make([]*structpb.Value, len(v.Layers))
	for i, name := range v.Layers {
		layers[i] = structpb.NewStringValue(name)
	}
	entries := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(v.Entries))}
	for _, e := range v.Entries {
		values := make([]*structpb.Value, len(e.LayerValues))
		for i, lv := range e.LayerValues {
			values[i] = structpb.NewStringValue(lv)
		}
		entries.Fields[e.Key] = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			"final_value":  structpb.NewStringValue(e.FinalValue),
			"layer_values": structpb.NewListValue(&structpb.ListValue{Values: values}),
		}})
	}
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		"entries": structpb.NewStructValue(entries),
		"layers":  structpb.NewListValue(&structpb.ListValue{Values: layers}),
	}}
}
