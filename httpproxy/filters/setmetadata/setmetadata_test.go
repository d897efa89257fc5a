package setmetadata

import (
	"strings"
	"testing"

	smv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/set_metadata/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
	"github.com/legateproxy/legate/httpproxy/route"
)

// fromYAML makes the filter's typed_config from YAML.
func fromYAML(t testing.TB, y string) *anypb.Any {
	t.Helper()
	return filtertest.AnyFromYAML(t, y, &smv3.Config{})
}

func TestConfig(t *testing.T) {
	if _, err := FromAny(nil, nil); err != nil {
		t.Errorf("FromAny(nil) = %v; want nil", err)
	}
	_, err := FromAny(fromYAML(t, `metadata: [{metadata_namespace: ns, typed_value: {"@type": type.googleapis.com/google.protobuf.StringValue, value: x}}]`), nil)
	if err == nil || !strings.Contains(err.Error(), "metadata[0].typed_value: typed metadata is not implemented by Legate") {
		t.Errorf("FromAny(typed_value) = %v; want it refused", err)
	}
	if _, err := FromAny(fromYAML(t, `metadata: [{metadata_namespace: "", value: {a: 1}}]`), nil); err == nil {
		t.Error("FromAny(empty namespace) = nil; want a validation error")
	}
}

// TestOnRequest: values merge into their namespaces; a namespace that already has metadata
// is left alone without allow_overwrite (and counted); the deprecated form always merges.
func TestOnRequest(t *testing.T) {
	f, err := FromAny(fromYAML(t, `metadata_namespace: legacy
value: {old: true}
metadata:
- {metadata_namespace: acme, value: {tier: gold, region: eu}}
- {metadata_namespace: acme, value: {tier: silver}}
- {metadata_namespace: acme, value: {tier: platinum}, allow_overwrite: true}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	x := &filter.Exchange{Request: &route.Request{}}
	x.SetMetadata("legacy", map[string]*structpb.Value{"kept": structpb.NewBoolValue(true)})
	f.OnRequest(x)
	acme := x.Metadata["acme"].GetFields()
	if acme["tier"].GetStringValue() != "platinum" || acme["region"].GetStringValue() != "eu" {
		t.Errorf("acme = %v; want tier platinum (overwritten), region eu", acme)
	}
	legacy := x.Metadata["legacy"].GetFields()
	if !legacy["old"].GetBoolValue() || !legacy["kept"].GetBoolValue() {
		t.Errorf("legacy = %v; want old merged with kept", legacy)
	}
	if v := f.stats.OverwriteDenied.Value(); v != 1 {
		t.Errorf("overwrite_denied = %d; want 1", v)
	}
}

// BenchmarkSetMetadata is the filter's cost for one namespace of two keys.
func BenchmarkSetMetadata(b *testing.B) {
	f, err := FromAny(fromYAML(b, "metadata: [{metadata_namespace: acme, value: {tier: gold, region: eu}}]"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		x := filter.Exchange{Request: &route.Request{}}
		f.OnRequest(&x)
	}
}
