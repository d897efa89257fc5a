package e2e

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateControlPlaneBootstraps runs `legate --mode validate` on bootstraps written here in
// the shapes Istio, Consul, Kuma and go-control-plane's samples generate (testdata/controlplanes):
// a single grpc_services object and domains string (Consul, go-control-plane), camelCase keys
// and google_re2 (Kuma), lookahead stats_tags regexes, TypedStructs, the TLS inspector and
// filters found by their type URL whatever their name (Istio). Envoy loads each; so must Legate.
func TestValidateControlPlaneBootstraps(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "controlplanes", "*"))
	if err != nil || len(paths) < 4 {
		t.Fatalf("testdata/controlplanes: %v files, err %v; want at least 4", len(paths), err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			abs, err := filepath.Abs(path)
			if err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := runOnce(t, "--mode", "validate", "-c", abs)
			if want := "configuration '" + abs + "' OK\n"; code != 0 || stdout != want {
				t.Errorf("validate = %d, stdout %q; want 0, %q; stderr:\n%s", code, stdout, want, strings.Join(lines(stderr), "\n"))
			}
		})
	}
}
