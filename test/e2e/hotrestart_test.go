package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/legateproxy/legate/hotrestart"
)

// Hot restart e2e: real binaries, real sockets, a real upstream.
//
// Timing knobs are small so the tests stay bounded: a parent drains for 1 s
// and is told to exit after at most parentShutdown.
const (
	drainTime      = 1 * time.Second
	parentShutdown = 4 * time.Second
)

// hotRestartBaseID returns a --base-id private to this test process: the
// machine is shared, and a base id in use by another Legate cannot be
// restarted into.
func hotRestartBaseID(k int) string {
	return strconv.Itoa(1000 + os.Getpid()%40000*16 + k)
}

// proxyConfig is a bootstrap whose listener "ingress" (port 0) proxies every
// request to upstream.
func proxyConfig(upstream string) string {
	host, port, _ := net.SplitHostPort(upstream)
	return fmt.Sprintf(`
admin:
  address: {socket_address: {address: 127.0.0.1, port_value: 0}}
static_resources:
  clusters:
  - name: backend
    connect_timeout: 1s
    type: STATIC
    load_assignment:
      cluster_name: backend
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: %s, port_value: %s}}}
  listeners:
  - name: ingress
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress_http
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {prefix: "/"}
                route: {cluster: backend}
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
`, host, port)
}

// stat reads one counter or gauge from /stats.
func (p *proc) stat(name string) (uint64, bool) {
	p.t.Helper()
	code, _, body := p.get("/stats?filter=" + url.QueryEscape("^"+regexp.QuoteMeta(name)+"$"))
	if code != http.StatusOK {
		p.t.Fatalf("GET /stats = %d\n%s", code, body)
	}
	for _, l := range lines(body) {
		if v, ok := strings.CutPrefix(l, name+": "); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				p.t.Fatalf("stat %s = %q: %v", name, v, err)
			}
			return n, true
		}
	}
	return 0, false
}

