package bootstrap

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad feeds arbitrary bytes, in each format, to the parser behind Load. It must never
// panic; a failure must be Errors naming the source; a success must hold a bootstrap that
// passes protoc-gen-validate.
func FuzzLoad(f *testing.F) {
	// Small seeds keep the fuzzer's minimization of new inputs fast; the full testdata
	// files are covered by the table tests.
	for _, name := range []string{"base.yaml", "v2.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint8(FormatOf(name)), false)
	}
	f.Add([]byte(`admin: {address: {socket_address: {address: 127.0.0.1, port_value: 9901}}}`), uint8(FormatYAML), false)
	f.Add([]byte(`{"stats_flush_interval": "5s", "node": {"id": "n"}}`), uint8(FormatAuto), false)
	f.Add([]byte(`{"static_resources": {"clusters": [{"name": "a", "hosts": [{}], "lb_policy": 4}]}}`), uint8(FormatJSON), true)
	f.Add([]byte("a: &x [*x]"), uint8(FormatYAML), false)
	f.Add([]byte(`{"admin": {"profile_path": "a"}, "admin": {"profile_path": "b", "x": 1, "x": [2]}, "node": {"metadata": {"k": 1, "k": 2}}}`), uint8(FormatJSON), true)
	f.Add([]byte("tracing: {}\nheader_prefix: x\nstatic_resources: {clusters: [{name: a, track_cluster_stats: {}, filters: [{name: f}]}]}"), uint8(FormatYAML), false)
	f.Add([]byte("overload_manager: {refresh_interval: 1s, resource_monitors: [{name: m}]}\nwatchdogs: {}"), uint8(FormatYAML), false)
	f.Fuzz(func(t *testing.T, data []byte, format uint8, allowUnknown bool) {
		opts := Options{Name: "fuzz.yaml", AllowUnknownFields: allowUnknown}
		l, err := Parse(data, Format(format%3), opts)
		if err != nil {
			var errs Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("Parse error %v (%T); want non-empty Errors", err, err)
			}
			for _, e := range errs {
				if e.File != "fuzz.yaml" {
					t.Fatalf("FieldError.File = %q; want fuzz.yaml", e.File)
				}
			}
			return
		}
		if l.Bootstrap == nil {
			t.Fatal("Parse succeeded with a nil Bootstrap")
		}
		if err := l.Bootstrap.ValidateAll(); err != nil {
			t.Fatalf("Parse succeeded but ValidateAll() = %v", err)
		}
		var ignored int
		for _, n := range Audit("", l.Bootstrap) {
			if n.Support == Refused {
				t.Fatalf("Parse succeeded with refused field %s", n.Path)
			}
			ignored++
		}
		// A strict parse warns only about the fields Audit finds ignored and deprecated fields.
		if want := ignored + len(deprecations("", l.Bootstrap)); !allowUnknown && len(l.Warnings) != want {
			t.Fatalf("strict Parse succeeded with warnings %q; want %d about ignored and deprecated fields", l.Warnings, want)
		}
	})
}
