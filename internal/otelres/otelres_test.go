package otelres

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	detectorsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/tracers/opentelemetry/resource_detectors/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"
)

// TestBuild checks the merge order (initial attributes, then each detector, a later one
// winning), the environment variable's percent-decoding, the sort by key, and the refusal of
// a detector Legate lacks.
func TestBuild(t *testing.T) {
	env, err := anypb.New(&detectorsv3.EnvironmentResourceDetectorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	static, err := anypb.New(&detectorsv3.StaticConfigResourceDetectorConfig{Attributes: map[string]string{"b": "static", "c": "3"}})
	if err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		if k == "OTEL_RESOURCE_ATTRIBUTES" {
			return "a=env%20a,b=env"
		}
		return ""
	}
	r, err := Build("x", map[string]string{"a": "initial", "z": "last"}, []*corev3.TypedExtensionConfig{
		{Name: EnvironmentName, TypedConfig: env}, {Name: StaticName, TypedConfig: static},
	}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range r.GetAttributes() {
		got = append(got, kv.GetKey()+"="+kv.GetValue().GetStringValue())
	}
	if want := "a=env a b=static c=3 z=last"; strings.Join(got, " ") != want {
		t.Errorf("attributes %q; want %q", strings.Join(got, " "), want)
	}
	other, err := anypb.New(&emptypb.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Build("x", nil, []*corev3.TypedExtensionConfig{{Name: "d", TypedConfig: other}}, getenv); err == nil || !strings.Contains(err.Error(), "x.resource_detectors[0]") || !strings.Contains(err.Error(), "not implemented by Legate") {
		t.Errorf("unknown detector: err = %v; want its path and not implemented by Legate", err)
	}
}

// FuzzParseResourceAttributes checks that no OTEL_RESOURCE_ATTRIBUTES value panics and that
// an accepted one yields non-empty keys.
func FuzzParseResourceAttributes(f *testing.F) {
	for _, s := range []string{"", "a=b", "a=b,c=d%20e", "=x", "a", "a=%zz", " k = v , j=w"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		attrs, err := parseResourceAttributes("x", v)
		if err != nil {
			return
		}
		for k := range attrs {
			if k == "" {
				t.Fatalf("%q gave an empty key", v)
			}
		}
	})
}
