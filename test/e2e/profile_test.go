package e2e

import (
	"context"
	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pprofTop runs `go tool pprof -top` on a profile file and fails unless it
// reads it.
func pprofTop(t *testing.T, path string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", path).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -top %s: %v\n%s", path, err, out)
	}
	return string(out)
}

func TestProfilers(t *testing.T) {
	dir := t.TempDir()
	profile := filepath.Join(dir, "legate.prof")
	cfg := strings.Replace(minimalConfig, "admin:\n", "admin:\n  profile_path: "+profile+"\n", 1)
	p := start(t, "-c", writeConfig(t, cfg), "--enable-mutex-tracing")

	t.Run("cpu profile", func(t *testing.T) {
		if code, _, body := p.post("/cpuprofiler?enable=y"); code != 200 || body != "OK\n" {
			t.Fatalf("enable = %d %q", code, body)
		}
		for i := 0; i < 50; i++ {
			p.get("/stats") // give the profiler something to see
		}
		if code, _, body := p.post("/cpuprofiler?enable=n"); code != 200 || body != "OK\n" {
			t.Fatalf("disable = %d %q", code, body)
		}
		if out := pprofTop(t, profile); !strings.Contains(out, "Type: cpu") {
			t.Errorf("pprof did not see a CPU profile:\n%s", out)
		}
	})
	t.Run("bad enable value", func(t *testing.T) {
		for _, q := range []string{"", "?enable=x", "?enable=y&other=1"} {
			if code, _, body := p.post("/cpuprofiler" + q); code != 400 || body != "?enable=<y|n>\n" {
				t.Errorf("POST /cpuprofiler%s = %d %q; want 400", q, code, body)
			}
		}
	})
	t.Run("heap profiler", func(t *testing.T) {
		if code, _, body := p.post("/heapprofiler?enable=n"); code != 400 || body != "Fail to stop heap profiler: not started" {
			t.Errorf("stop before start = %d %q", code, body)
		}
		if code, _, body := p.post("/heapprofiler?enable=y"); code != 200 || body != "Starting heap profiler" {
			t.Fatalf("start = %d %q", code, body)
		}
		code, _, body := p.post("/heapprofiler?enable=n")
		if code != 200 || !strings.HasPrefix(body, "Heap profiler stopped and data written to "+profile) {
			t.Fatalf("stop = %d %q", code, body)
		}
		if out := pprofTop(t, profile); !strings.Contains(out, "inuse_space") {
			t.Errorf("pprof did not see a heap profile:\n%s", out)
		}
	})
	t.Run("allocation profiler", func(t *testing.T) {
		if code, _, body := p.post("/allocprofiler?enable=n"); code != 400 || body != "Allocation profiler is not started" {
			t.Errorf("stop before start = %d %q", code, body)
		}
		if code, _, body := p.post("/allocprofiler?enable=y"); code != 200 || body != "OK\n" {
			t.Fatalf("start = %d %q", code, body)
		}
		if code, _, body := p.post("/allocprofiler?enable=y"); code != 400 || body != "Allocation profiler has already started" {
			t.Errorf("second start = %d %q", code, body)
		}
		code, _, body := p.post("/allocprofiler?enable=n")
		if code != 200 {
			t.Fatalf("stop = %d", code)
		}
		path := filepath.Join(dir, "allocs.pb.gz")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if out := pprofTop(t, path); !strings.Contains(out, "alloc_space") {
			t.Errorf("pprof did not read the allocation profile:\n%s", out)
		}
	})
	t.Run("heap dump", func(t *testing.T) {
		code, _, body := p.get("/heap_dump")
		if code != 200 {
			t.Fatalf("GET /heap_dump = %d", code)
		}
		path := filepath.Join(dir, "dump.pb.gz")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if out := pprofTop(t, path); !strings.Contains(out, "inuse_space") {
			t.Errorf("pprof did not read the heap dump:\n%s", out)
		}
	})
	t.Run("contention", func(t *testing.T) {
		_, h, body := p.get("/contention")
		if h.Get("Content-Type") != "application/json" || !strings.Contains(body, "\"num_contentions\": ") {
			t.Errorf("GET /contention with tracing = %q", body)
		}
		var ms adminv3.MutexStats
		strict(t, body, &ms)
	})
}

func TestContentionWithoutTracing(t *testing.T) {
	p := start(t, "-c", writeConfig(t, minimalConfig))
	_, _, body := p.get("/contention")
	if want := "Mutex contention tracing is not enabled. To enable, run Envoy with flag --enable-mutex-tracing."; body != want {
		t.Errorf("GET /contention = %q, want %q", body, want)
	}
}
