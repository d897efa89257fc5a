package accesslog

import (
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
)

// TestDynamicMetadata: a string prints as it is, a number or struct as compact JSON, a
// missing namespace or key as "-" (null in typed JSON, where values keep their types), and
// a length limit truncates.
func TestDynamicMetadata(t *testing.T) {
	e := &Entry{DynamicMetadata: map[string]*structpb.Struct{
		"acme": mustStruct(t, map[string]any{"tier": "gold", "n": 3.0, "nested": map[string]any{"b": 1.5, "a": "x"}}),
	}}
	for format, want := range map[string]string{
		"%DYNAMIC_METADATA(acme:tier)%":        "gold",
		"%DYNAMIC_METADATA(acme:tier):2%":      "go",
		"%DYNAMIC_METADATA(acme:n)%":           "3",
		"%DYNAMIC_METADATA(acme:nested)%":      `{"a":"x","b":1.5}`,
		"%DYNAMIC_METADATA(acme:nested:b)%":    "1.5",
		"%DYNAMIC_METADATA(acme:nested:z)%":    "-",
		"%DYNAMIC_METADATA(acme:tier:deeper)%": "-",
		"%DYNAMIC_METADATA(other:tier)%":       "-",
		"%DYNAMIC_METADATA(acme)%":             `{"n":3,"nested":{"a":"x","b":1.5},"tier":"gold"}`,
	} {
		f, err := ParseText(format, Options{})
		if err != nil {
			t.Fatalf("ParseText(%q): %v", format, err)
		}
		if got := string(f.Format(nil, e)); got != want {
			t.Errorf("%s = %q; want %q", format, got, want)
		}
	}
	f, err := ParseJSON(mustStruct(t, map[string]any{
		"tier": "%DYNAMIC_METADATA(acme:tier)%", "n": "%DYNAMIC_METADATA(acme:n)%",
		"nested": "%DYNAMIC_METADATA(acme:nested)%", "none": "%DYNAMIC_METADATA(acme:none)%",
		"text": "n=%DYNAMIC_METADATA(acme:n)%",
	}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"n":3,"nested":{"a":"x","b":1.5},"none":null,"text":"n=3","tier":"gold"}` + "\n"
	if got := string(f.Format(nil, e)); got != want {
		t.Errorf("typed JSON = %s; want %s", got, want)
	}
}
