package transportsocket

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestMetadataInput reads values at a path of the endpoint's and the locality's metadata:
// strings as they are, numbers and bools as text, and no value for a missing key, a missing
// filter, a struct or a path through a non-struct.
func TestMetadataInput(t *testing.T) {
	s, err := structpb.NewStruct(map[string]any{
		"mode": "tls", "port": 8443.0, "on": true,
		"nested": map[string]any{"kind": "mtls"}, "list": []any{"a"},
	})
	if err != nil {
		t.Fatal(err)
	}
	md := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"f": s}}
	endpoint := func(d *Data) *corev3.Metadata { return d.Endpoint }
	locality := func(d *Data) *corev3.Metadata { return d.Locality }
	for _, tc := range []struct {
		name   string
		of     func(*Data) *corev3.Metadata
		filter string
		keys   []string
		want   string
		ok     bool
	}{
		{"string", endpoint, "f", []string{"mode"}, "tls", true},
		{"number", endpoint, "f", []string{"port"}, "8443", true},
		{"bool", endpoint, "f", []string{"on"}, "true", true},
		{"nested", endpoint, "f", []string{"nested", "kind"}, "mtls", true},
		{"locality", locality, "f", []string{"mode"}, "", false},
		{"struct", endpoint, "f", []string{"nested"}, "", false},
		{"list", endpoint, "f", []string{"list"}, "", false},
		{"through a string", endpoint, "f", []string{"mode", "x"}, "", false},
		{"missing key", endpoint, "f", []string{"nope"}, "", false},
		{"missing filter", endpoint, "g", []string{"mode"}, "", false},
		{"no path", endpoint, "f", nil, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := metadataInput(tc.of, tc.filter, tc.keys)(&Data{Endpoint: md})
			if got != tc.want || ok != tc.ok {
				t.Fatalf("value = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
