package runtime

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/xds/watch"
)

func FuzzStringEntry(f *testing.F) {
	for _, s := range []string{"50", "-1", "1.5", "true", "abc", "numerator: 1\ndenominator: MILLION", "{a: [1, {b: 2}]}", "1e400", "nan", "0x10", "'5'", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		e, err := stringEntry(raw)
		if err != nil {
			return
		}
		if e.raw != raw {
			t.Fatalf("raw = %q; want %q kept as given", e.raw, raw)
		}
		if e.hasUint && (!e.hasDouble || e.doubleV < 0) {
			t.Fatalf("%q: uint %d without a non-negative double (%v, %v)", raw, e.uintV, e.hasDouble, e.doubleV)
		}
		if e.hasFrac && e.fraction.Denominator > Million {
			t.Fatalf("%q: denominator %d out of range", raw, e.fraction.Denominator)
		}
	})
}

func FuzzDiskValue(f *testing.F) {
	for _, s := range []string{"42\n", "# c\n10\n", "a\n\nb \n", "x \ny\nx \n", "#only", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		v := diskValue(text)
		for _, line := range strings.Split(v, "\n") {
			if strings.HasPrefix(line, "#") {
				t.Fatalf("diskValue(%q) = %q keeps a comment line", text, v)
			}
		}
		if len(v) > len(text) {
			t.Fatalf("diskValue(%q) = %q grew", text, v)
		}
	})
}

func BenchmarkSnapshotLookups(b *testing.B) {
	r, err := New(Config{Random: func() uint64 { return 7 }, Layers: []LayerConfig{{Name: "s", Static: map[string]any{
		"upstream": map[string]any{"healthy_panic_threshold": float64(40), "zone_routing": map[string]any{"enabled": float64(50)}},
	}}}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		s := r.Snapshot()
		_ = s.HealthyPanicThreshold(50)
		_ = s.ZoneRoutingEnabled(100)
		_ = s.Uint64("missing.key", 3)
	}
}

// FuzzDecodeRTDS decodes bytes as an RTDS resource: a success always carries the resource's
// non-empty name and a layer.
func FuzzDecodeRTDS(f *testing.F) {
	f.Add([]byte{0x0a, 0x01, 'r'})
	f.Fuzz(func(t *testing.T, data []byte) {
		if name, layer, err := DecodeRTDS(&anypb.Any{TypeUrl: watch.RuntimeType, Value: data}); err == nil && (name == "" || layer == nil) {
			t.Errorf("DecodeRTDS succeeded with %q, %v", name, layer)
		}
	})
}