// waitStat polls the admin interface until name has value want.
func (p *proc) waitStat(name string, want uint64) {
	p.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if v, _ := p.stat(name); v == want {
			return
		}
		if time.Now().After(deadline) {
			v, _ := p.stat(name)
			p.t.Fatalf("%s = %d after 30s; want %d", name, v, want)
		}
		select {
		case <-p.exited:
			p.t.Fatalf("legate exited while waiting for %s = %d", name, want)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ingressAddr is the bound address of the "ingress" listener.
func (p *proc) ingressAddr() string {
	p.t.Helper()
	_, _, body := p.get("/listeners")
	addr, ok := strings.CutPrefix(strings.TrimSpace(body), "ingress::")
	if !ok {
		p.t.Fatalf("/listeners = %q; want ingress::<address>", body)
	}
	return addr
}

// load drives GETs at addr from keep-alive and new-connection clients, each
// paced by a ticker, until stop. Requests in flight when stop is called
// finish and count.
type load struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	errs       []string
	stop       chan struct{}
	wg         sync.WaitGroup
}

func startLoad(addr string) *load {
	l := &load{stop: make(chan struct{})}
	keepAlive := &http.Transport{MaxIdleConnsPerHost: 4}
	fresh := &http.Transport{DisableKeepAlives: true}
	for i, tr := range []*http.Transport{keepAlive, keepAlive, fresh, fresh} {
		client := &http.Client{Transport: tr, Timeout: 20 * time.Second}
		l.wg.Go(func() { l.worker(client, fmt.Sprintf("http://%s/w%d", addr, i)) })
	}
	return l
}

func (l *load) worker(client *http.Client, url string) {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(2 * time.Minute) // bounded even if the test forgets to stop
	for {
		select {
		case <-l.stop:
			return
		case <-deadline:
			return
		case <-tick.C:
		}
		resp, err := client.Get(url)
		if err == nil {
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil && resp.StatusCode == http.StatusOK && string(body) == "upstream ok" {
				l.ok.Add(1)
				continue
			}
			err = fmt.Errorf("status %d, body %q, read error %v", resp.StatusCode, body, rerr)
		}
		l.failed.Add(1)
		l.mu.Lock()
		if len(l.errs) < 10 {
			l.errs = append(l.errs, err.Error())
		}
		l.mu.Unlock()
	}
}

func (l *load) finish() {
	close(l.stop)
	l.wg.Wait()
}

func TestHotRestartUnderLoad(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "upstream ok")
	}))
	defer upstream.Close()
	cfg := writeConfig(t, proxyConfig(upstream.Listener.Addr().String()))
	args := func(epoch int) []string {
		return []string{"-c", cfg, "--base-id", hotRestartBaseID(0), "--restart-epoch", strconv.Itoa(epoch),
			"--drain-time-s", strconv.Itoa(int(drainTime.Seconds())),
			"--parent-shutdown-time-s", strconv.Itoa(int(parentShutdown.Seconds()))}
	}

	cur := start(t, args(0)...)
	addr := cur.ingressAddr()
	admin := cur.admin
	l := startLoad(addr)
	defer func() {
		select {
		case <-l.stop:
		default:
			l.finish()
		}
	}()
	// Let the load reach the first epoch before restarting.
	cur.waitStatAtLeast("http.ingress_http.downstream_rq_total", 50)

	for epoch := 1; epoch <= 3; epoch++ {
		before, _ := cur.stat("http.ingress_http.downstream_rq_total")
		child := start(t, args(epoch)...)
		if child.admin != admin {
			t.Errorf("epoch %d admin address %s; want the parent's %s (the admin socket moves)", epoch, child.admin, admin)
		}
		child.waitStat("server.hot_restart_epoch", uint64(epoch))
		if got := child.ingressAddr(); got != addr {
			t.Errorf("epoch %d listener address %s; want the parent's %s", epoch, got, addr)
		}
		after, _ := child.stat("http.ingress_http.downstream_rq_total")
		if after < before {
			t.Errorf("epoch %d: downstream_rq_total = %d right after the restart; want at least the parent's %d (no reset)", epoch, after, before)
		}
		// The parent is told to drain at handover and exits once idle, at
		// the latest --parent-shutdown-time-s later.
		handover := time.Now()
		if code := cur.wait(parentShutdown + 15*time.Second); code != 0 {
			t.Errorf("epoch %d exited with code %d; want 0", epoch-1, code)
		}
		if took := time.Since(handover); took > parentShutdown+5*time.Second {
			t.Errorf("epoch %d exited %v after the handover; want within --parent-shutdown-time-s %v", epoch-1, took, parentShutdown)
		}
		if out := cur.stderr.String(); !strings.Contains(out, "child asked to stop accepting and drain") || !strings.Contains(out, "child asked this process to exit") {
			t.Errorf("epoch %d log lacks the drain and exit requests:\n%s", epoch-1, out)
		}
		// Keep loading the new epoch a little before the next restart.
		child.waitStatAtLeast("http.ingress_http.downstream_rq_total", after+50)
		cur = child
	}
	l.finish()

	if n := l.failed.Load(); n != 0 {
		t.Errorf("%d requests failed across three hot restarts; want 0. First errors:\n%s", n, strings.Join(l.errs, "\n"))
	}
	ok := l.ok.Load()
	if ok < 200 {
		t.Errorf("only %d requests succeeded; the load did not run", ok)
	}
	t.Logf("%d requests over three hot restarts, none failed", ok)
	// Every parent has exited, so its final counters are merged: the last
	// epoch counts every request of the four processes.
	if got, _ := cur.stat("http.ingress_http.downstream_rq_total"); got != uint64(ok) {
		t.Errorf("downstream_rq_total = %d; want %d (every request the clients saw succeed, over four epochs)", got, ok)
	}
	if got, _ := cur.stat("server.hot_restart_generation"); got != 4 {
		t.Errorf("server.hot_restart_generation = %d; want 4", got)
	}
	if got, _ := cur.stat("server.parent_connections"); got != 0 {
		t.Errorf("server.parent_connections = %d with no parent left; want 0", got)
	}
	cur.signal(syscall.SIGTERM)
	if code := cur.wait(30 * time.Second); code != 0 {
		t.Errorf("last epoch exited with %d after SIGTERM; want 0", code)
	}
}

