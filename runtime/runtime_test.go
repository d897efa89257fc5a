package runtime

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// writeTree creates files under dir: path (with '/') → contents.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// diskRoot makes <tmp>/v1 with files and a symlink <tmp>/current → v1.
func diskRoot(t *testing.T, files map[string]string) (root string) {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, filepath.Join(dir, "v1"), files)
	root = filepath.Join(dir, "current")
	if err := os.Symlink(filepath.Join(dir, "v1"), root); err != nil {
		t.Fatal(err)
	}
	return root
}

func mustNew(t *testing.T, cfg Config) *Runtime {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

func TestLayerPrecedenceAndView(t *testing.T) {
	root := diskRoot(t, map[string]string{"a": "disk", "b": "disk", "dir/c": "disk-c"})
	r := mustNew(t, Config{Layers: []LayerConfig{
		{Name: "base", Static: map[string]any{"a": "static", "s": "only-static", "dir": map[string]any{"c": "static-c"}}},
		{Name: "disk", Disk: &DiskLayer{SymlinkRoot: root}},
		{Name: "admin", Admin: true},
	}})
	if err := r.Modify(map[string]string{"b": "admin", "n": "7"}); err != nil {
		t.Fatal(err)
	}
	s := r.Snapshot()
	for key, want := range map[string]string{"a": "disk", "b": "admin", "s": "only-static", "dir.c": "disk-c", "n": "7"} {
		if got, ok := s.Get(key); !ok || got != want {
			t.Errorf("Get(%q) = %q, %v; want %q, true", key, got, ok, want)
		}
	}
	if got, ok := s.Get("missing"); ok || got != "" {
		t.Errorf("Get(missing) = %q, %v; want \"\", false", got, ok)
	}
	want := View{
		Layers: []string{"base", "disk", "admin"},
		Entries: []ViewEntry{
			{Key: "a", LayerValues: []string{"static", "disk", ""}, FinalValue: "disk"},
			{Key: "b", LayerValues: []string{"", "disk", "admin"}, FinalValue: "admin"},
			{Key: "dir.c", LayerValues: []string{"static-c", "disk-c", ""}, FinalValue: "disk-c"},
			{Key: "n", LayerValues: []string{"", "", "7"}, FinalValue: "7"},
			{Key: "s", LayerValues: []string{"only-static", "", ""}, FinalValue: "only-static"},
		},
	}
	if diff := cmp.Diff(want, s.View()); diff != "" {
		t.Errorf("View (-want +got):\n%s", diff)
	}
}

func TestAdminViewStruct(t *testing.T) {
	r := mustNew(t, Config{Layers: []LayerConfig{
		{Name: "static", Static: map[string]any{"k": "v", "empty": ""}},
		{Name: "admin", Admin: true},
	}})
	if err := r.Modify(map[string]string{"k": "w"}); err != nil {
		t.Fatal(err)
	}
	got, err := protojson.Marshal(r.AdminView())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"entries":{"empty":{"final_value":"","layer_values":["",""]},"k":{"final_value":"w","layer_values":["v","w"]}},"layers":["static","admin"]}`
	var gotS, wantS structpb.Struct
	if err := protojson.Unmarshal(got, &gotS); err != nil {
		t.Fatal(err)
	}
	if err := protojson.Unmarshal([]byte(want), &wantS); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantS.AsMap(), gotS.AsMap()); diff != "" {
		t.Errorf("AdminView (-want +got):\n%s", diff)
	}
}

func TestNoLayers(t *testing.T) {
	r := mustNew(t, Config{})
	v := r.Snapshot().View()
	if len(v.Layers) != 0 || len(v.Entries) != 0 {
		t.Errorf("View() = %+v; want no layers and no entries", v)
	}
	if err := r.Modify(map[string]string{"a": "1"}); !errors.Is(err, ErrNoAdminLayer) {
		t.Errorf("Modify without an admin layer = %v; want ErrNoAdminLayer", err)
	}
	if ErrNoAdminLayer.Error() != "No admin layer specified" {
		t.Errorf("ErrNoAdminLayer = %q; want Envoy's body", ErrNoAdminLayer)
	}
}

func TestDeleteSemantics(t *testing.T) {
	root := diskRoot(t, map[string]string{"disk_key": "from-disk"})
	st := &Stats{}
	r := mustNew(t, Config{Stats: st, Layers: []LayerConfig{
		{Name: "disk", Disk: &DiskLayer{SymlinkRoot: root}},
		{Name: "admin", Admin: true},
	}})
	steps := []struct {
		name       string
		modify     map[string]string
		wantDisk   string
		wantAdmin  string
		hasAdmin   bool
		wantActive uint64
	}{
		{"override disk", map[string]string{"disk_key": "over", "admin_key": "x"}, "over", "x", true, 1},
		{"delete admin key", map[string]string{"admin_key": ""}, "over", "", false, 1},
		{"delete override restores disk", map[string]string{"disk_key": ""}, "from-disk", "", false, 0},
		{"deleting a disk value does nothing", map[string]string{"disk_key": ""}, "from-disk", "", false, 0},
		{"deleting an unknown key is fine", map[string]string{"nothing": ""}, "from-disk", "", false, 0},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			if err := r.Modify(step.modify); err != nil {
				t.Fatal(err)
			}
			s := r.Snapshot()
			if got, _ := s.Get("disk_key"); got != step.wantDisk {
				t.Errorf("disk_key = %q; want %q", got, step.wantDisk)
			}
			if got, ok := s.Get("admin_key"); got != step.wantAdmin || ok != step.hasAdmin {
				t.Errorf("admin_key = %q, %v; want %q, %v", got, ok, step.wantAdmin, step.hasAdmin)
			}
			if got := st.AdminOverridesActive.Value(); got != step.wantActive {
				t.Errorf("admin_overrides_active = %d; want %d", got, step.wantActive)
			}
		})
	}
}

func TestModifyRejectsBadYAMLAndChangesNothing(t *testing.T) {
	r := mustNew(t, Config{Layers: []LayerConfig{{Name: "admin", Admin: true}}})
	if err := r.Modify(map[string]string{"good": "1"}); err != nil {
		t.Fatal(err)
	}
	before := r.Snapshot()
	err := r.Modify(map[string]string{"other": "2", "bad": "a: b: c", "good": ""})
	if err == nil || !strings.Contains(err.Error(), `key "bad"`) {
		t.Fatalf("Modify(bad YAML) = %v; want an error naming key \"bad\"", err)
	}
	if r.Snapshot() != before {
		t.Error("a rejected Modify published a new snapshot")
	}
	if got, _ := r.Snapshot().Get("good"); got != "1" {
		t.Errorf("good = %q after a rejected Modify; want 1", got)
	}
}

func TestTypedLookups(t *testing.T) {
	type want struct {
		u       uint64
		d       float64
		b       bool
		hasFrac bool
	}
	const du, dd = 999, -1.5
	tests := []struct {
		raw  string
		want want
	}{
		{"50", want{50, 50, true, false}},
		{"0", want{0, 0, false, false}},
		{"1.9", want{1, 1.9, false, false}},
		{"-5", want{du, -5, true, false}},
		{"1e3", want{1000, 1000, true, false}},
		{" 7 ", want{7, 7, true, false}},
		{"true", want{du, dd, true, false}},
		{"False", want{du, dd, false, false}},
		{"yes", want{du, dd, true, false}},
		{"abc", want{du, dd, false, false}},
		{"'5'", want{du, dd, false, false}},
		{"0x10", want{du, dd, false, false}},
		{"1_000", want{du, dd, false, false}},
		{"5000000000", want{5000000000, 5e9, false, false}},
		{"numerator: 10\ndenominator: TEN_THOUSAND", want{du, dd, false, true}},
		{"{numerator: 3}", want{du, dd, false, true}},
		{"{numerator: 3, other: 1}", want{du, dd, false, false}},
		{"[1, 2]", want{du, dd, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			r := mustNew(t, Config{Layers: []LayerConfig{{Name: "admin", Admin: true}}})
			if err := r.Modify(map[string]string{"k": tt.raw}); err != nil {
				t.Fatal(err)
			}
			s := r.Snapshot()
			if got, _ := s.Get("k"); got != tt.raw {
				t.Errorf("Get = %q; want the raw %q", got, tt.raw)
			}
			if got := s.Uint64("k", du); got != tt.want.u {
				t.Errorf("Uint64 = %d; want %d", got, tt.want.u)
			}
			if got := s.Double("k", dd); got != tt.want.d {
				t.Errorf("Double = %v; want %v", got, tt.want.d)
			}
			if got := s.Bool("k", false); got != tt.want.b {
				t.Errorf("Bool = %v; want %v", got, tt.want.b)
			}
			if got := s.lookup("k").hasFrac; got != tt.want.hasFrac {
				t.Errorf("fractional percent parsed = %v; want %v", got, tt.want.hasFrac)
			}
		})
	}
}

func TestBoolDefaultWhenNotBoolean(t *testing.T) {
	r := mustNew(t, Config{Layers: []LayerConfig{{Name: "s", Static: map[string]any{"f": 1.5, "s": "on?"}}}})
	s := r.Snapshot()
	if !s.Bool("f", true) || s.Bool("s", false) || !s.Bool("missing", true) {
		t.Errorf("Bool fell back wrongly: f=%v s=%v missing=%v; want true false true", s.Bool("f", true), s.Bool("s", false), s.Bool("missing", true))
	}
}

func TestStaticLayer(t *testing.T) {
	r := mustNew(t, Config{Layers: []LayerConfig{{Name: "s", Static: map[string]any{
		"n":     float64(1e6),
		"small": 0.25,
		"int":   float64(42),
		"t":     true,
		"f":     false,
		"str":   "text",
		"nest":  map[string]any{"deeper": map[string]any{"x": "y"}},
		"frac":  map[string]any{"numerator": float64(5), "denominator": "MILLION"},
		"empty": map[string]any{},
		"a.b":   "dotted",
		"a":     map[string]any{"b": "nested"},
	}}}})
	want := map[string]string{
		"n": "1e+06", "small": "0.25", "int": "42", "t": "true", "f": "false", "str": "text",
		"nest.deeper.x": "y", "empty": "", "a.b": "nested",
		"frac": "fields {\n  key: \"denominator\"\n  value {\n    string_value: \"MILLION\"\n  }\n}\n" +
			"fields {\n  key: \"numerator\"\n  value {\n    number_value: 5\n  }\n}\n",
	}
	got := map[string]string{}
	for _, e := range r.Snapshot().View().Entries {
		got[e.Key] = e.FinalValue
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("static entries (-want +got):\n%s", diff)
	}
	s := r.Snapshot()
	if e := s.lookup("frac"); !e.hasFrac || e.fraction != (Percent{Numerator: 5, Denominator: Million}) {
		t.Errorf("frac = %+v; want 5/MILLION", e.fraction)
	}
	if !s.Bool("t", false) || s.Uint64("int", 0) != 42 {
		t.Errorf("t=%v int=%d; want true 42", s.Bool("t", false), s.Uint64("int", 0))
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name   string
		layers []LayerConfig
		want   string
	}{
		{"duplicate", []LayerConfig{{Name: "x", Admin: true}, {Name: "x", Static: map[string]any{}}}, `layered_runtime.layers[1].name = "x"; duplicate layer name`},
		{"two admin", []LayerConfig{{Name: "a", Admin: true}, {Name: "b", Admin: true}}, "too many admin layers"},
		{"no kind", []LayerConfig{{Name: "a"}}, "layer specifier not set"},
		{"two kinds", []LayerConfig{{Name: "a", Admin: true, RTDS: &RTDSLayer{Name: "r"}}}, "more than one layer specifier"},
		{"no symlink root", []LayerConfig{{Name: "d", Disk: &DiskLayer{}}}, "disk_layer.symlink_root"},
		{"list value", []LayerConfig{{Name: "s", Static: map[string]any{"a": map[string]any{"b": []any{"x"}}}}}, `layers[0] ("s").static_layer: a.b: invalid runtime entry value`},
		{"null value", []LayerConfig{{Name: "s", Static: map[string]any{"a": nil}}}, "a: invalid runtime entry value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Config{Layers: tt.layers})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New() error = %v; want one containing %q", err, tt.want)
			}
		})
	}
}

func TestConfigFromProto(t *testing.T) {
	static, err := structpb.NewStruct(map[string]any{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	lr := &bootstrapv3.LayeredRuntime{Layers: []*bootstrapv3.RuntimeLayer{
		{Name: "s", LayerSpecifier: &bootstrapv3.RuntimeLayer_StaticLayer{StaticLayer: static}},
		{Name: "d", LayerSpecifier: &bootstrapv3.RuntimeLayer_DiskLayer_{DiskLayer: &bootstrapv3.RuntimeLayer_DiskLayer{
			SymlinkRoot: "/srv/runtime/current", Subdirectory: "envoy", AppendServiceCluster: true}}},
		{Name: "a", LayerSpecifier: &bootstrapv3.RuntimeLayer_AdminLayer_{AdminLayer: &bootstrapv3.RuntimeLayer_AdminLayer{}}},
		{Name: "r", LayerSpecifier: &bootstrapv3.RuntimeLayer_RtdsLayer_{RtdsLayer: &bootstrapv3.RuntimeLayer_RtdsLayer{Name: "rtds0"}}},
	}}
	tests := []struct {
		name string
		in   *bootstrapv3.LayeredRuntime
		want []LayerConfig
	}{
		{"absent", nil, nil},
		{"no layers", &bootstrapv3.LayeredRuntime{}, []LayerConfig{{Admin: true}}},
		{"all kinds", lr, []LayerConfig{
			{Name: "s", Static: map[string]any{"k": "v"}},
			{Name: "d", Disk: &DiskLayer{SymlinkRoot: "/srv/runtime/current", Subdirectory: "envoy", AppendServiceCluster: true}},
			{Name: "a", Admin: true},
			{Name: "r", RTDS: &RTDSLayer{Name: "rtds0"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ConfigFromProto(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.Layers); diff != "" {
				t.Errorf("layers (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := ConfigFromProto(&bootstrapv3.LayeredRuntime{Layers: []*bootstrapv3.RuntimeLayer{{Name: "x"}}}); err == nil {
		t.Error("ConfigFromProto(layer without specifier) = nil error; want one")
	}
}

func TestFeatureEnabled(t *testing.T) {
	var next uint64
	r := mustNew(t, Config{
		Random: func() uint64 { return next },
		Layers: []LayerConfig{{Name: "s", Static: map[string]any{
			"p30": float64(30), "p0": float64(0), "p100": float64(100), "p250": float64(250), "bad": "x",
			"frac": map[string]any{"numerator": float64(25), "denominator": "TEN_THOUSAND"},
		}}},
	})
	s := r.Snapshot()
	tests := []struct {
		name   string
		key    string
		def    uint64
		random uint64
		want   bool
	}{
		{"below cutoff", "p30", 0, 129, true},
		{"at cutoff", "p30", 0, 130, false},
		{"zero never", "p0", 100, 0, false},
		{"hundred always", "p100", 0, 99, true},
		{"over hundred always", "p250", 0, 99, true},
		{"default used for missing key", "missing", 10, 9, true},
		{"default used for bad value", "bad", 10, 10, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next = tt.random
			if got := s.FeatureEnabled(tt.key, tt.def); got != tt.want {
				t.Errorf("FeatureEnabled(%q, %d) with random %d = %v; want %v", tt.key, tt.def, tt.random, got, tt.want)
			}
		})
	}
	fracTests := []struct {
		name   string
		key    string
		def    Percent
		random uint64
		want   bool
	}{
		{"struct value", "frac", Percent{}, 10024, true},
		{"struct value off", "frac", Percent{}, 10025, false},
		{"integer as percent", "p30", Percent{}, 229, true},
		{"integer over hundred", "p250", Percent{}, 99, true},
		{"default", "missing", Percent{Numerator: 1, Denominator: Million}, 2_000_000, true},
		{"default off", "missing", Percent{Numerator: 1, Denominator: Million}, 1, false},
	}
	for _, tt := range fracTests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.FractionalPercentWith(tt.key, tt.def, tt.random); got != tt.want {
				t.Errorf("FractionalPercentWith(%q, %+v, %d) = %v; want %v", tt.key, tt.def, tt.random, got, tt.want)
			}
		})
	}
	next = 5
	if !s.FractionalPercent("p30", Percent{}) {
		t.Error("FractionalPercent(p30) with random 5 = false; want true")
	}
	if !s.FeatureEnabledWith("p30", 0, 1029, 1000) || s.FeatureEnabledWith("p30", 0, 1, 0) {
		t.Error("FeatureEnabledWith: want 1029%1000 < 30 true and zero buckets false")
	}
}

func TestHelpers(t *testing.T) {
	r := mustNew(t, Config{Random: func() uint64 { return 50 }, Layers: []LayerConfig{{Name: "s", Static: map[string]any{
		"upstream": map[string]any{
			"healthy_panic_threshold": float64(150),
			"zone_routing":            map[string]any{"enabled": float64(40), "min_cluster_size": float64(3)},
		},
	}}}})
	s := r.Snapshot()
	if got := s.HealthyPanicThreshold(50); got != 100 {
		t.Errorf("HealthyPanicThreshold = %d; want 100 (capped)", got)
	}
	if s.ZoneRoutingEnabled(100) {
		t.Error("ZoneRoutingEnabled with random 50 and 40% = true; want false")
	}
	if got := s.ZoneRoutingMinClusterSize(6); got != 3 {
		t.Errorf("ZoneRoutingMinClusterSize = %d; want 3", got)
	}
	empty := mustNew(t, Config{}).Snapshot()
	if got := empty.HealthyPanicThreshold(50); got != 50 {
		t.Errorf("HealthyPanicThreshold default = %d; want 50", got)
	}
}

func TestRTDSLayer(t *testing.T) {
	r := mustNew(t, Config{Layers: []LayerConfig{
		{Name: "base", Static: map[string]any{"k": "static"}},
		{Name: "rtds", RTDS: &RTDSLayer{Name: "some_resource"}},
	}})
	if err := r.SetRTDSLayer("some_resource", map[string]any{"k": "dynamic", "x": map[string]any{"y": float64(2)}}); err != nil {
		t.Fatal(err)
	}
	s := r.Snapshot()
	if got, _ := s.Get("k"); got != "dynamic" {
		t.Errorf("k = %q; want dynamic", got)
	}
	if got := s.Uint64("x.y", 0); got != 2 {
		t.Errorf("x.y = %d; want 2", got)
	}
	if err := r.SetRTDSLayer("some_resource", nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Snapshot().Get("k"); got != "static" {
		t.Errorf("k after removal = %q; want static", got)
	}
	if err := r.SetRTDSLayer("other", nil); err == nil {
		t.Error("SetRTDSLayer(unknown) = nil; want an error")
	}
	if err := r.SetRTDSLayer("some_resource", map[string]any{"l": []any{}}); err == nil {
		t.Error("SetRTDSLayer(list value) = nil; want an error")
	}
}

func TestDeprecatedFeature(t *testing.T) {
	st := &Stats{}
	r := mustNew(t, Config{Stats: st, Layers: []LayerConfig{{Name: "s", Static: map[string]any{
		"envoy": map[string]any{"features": map[string]any{"enable_all_deprecated_features": true}},
		"off":   false,
	}}}})
	s := r.Snapshot()
	if !s.DeprecatedFeatureEnabled("some.feature", false) {
		t.Error("enable_all_deprecated_features did not enable a feature")
	}
	if s.DeprecatedFeatureEnabled("off", true) {
		t.Error("an explicit false did not disable the feature")
	}
	if st.DeprecatedFeatureUse.Value() != 1 || st.DeprecatedFeatureSeen.Value() != 1 {
		t.Errorf("deprecated_feature_use = %d, seen = %d; want 1, 1", st.DeprecatedFeatureUse.Value(), st.DeprecatedFeatureSeen.Value())
	}
}
