package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gcpModule is go-control-plane's module: its end-to-end suite (pkg/test/main, the management
// server and request driver Envoy's integration runs use) and the echo upstream
// (internal/upstream) are built from the module cache at the version go.mod requires.
const gcpModule = "github.com/envoyproxy/go-control-plane"

// TestGoControlPlaneSuite runs go-control-plane's own end-to-end suite against the binary, as
// its scripts/integration.sh runs it against Envoy: the echo upstream, Legate on the suite's
// sample bootstrap for the mode (--drain-time-s 1), and the suite's driver, which serves the
// snapshots (clusters, endpoints, listeners, routes, scoped routes, runtimes, secrets with
// -tls) and sends request batches through every listener until each snapshot is served. It
// passes when every update converges. Every mode runs plain and with -tls.
//
// The suite's ports are fixed (management 18000, gateway 18001, access-log service 18090,
// upstream 18080, admin 19000, listeners from 9000), so the modes run one after another.
func TestGoControlPlaneSuite(t *testing.T) {
	if os.Getenv("LEGATE_E2E_TOOLS") != "1" {
		t.Skip("builds go-control-plane's suite; make e2e runs it (LEGATE_E2E_TOOLS=1)")
	}
	dir := gcpModuleDir(t)
	bin := t.TempDir()
	driver, upstream := filepath.Join(bin, "test"), filepath.Join(bin, "upstream")
	// Legate without the race detector: the driver gives each update a fixed 2.5 s (five
	// batches 500 ms apart), which a race-instrumented binary doing TLS handshakes on a loaded
	// 2-core machine can miss; the rest of the e2e suite runs the race build.
	legate := filepath.Join(bin, "legate")
	for out, pkg := range map[string]string{driver: gcpModule + "/pkg/test/main", upstream: gcpModule + "/internal/upstream", legate: "github.com/legateproxy/legate/cmd/legate"} {
		if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	for _, mode := range []string{"ads", "xds", "rest", "delta", "delta-ads"} {
		for _, tls := range []bool{false, true} {
			name := mode
			if tls {
				name += "-tls"
			}
			t.Run(name, func(t *testing.T) {
				runGCPSuite(t, dir, legate, driver, upstream, mode, tls)
			})
		}
	}
}

// gcpModuleDir returns the module cache directory of go-control-plane, downloading it if
// needed.
func gcpModuleDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", gcpModule).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", gcpModule, err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download %s: no directory in %s (%v)", gcpModule, out, err)
	}
	return m.Dir
}

// runGCPSuite runs one mode as scripts/integration.sh does and fails unless the driver reports
// that the mode passed.
func runGCPSuite(t *testing.T, dir, legate, driver, upstream, mode string, tls bool) {
	const message = "Hi, there!\n"
	up := startHelper(t, upstream, "-message="+message)
	defer stopHelper(up)

	p := launchBin(t, legate, nil, "-c", filepath.Join(dir, "sample", "bootstrap-"+mode+".yaml"), "--drain-time-s", "1")
	defer func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			t.Errorf("legate did not exit 30 s after SIGTERM")
		}
	}()

	runtimes := "1"
	if mode == "ads" {
		runtimes = "2" // as integration.sh: the ADS bootstrap has two RTDS layers
	}
	args := []string{"--xds=" + mode, "--runtimes=" + runtimes, "-message=" + message}
	if tls {
		args = append(args, "-tls")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, driver, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	passed := strings.Contains(out.String(), "Test for "+mode+" passed!")
	if err != nil || !passed {
		t.Fatalf("go-control-plane suite, mode %s (tls %v): %v; passed line seen: %v\n%s\nlegate:\n%s",
			mode, tls, err, passed, tail(out.String(), 60), tail(p.stderr.String(), 40))
	}
}

// startHelper starts a third-party helper process whose output is kept for failures.
func startHelper(t *testing.T, path string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(path, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(path), tail(out.String(), 20))
		}
	})
	return cmd
}

// stopHelper ends a helper started by startHelper and waits for it.
func stopHelper(cmd *exec.Cmd) {
	cmd.Process.Kill()
	cmd.Wait()
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
