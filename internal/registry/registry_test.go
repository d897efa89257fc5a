package registry_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/internal/registry"
)

type greeter func() string

var (
	greeters = registry.Kind[greeter]{Category: registry.HTTPFilter}
	counters = registry.Kind[func() int]{Category: registry.HTTPFilter, Facet: "count"}
)

func mustBuild(t *testing.T, b *registry.Builder) *registry.Registry {
	t.Helper()
	r, err := b.Build()
	if err != nil {
		t.Fatalf("Build() = %v; want no error", err)
	}
	return r
}

func TestLookupByTypeThenName(t *testing.T) {
	b := registry.NewBuilder()
	registry.Add(b, greeters, "hello", &emptypb.Empty{}, func() string { return "hello" })
	registry.Add(b, greeters, "bye", &durationpb.Duration{}, func() string { return "bye" })
	r := mustBuild(t, b)
	tests := []struct {
		name, lookupName, url, want string
	}{
		{"type wins over name", "bye", "type.googleapis.com/google.protobuf.Empty", "hello"},
		{"name when no type", "bye", "", "bye"},
		{"name when type unknown", "hello", "type.googleapis.com/google.protobuf.Struct", "hello"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, e, ok := registry.Lookup(r, greeters, tt.lookupName, tt.url)
			if !ok {
				t.Fatalf("Lookup(%q, %q) found nothing", tt.lookupName, tt.url)
			}
			if got := f(); got != tt.want || e.Name != tt.want {
				t.Errorf("Lookup(%q, %q) = %q (entry %q); want %q", tt.lookupName, tt.url, got, e.Name, tt.want)
			}
		})
	}
	if _, _, ok := registry.Lookup(r, greeters, "nobody", ""); ok {
		t.Error("Lookup of an unregistered name found a factory")
	}
	if _, _, ok := registry.Lookup(r, counters, "hello", ""); ok {
		t.Error("Lookup with a kind that registered nothing found a factory")
	}
}

func TestFacetsShareOneEntry(t *testing.T) {
	b := registry.NewBuilder()
	registry.Add(b, greeters, "hello", &emptypb.Empty{}, func() string { return "hello" })
	registry.Add(b, counters, "hello", &emptypb.Empty{}, func() int { return 1 })
	b.Declare(registry.HTTPFilter, "hello", &emptypb.Empty{})
	b.Declare(registry.StatsSink, "sink", &structpb.Struct{})
	r := mustBuild(t, b)
	want := []registry.Entry{
		{Name: "hello", Category: registry.HTTPFilter, Config: &emptypb.Empty{}},
		{Name: "sink", Category: registry.StatsSink, Config: &structpb.Struct{}},
	}
	got := r.Entries()
	if len(got) != len(want) {
		t.Fatalf("Entries() = %d entries; want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Category != want[i].Category || got[i].TypeURL() != want[i].TypeURL() {
			t.Errorf("Entries()[%d] = %s %s %s; want %s %s %s", i, got[i].Category, got[i].Name, got[i].TypeURL(), want[i].Category, want[i].Name, want[i].TypeURL())
		}
	}
	if f, _, ok := registry.Lookup(r, counters, "", "type.googleapis.com/google.protobuf.Empty"); !ok || f() != 1 {
		t.Error("the count facet of hello was not found by type")
	}
	if !r.Has(registry.StatsSink, "type.googleapis.com/google.protobuf.Struct") || r.Has(registry.HTTPFilter, "type.googleapis.com/google.protobuf.Struct") {
		t.Error("Has does not keep categories apart")
	}
	if e, ok := r.Find("type.googleapis.com/google.protobuf.Struct"); !ok || e.Name != "sink" {
		t.Errorf("Find(Struct) = %v, %v; want sink", e.Name, ok)
	}
	var names []string
	for e, f := range registry.All(r, greeters) {
		names = append(names, e.Name+"="+f())
	}
	if diff := cmp.Diff([]string{"hello=hello"}, names); diff != "" {
		t.Errorf("All(greeters) mismatch (-want +got):\n%s", diff)
	}
}

