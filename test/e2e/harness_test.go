package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// legateBin is the binary built once by TestMain.
var legateBin string

func TestMain(m *testing.M) {
	// A test re-run inside a network namespace (runInNetns) uses its parent's binary.
	if bin := os.Getenv(envLegateBin); bin != "" {
		legateBin = bin
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "legate-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	legateBin = filepath.Join(dir, "legate")
	build := exec.Command("go", "build", "-race", "-o", legateBin, "github.com/legateproxy/legate/cmd/legate")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building legate:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one running legate.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	admin  string // http://host:port
	dir    string
	stderr *syncBuffer
	exited chan struct{}
	err    error // exit error, valid after exited closes
}

// syncBuffer collects a process's output and lets tests wait for a line.
type syncBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	notify chan struct{}
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{notify: make(chan struct{}, 1)} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	select {
	case b.notify <- struct{}{}:
	default:
	}
	return n, err
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// writeConfig writes yaml to a file in a temp dir and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "envoy.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// minimalConfig is a bootstrap with admin on a free loopback port.
const minimalConfig = `
node: {id: e2e-node, cluster: e2e-cluster}
admin:
  address:
    socket_address: {address: 127.0.0.1, port_value: 0}
static_resources:
  clusters:
  - name: backend
    connect_timeout: 0.25s
    type: STATIC
    load_assignment:
      cluster_name: backend
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 1}}}
`

// start runs legate with args plus an admin address file, and waits until the
// admin interface answers /ready with 200.
func start(t *testing.T, args ...string) *proc {
	t.Helper()
	p := launch(t, args...)
	p.waitAdmin()
	return p
}

// launch runs legate without waiting for anything.
func launch(t *testing.T, args ...string) *proc {
	t.Helper()
	return launchEnv(t, nil, args...)
}

// launchEnv is launch with env ("NAME=value") added to the environment.
func launchEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return launchBin(t, legateBin, env, args...)
}

// launchBin is launchEnv running the legate binary at bin.
func launchBin(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	dir := t.TempDir()
	addrFile := filepath.Join(dir, "admin-address")
	args = append([]string{"--admin-address-path", addrFile}, args...)
	if !hasBaseIDFlag(args) {
		// As Envoy, a first epoch exits when another instance holds its base id's hot
		// restart socket; instances a test starts side by side each get a free one.
		args = append(args, "--use-dynamic-base-id")
	}
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	p := &proc{t: t, cmd: cmd, dir: dir, stderr: newSyncBuffer(), exited: make(chan struct{})}
	cmd.Stdout = p.stderr
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("legate output:\n%s", p.stderr.String())
		}
	})
	return p
}

// hasBaseIDFlag reports whether args choose the hot restart socket themselves.
func hasBaseIDFlag(args []string) bool {
	for _, a := range args {
		switch strings.SplitN(a, "=", 2)[0] {
		case "--base-id", "--use-dynamic-base-id", "--disable-hot-restart":
			return true
		}
	}
	return false
}

// waitAdmin waits for the admin address file (written before legate logs
// "admin address: …"; with --log-path the log is not on stderr, so the file
// is what is watched), then for /ready to say LIVE.
func (p *proc) waitAdmin() {
	p.t.Helper()
	deadline := p.waitAdminAddr()
	// The init manager may still be running; LIVE is reported once it ends.
	for i := 0; ; i++ {
		resp, err := http.Get(p.admin + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-deadline:
			p.t.Fatalf("legate not LIVE within 30s")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitAdminAddr waits for the admin address file only (the server may still
// be initializing) and returns the 30 s deadline it started.
func (p *proc) waitAdminAddr() <-chan time.Time {
	p.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		if addr, err := os.ReadFile(filepath.Join(p.dir, "admin-address")); err == nil && len(addr) > 0 {
			p.admin = "http://" + strings.TrimSpace(string(addr))
			break
		}
		select {
		case <-p.stderr.notify:
		case <-time.After(20 * time.Millisecond):
		case <-p.exited:
			p.t.Fatalf("legate exited before serving admin: %v\n%s", p.err, p.stderr.String())
		case <-deadline:
			p.t.Fatalf("legate wrote no admin address within 30s\n%s", p.stderr.String())
		}
	}
	return deadline
}

// get fetches path from the admin interface.
func (p *proc) get(path string) (int, http.Header, string) {
	p.t.Helper()
	return p.do(http.MethodGet, path)
}

func (p *proc) post(path string) (int, http.Header, string) {
	p.t.Helper()
	return p.do(http.MethodPost, path)
}

func (p *proc) do(method, path string) (int, http.Header, string) {
	p.t.Helper()
	return p.doHost(method, path, "", "")
}

// doHost is do with the Host header set to host and, when not empty, an
// Origin header (the requests a DNS-rebound web page sends); an empty host
// is the admin's address.
func (p *proc) doHost(method, path, host, origin string) (int, http.Header, string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, p.admin+path, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	req.Host = host
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header, string(body)
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(timeout):
		p.t.Fatalf("legate still running after %v", timeout)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		p.t.Fatalf("wait: %v", p.err)
	}
	return 0
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// runOnce runs legate to completion and returns exit code and output.
func runOnce(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, legateBin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

// lines splits s into lines for readable failure messages.
func lines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}
