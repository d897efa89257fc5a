package accesslog

import (
	"strings"
	"testing"

	"github.com/legateproxy/legate/internal/filterstate"
)

func filterStateEntry(t testing.TB) *Entry {
	conn := &filterstate.State{}
	for name, obj := range map[string]filterstate.Object{
		"acme.tier": filterstate.String("gold"),
		"acme.headers": filterstate.HeaderMap{
			{Key: ":status", Value: "200"}, {Key: "x-tunnel", Value: "t1"}},
	} {
		if err := conn.Set(name, obj, filterstate.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	stream := filterstate.NewChild(conn)
	if err := stream.Set("acme.stream", filterstate.String("s"), filterstate.Options{}); err != nil {
		t.Fatal(err)
	}
	return &Entry{FilterState: stream}
}

// TestFilterStateText: TYPED (the default) prints the typed value as JSON (a string object
// quoted, as Envoy's StringValue), PLAIN the string, FIELD a field; a missing object or
// serialization prints "-"; the length cuts each; a stream reads its connection's objects.
func TestFilterStateText(t *testing.T) {
	e := filterStateEntry(t)
	for format, want := range map[string]string{
		"%FILTER_STATE(acme.tier)%":                     `"gold"`,
		"%FILTER_STATE(acme.tier:TYPED)%":               `"gold"`,
		"%FILTER_STATE(acme.tier:PLAIN)%":               "gold",
		"%FILTER_STATE(acme.tier:PLAIN):2%":             "go",
		"%FILTER_STATE(acme.tier):3%":                   `"go`,
		"%FILTER_STATE(acme.stream:PLAIN)%":             "s",
		"%FILTER_STATE(acme.none)%":                     "-",
		"%FILTER_STATE(acme.headers)%":                  `{"headers":[{"key":":status","value":"200"},{"key":"x-tunnel","value":"t1"}]}`,
		"%FILTER_STATE(acme.headers:PLAIN)%":            "-",
		"%FILTER_STATE(acme.headers:FIELD:x-tunnel)%":   "t1",
		"%FILTER_STATE(acme.headers:FIELD:x-tunnel):1%": "t",
		"%FILTER_STATE(acme.headers:FIELD:x-other)%":    "-",
		"%FILTER_STATE(acme.tier:FIELD:x)%":             "-",
	} {
		f, err := ParseText(format, Options{})
		if err != nil {
			t.Fatalf("ParseText(%q): %v", format, err)
		}
		if got := string(f.Format(nil, e)); got != want {
			t.Errorf("%s = %q; want %q", format, got, want)
		}
	}
	f, err := ParseText("%FILTER_STATE(acme.tier)%", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(f.Format(nil, &Entry{})); got != "-" {
		t.Errorf("without filter state = %q; want -", got)
	}
}

// TestFilterStateJSON: in a typed JSON format a lone operator keeps the typed value's JSON
// type, PLAIN and FIELD are strings, a missing one is null; in a longer string it is text.
func TestFilterStateJSON(t *testing.T) {
	f, err := ParseJSON(mustStruct(t, map[string]any{
		"typed": "%FILTER_STATE(acme.tier)%", "plain": "%FILTER_STATE(acme.tier:PLAIN)%",
		"headers": "%FILTER_STATE(acme.headers:TYPED)%", "field": "%FILTER_STATE(acme.headers:FIELD::status)%",
		"none": "%FILTER_STATE(acme.none)%", "text": "t=%FILTER_STATE(acme.tier:PLAIN)%",
	}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"field":"200","headers":{"headers":[{"key":":status","value":"200"},{"key":"x-tunnel","value":"t1"}]},"none":null,"plain":"gold","text":"t=gold","typed":"gold"}` + "\n"
	if got := string(f.Format(nil, filterStateEntry(t))); got != want {
		t.Errorf("typed JSON = %s; want %s", got, want)
	}
	f, err = ParseJSON(mustStruct(t, map[string]any{"typed": "%FILTER_STATE(acme.tier)%", "none": "%FILTER_STATE(x)%"}), Options{JSONStrings: true})
	if err != nil {
		t.Fatal(err)
	}
	want = `{"none":"-","typed":"\"gold\""}` + "\n"
	if got := string(f.Format(nil, filterStateEntry(t))); got != want {
		t.Errorf("json_format strings = %s; want %s", got, want)
	}
}

// TestFilterStateParseErrors: a missing key, an unknown serialization and FIELD without a
// name (or a name without FIELD) are refused, as Envoy refuses them.
func TestFilterStateParseErrors(t *testing.T) {
	for format, want := range map[string]string{
		"%FILTER_STATE%":            "needs a key",
		"%FILTER_STATE()%":          "needs a key",
		"%FILTER_STATE(:PLAIN)%":    "needs a key",
		"%FILTER_STATE(k:JSON)%":    "must be PLAIN, TYPED or FIELD",
		"%FILTER_STATE(k:FIELD)%":   "FIELD goes with a field name",
		"%FILTER_STATE(k:PLAIN:x)%": "FIELD goes with a field name",
	} {
		_, err := ParseText(format, Options{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseText(%q) error = %v; want it to contain %q", format, err, want)
		}
	}
}