func TestBuildRefusesConflicts(t *testing.T) {
	hello := func() string { return "" }
	tests := []struct {
		name     string
		register func(b *registry.Builder)
		want     string
	}{
		{"same name twice", func(b *registry.Builder) {
			registry.Add(b, greeters, "a", &emptypb.Empty{}, hello)
			registry.Add(b, greeters, "a", &emptypb.Empty{}, hello)
		}, `envoy.filters.http "a" is registered twice`},
		{"one name, two messages", func(b *registry.Builder) {
			registry.Add(b, greeters, "a", &emptypb.Empty{}, hello)
			b.Declare(registry.HTTPFilter, "a", &structpb.Struct{})
		}, `envoy.filters.http "a" is registered with google.protobuf.Empty and with google.protobuf.Struct`},
		{"one message, two names", func(b *registry.Builder) {
			registry.Add(b, greeters, "a", &emptypb.Empty{}, hello)
			registry.Add(b, greeters, "b", &emptypb.Empty{}, hello)
		}, `envoy.filters.http "a" and "b" both take google.protobuf.Empty`},
		{"no name", func(b *registry.Builder) { registry.Add(b, greeters, "", &emptypb.Empty{}, hello) }, "has no name"},
		{"no config", func(b *registry.Builder) { registry.Add(b, greeters, "a", nil, hello) }, `"a" has no config message`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := registry.NewBuilder()
			tt.register(b)
			r, err := b.Build()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Build() = %v, %v; want an error containing %q", r, err, tt.want)
			}
		})
	}
}

func TestNilRegistryIsEmpty(t *testing.T) {
	var r *registry.Registry
	if _, _, ok := registry.Lookup(r, greeters, "a", ""); ok || len(r.Entries()) != 0 || r.Has(registry.HTTPFilter, "") {
		t.Error("a nil Registry has extensions")
	}
	if _, ok := r.Find("type.googleapis.com/google.protobuf.Empty"); ok {
		t.Error("Find on a nil Registry found an extension")
	}
}

func TestAliasFindsTheNamedExtension(t *testing.T) {
	b := registry.NewBuilder()
	registry.Add(b, greeters, "hello", &emptypb.Empty{}, func() string { return "hello" })
	b.Alias(registry.HTTPFilter, "hi", "hello")
	r := mustBuild(t, b)
	f, e, ok := registry.Lookup(r, greeters, "hi", "")
	if !ok || f() != "hello" || e.Name != "hello" {
		t.Fatalf("Lookup(alias %q) = %v, %q; want the extension %q", "hi", ok, e.Name, "hello")
	}
	if got := len(r.Entries()); got != 1 {
		t.Errorf("Entries() has %d entries; want 1 (an alias is not an extension)", got)
	}
}

func TestAliasErrors(t *testing.T) {
	b := registry.NewBuilder()
	registry.Add(b, greeters, "hello", &emptypb.Empty{}, func() string { return "hello" })
	registry.Add(b, greeters, "bye", &durationpb.Duration{}, func() string { return "bye" })
	b.Alias(registry.HTTPFilter, "hi", "nobody")
	b.Alias(registry.HTTPFilter, "bye", "hello")
	_, err := b.Build()
	for _, want := range []string{`alias "hi" names "nobody", which is not registered`, `alias "bye" is also an extension's name`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Build() = %v; want an error containing %q", err, want)
		}
	}
}

func TestDecode(t *testing.T) {
	e := registry.Entry{Name: "d", Config: &durationpb.Duration{}}
	m, err := e.Decode("x", nil)
	if err != nil || !proto.Equal(m, &durationpb.Duration{}) {
		t.Errorf("Decode(nil) = %v, %v; want an empty Duration", m, err)
	}
	tc, err := anypb.New(durationpb.New(3e9))
	if err != nil {
		t.Fatal(err)
	}
	if m, err = e.Decode("x", tc); err != nil || m.(*durationpb.Duration).GetSeconds() != 3 {
		t.Errorf("Decode(3s) = %v, %v; want 3s", m, err)
	}
	wrong, _ := anypb.New(&emptypb.Empty{})
	if _, err := e.Decode("stats_sinks[0].typed_config", wrong); err == nil || !strings.HasPrefix(err.Error(), "stats_sinks[0].typed_config: ") {
		t.Errorf("Decode(Empty into Duration) = %v; want an error naming the path", err)
	}
}