// waitStatAtLeast polls until name reaches min.
func (p *proc) waitStatAtLeast(name string, min uint64) {
	p.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, _ := p.stat(name)
		if v >= min {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s = %d after 30s; want at least %d", name, v, min)
		}
		select {
		case <-p.exited:
			p.t.Fatalf("legate exited while waiting for %s >= %d", name, min)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestHotRestartParentShutdownTime holds a connection open on the parent, so
// it never becomes idle: the child ends it when --parent-shutdown-time-s has
// passed since the handover. Should the child die first, the parent ends
// itself on the same timer.
func TestHotRestartParentShutdownTime(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "upstream ok")
	}))
	defer upstream.Close()
	cfg := writeConfig(t, proxyConfig(upstream.Listener.Addr().String()))
	for _, tc := range []struct {
		name      string
		killChild bool
		wantLog   string
	}{
		{name: "the child terminates the parent", wantLog: "child asked this process to exit"},
		{name: "the parent ends itself when the child is gone", killChild: true, wantLog: "the child did not end this process"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := hotRestartBaseID(9)
			if tc.killChild {
				base = hotRestartBaseID(10)
			}
			args := func(epoch int) []string {
				return []string{"-c", cfg, "--base-id", base, "--restart-epoch", strconv.Itoa(epoch), "--drain-time-s", "1",
					"--parent-shutdown-time-s", strconv.Itoa(int(parentShutdown.Seconds()))}
			}
			parent := start(t, args(0)...)
			held, err := net.Dial("tcp", parent.ingressAddr())
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			parent.waitStatAtLeast("http.ingress_http.downstream_cx_active", 1)
			child := start(t, args(1)...)
			child.waitStat("server.hot_restart_epoch", 1)
			parent.waitOutput(regexp.MustCompile("child asked to stop accepting and drain"))
			handover := time.Now()
			if tc.killChild {
				child.cmd.Process.Kill()
				child.wait(30 * time.Second)
			}
			if code := parent.wait(parentShutdown + 15*time.Second); code != 0 {
				t.Errorf("parent exit code %d; want 0", code)
			}
			took := time.Since(handover)
			if took < parentShutdown-time.Second || took > parentShutdown+5*time.Second {
				t.Errorf("parent exited %v after the handover; want about --parent-shutdown-time-s %v (a connection kept it busy)", took, parentShutdown)
			}
			if !strings.Contains(parent.stderr.String(), tc.wantLog) {
				t.Errorf("parent log lacks %q:\n%s", tc.wantLog, parent.stderr.String())
			}
			// The held connection was closed by the parent's exit.
			held.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := held.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("held connection read: %v; want EOF or reset after the parent exited", err)
			}
		})
	}
}

func TestHotRestartRefusals(t *testing.T) {
	cfg := writeConfig(t, minimalConfig)

	t.Run("the child refuses a parent of another version", func(t *testing.T) {
		base := hotRestartBaseID(1)
		id, _ := strconv.ParseUint(base, 10, 32)
		fake, err := hotrestart.Listen(hotrestart.ParentConfig{
			SocketPath: "@envoy_domain_socket", BaseID: uint32(id),
			Version: "legate.0", Protocol: 99, Features: []string{"listen_socket"},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		served := make(chan struct{})
		go func() {
			fake.Serve(ctx)
			close(served)
		}()
		defer func() {
			cancel()
			<-served
		}()
		code, _, stderr := runOnce(t, "-c", cfg, "--base-id", base, "--restart-epoch", "1")
		if code != 1 {
			t.Errorf("exit code %d; want 1\n%s", code, stderr)
		}
		for _, want := range []string{"hot restart version mismatch", `"legate.0"`, `"` + hotrestart.Version + `"`, "--skip-hot-restart-on-no-parent"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr)
			}
		}
		// Told to, the child starts alone.
		p := start(t, "-c", cfg, "--base-id", base, "--restart-epoch", "1", "--skip-hot-restart-on-no-parent")
		if !strings.Contains(p.stderr.String(), "starting without a parent") {
			t.Errorf("log lacks the warning:\n%s", p.stderr.String())
		}
		p.signal(syscall.SIGINT)
		p.wait(30 * time.Second)
	})

	t.Run("the parent refuses a child of another version", func(t *testing.T) {
		base := hotRestartBaseID(2)
		parent := start(t, "-c", cfg, "--base-id", base)
		id, _ := strconv.ParseUint(base, 10, 32)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := hotrestart.Connect(ctx, hotrestart.ChildConfig{
			SocketPath: "@envoy_domain_socket", BaseID: uint32(id), Epoch: 1,
			Version: "legate.2", Protocol: 2, Features: append(hotrestart.Features(), "udp_forwarding"),
		})
		var ve *hotrestart.VersionError
		if !errors.As(err, &ve) {
			t.Fatalf("Connect = %v; want a *hotrestart.VersionError", err)
		}
		for _, want := range []string{"the parent (pid", "hot restart version mismatch", `"legate.2"`, "only the child has udp_forwarding"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
		if code, _, _ := parent.get("/ready"); code != http.StatusOK {
			t.Errorf("parent /ready = %d after refusing; want 200 (it carries on)", code)
		}
		parent.signal(syscall.SIGINT)
		parent.wait(30 * time.Second)
	})

	t.Run("--disable-hot-restart", func(t *testing.T) {
		base := hotRestartBaseID(3)
		p := start(t, "-c", cfg, "--base-id", base, "--disable-hot-restart")
		if _, _, body := p.get("/hot_restart_version"); body != "disabled" {
			t.Errorf("/hot_restart_version = %q; want \"disabled\"", body)
		}
		code, _, stderr := runOnce(t, "-c", cfg, "--base-id", base, "--restart-epoch", "1")
		if code != 1 || !strings.Contains(stderr, "no hot-restart parent") || !strings.Contains(stderr, "--disable-hot-restart") {
			t.Errorf("second epoch: exit %d, stderr:\n%s\nwant exit 1 naming the missing parent and --disable-hot-restart", code, stderr)
		}
		code, _, stderr = runOnce(t, "-c", cfg, "--base-id", base, "--restart-epoch", "1", "--disable-hot-restart")
		if code != 1 || !strings.Contains(stderr, "hot restart is disabled by --disable-hot-restart") {
			t.Errorf("second epoch with --disable-hot-restart: exit %d, stderr:\n%s", code, stderr)
		}
		if code, _, _ := p.get("/ready"); code != http.StatusOK {
			t.Errorf("first epoch /ready = %d; want 200", code)
		}
		p.signal(syscall.SIGINT)
		p.wait(30 * time.Second)
	})

	t.Run("version strings", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			args []string
			want string
		}{
			{name: "enabled", args: []string{"--hot-restart-version"}, want: hotrestart.Version},
			{name: "disabled", args: []string{"--hot-restart-version", "--disable-hot-restart"}, want: "disabled"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				code, stdout, stderr := runOnce(t, tc.args...)
				if code != 0 || stdout != tc.want {
					t.Errorf("legate %v = %d, %q; want 0, %q\n%s", tc.args, code, stdout, tc.want, stderr)
				}
			})
		}
		p := start(t, "-c", cfg, "--base-id", hotRestartBaseID(4))
		if _, _, body := p.get("/hot_restart_version"); body != hotrestart.Version {
			t.Errorf("/hot_restart_version = %q; want %q", body, hotrestart.Version)
		}
	})
}

// TestHotRestartBaseIDsSideBySide runs envoy#11310's case: base id B at
// epoch 1 next to base id B+1 at epoch 0, whose names Envoy's base id +
// epoch arithmetic made equal.
func TestHotRestartBaseIDsSideBySide(t *testing.T) {
	cfg := writeConfig(t, minimalConfig)
	b, _ := strconv.Atoi(hotRestartBaseID(5))
	a0 := start(t, "-c", cfg, "--base-id", strconv.Itoa(b), "--parent-shutdown-time-s", "4")
	c0 := start(t, "-c", cfg, "--base-id", strconv.Itoa(b+1))
	a1 := start(t, "-c", cfg, "--base-id", strconv.Itoa(b), "--restart-epoch", "1", "--parent-shutdown-time-s", "4")
	a1.waitStat("server.hot_restart_epoch", 1)
	if code := a0.wait(parentShutdown + 15*time.Second); code != 0 {
		t.Errorf("base %d epoch 0 exited with %d; want 0", b, code)
	}
	if v, _ := c0.stat("server.hot_restart_epoch"); v != 0 {
		t.Errorf("base %d: epoch = %d; want 0", b+1, v)
	}
	if code, _, _ := c0.get("/ready"); code != http.StatusOK {
		t.Errorf("base %d /ready = %d; want 200 (untouched by the other line's restart)", b+1, code)
	}
	if c0.admin == a1.admin {
		t.Errorf("both lines answer on %s; want separate admin sockets", c0.admin)
	}
	// A second Legate on a base id in use exits, as Envoy
	// (TestSecondInstanceSameBaseIDFailsClearly).
	dup := launch(t, "-c", cfg, "--base-id", strconv.Itoa(b+1))
	if code := dup.wait(30 * time.Second); code != 1 {
		t.Errorf("second Legate on base id %d: exit code %d; want 1", b+1, code)
	}
	for _, p := range []*proc{a1, c0} {
		p.signal(syscall.SIGINT)
		p.wait(30 * time.Second)
	}
}

func TestHotRestartDynamicBaseID(t *testing.T) {
	cfg := writeConfig(t, minimalConfig)
	path := filepath.Join(t.TempDir(), "base-id")
	// A private socket path, so the picked id does not depend on what else
	// runs on this machine.
	sock := "@legate_e2e_dynamic_" + strconv.Itoa(os.Getpid())
	first := start(t, "-c", cfg, "--use-dynamic-base-id", "--base-id-path", path, "--socket-path", sock)
	second := start(t, "-c", cfg, "--use-dynamic-base-id", "--base-id-path", path+"2", "--socket-path", sock)
	ids := map[string]bool{}
	for _, p := range []string{path, path + "2"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		ids[string(b)] = true
	}
	if !ids["0"] || !ids["1"] {
		t.Errorf("picked base ids %v; want 0 and 1", ids)
	}
	id, _ := os.ReadFile(path)
	next := start(t, "-c", cfg, "--base-id", string(id), "--socket-path", sock, "--restart-epoch", "1", "--parent-shutdown-time-s", "4")
	next.waitStat("server.hot_restart_epoch", 1)
	if code := first.wait(parentShutdown + 15*time.Second); code != 0 {
		t.Errorf("the restarted line's epoch 0 exited with %d; want 0", code)
	}
	for _, p := range []*proc{next, second} {
		p.signal(syscall.SIGINT)
		p.wait(30 * time.Second)
	}
}

var (
	restarterOnce sync.Once
	restarterBin  string
	restarterErr  error
)

// buildRestarter builds cmd/legate-restarter next to the legate binary.
func buildRestarter(t *testing.T) string {
	t.Helper()
	restarterOnce.Do(func() {
		restarterBin = filepath.Join(filepath.Dir(legateBin), "legate-restarter")
		out, err := exec.Command("go", "build", "-race", "-o", restarterBin, "github.com/legateproxy/legate/cmd/legate-restarter").CombinedOutput()
		if err != nil {
			restarterErr = fmt.Errorf("building legate-restarter: %v\n%s", err, out)
		}
	})
	if restarterErr != nil {
		t.Fatal(restarterErr)
	}
	return restarterBin
}

// launchRestarter runs legate-restarter with args; its output (the
// children's included) lands in the proc's buffer.
// dir is where the children write --admin-address-path (dir/admin-address).
func launchRestarter(t *testing.T, dir string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(buildRestarter(t), args...)
	p := &proc{t: t, cmd: cmd, dir: dir, stderr: newSyncBuffer(), exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stderr, p.stderr
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
			cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-p.exited:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-p.exited
			}
		}
		if t.Failed() {
			t.Logf("legate-restarter output:\n%s", p.stderr.String())
		}
	})
	return p
}

// waitOutput waits until re matches the output and returns the submatches.
func (p *proc) waitOutput(re *regexp.Regexp) []string {
	p.t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		if m := re.FindStringSubmatch(p.stderr.String()); m != nil {
			return m
		}
		select {
		case <-p.stderr.notify:
		case <-p.exited:
			if m := re.FindStringSubmatch(p.stderr.String()); m != nil {
				return m
			}
			p.t.Fatalf("exited before the output matched %s", re)
		case <-deadline:
			p.t.Fatalf("output did not match %s within 60s", re)
		}
	}
}

func exitedRe(epoch int, code int) *regexp.Regexp {
	return regexp.MustCompile(fmt.Sprintf(`epoch %d \(pid \d+\) exited with code %d`, epoch, code))
}

// pidOf returns the pid the restarter logged for epoch.
func (p *proc) pidOf(epoch int) int {
	p.t.Helper()
	m := p.waitOutput(regexp.MustCompile(fmt.Sprintf(`started epoch %d \(pid (\d+)\)`, epoch)))
	pid, _ := strconv.Atoi(m[1])
	return pid
}

// gone reports whether no process has pid (the restarter reaped it).
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func TestRestarterSignals(t *testing.T) {
	cfg := writeConfig(t, minimalConfig)
	run := func(t *testing.T, base string) *proc {
		dir := t.TempDir()
		p := launchRestarter(t, dir, "-term-timeout", "20s", "--", legateBin, "-c", cfg, "--base-id", base,
			"--admin-address-path", filepath.Join(dir, "admin-address"), "--drain-time-s", "1", "--parent-shutdown-time-s", "4")
		p.waitAdmin()
		p.waitStat("server.hot_restart_epoch", 0)
		return p
	}

	t.Run("SIGHUP starts the next epoch, SIGTERM stops all", func(t *testing.T) {
		p := run(t, hotRestartBaseID(7))
		pid0 := p.pidOf(0)
		for epoch := 1; epoch <= 2; epoch++ {
			p.signal(syscall.SIGHUP)
			p.pidOf(epoch)
			p.waitStat("server.hot_restart_epoch", uint64(epoch))
			// The parent drains and exits; the restarter carries on.
			p.waitOutput(exitedRe(epoch-1, 0))
		}
		if !gone(pid0) {
			t.Errorf("epoch 0 (pid %d) still exists after the handover", pid0)
		}
		pid2 := p.pidOf(2)
		p.signal(syscall.SIGTERM)
		if code := p.wait(30 * time.Second); code != 0 {
			t.Errorf("restarter exit code %d after SIGTERM; want 0 (the newest child's)", code)
		}
		p.waitOutput(exitedRe(2, 0))
		if !gone(pid2) {
			t.Errorf("epoch 2 (pid %d) still exists after the restarter exited", pid2)
		}
		if !strings.Contains(p.stderr.String(), "caught SIGTERM") {
			t.Errorf("legate did not log the forwarded SIGTERM:\n%s", p.stderr.String())
		}
	})

	t.Run("the newest child's end is the restarter's exit code", func(t *testing.T) {
		p := run(t, hotRestartBaseID(8))
		pid := p.pidOf(0)
		syscall.Kill(pid, syscall.SIGKILL)
		if code := p.wait(30 * time.Second); code != 128+int(syscall.SIGKILL) {
			t.Errorf("restarter exit code %d after its child was killed; want %d", code, 128+int(syscall.SIGKILL))
		}
	})

	t.Run("exit codes pass through", func(t *testing.T) {
		p := launchRestarter(t, t.TempDir(), "--", "/bin/sh", "-c", `test "$RESTART_EPOCH" = 0 && test "$2" = 0 && exit 3`, "sh")
		if code := p.wait(30 * time.Second); code != 3 {
			t.Errorf("restarter exit code %d; want the child's 3", code)
		}
	})
}
