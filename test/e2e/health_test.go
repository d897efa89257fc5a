package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// upstreamEnv makes the test binary an HTTP upstream instead of running tests: it serves 200 on
// every path at the address in the variable (port 0: one the kernel picks), prints "listening"
// and the bound address, and runs until killed.
const upstreamEnv = "LEGATE_E2E_UPSTREAM"

func init() {
	addr := os.Getenv(upstreamEnv)
	if addr == "" {
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		os.Exit(2)
	}
	fmt.Println("listening", ln.Addr())
	err = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	fmt.Fprintln(os.Stderr, "upstream:", err)
	os.Exit(2)
}

// upstream is an HTTP upstream running as its own process (this test binary re-executed).
type upstream struct {
	t    *testing.T
	addr string
	cmd  *exec.Cmd
	done chan struct{}
}

// freeAddr returns a loopback address with a port that was free a moment ago, reserved
// against other e2e tests (freePort), for a server that must bind the same address again.
func freeAddr(t *testing.T) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
}

// startUpstream runs an upstream process on addr (port 0: one the kernel picks) and waits
// until it listens; the upstream's addr is the bound address.
func startUpstream(t *testing.T, addr string) *upstream {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), upstreamEnv+"="+addr)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	u := &upstream{t: t, cmd: cmd, done: make(chan struct{})}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		bound := ""
		if sc.Scan() {
			bound, _ = strings.CutPrefix(sc.Text(), "listening ")
		}
		ready <- bound
		for sc.Scan() {
		}
		cmd.Wait()
		close(u.done)
	}()
	t.Cleanup(u.kill)
	select {
	case u.addr = <-ready:
		if u.addr == "" {
			t.Fatalf("upstream on %s did not start", addr)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("upstream on %s did not start within 20s", addr)
	}
	return u
}

// kill ends the upstream process abruptly (SIGKILL) and waits for it.
func (u *upstream) kill() {
	select {
	case <-u.done:
		return
	default:
	}
	u.cmd.Process.Kill()
	<-u.done
}

// waitLine polls /clusters until it has line, and returns how long that took.
func (p *proc) waitLine(path, line string, timeout time.Duration) time.Duration {
	p.t.Helper()
	start := time.Now()
	deadline := time.After(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		_, _, body := p.get(path)
		if strings.Contains(body, line+"\n") {
			return time.Since(start)
		}
		select {
		case <-tick.C:
		case <-deadline:
			p.t.Fatalf("%s has no line %q after %v:\n%s", path, line, timeout, body)
		}
	}
}

// TestActiveHealthCheckKilledUpstream health-checks two upstream processes, kills one, expects
// /failed_active_hc within interval × unhealthy_threshold + timeout, restarts it and expects it
// healthy again after healthy_threshold passes.
func TestActiveHealthCheckKilledUpstream(t *testing.T) {
	const (
		interval           = 200 * time.Millisecond
		timeout            = 200 * time.Millisecond
		unhealthyThreshold = 2
		healthyThreshold   = 2
		// slack covers the admin polling period and a race-instrumented binary on a busy machine.
		slack = 400 * time.Millisecond
	)
	// a is restarted on its address below, so that address is picked (and reserved) first; b
	// binds a port the kernel picks.
	a := startUpstream(t, freeAddr(t))
	b := startUpstream(t, "127.0.0.1:0")
	events := filepath.Join(t.TempDir(), "hc_events.log")
	endpoint := func(addr string) string {
		h, port, _ := net.SplitHostPort(addr)
		return fmt.Sprintf("        - endpoint: {address: {socket_address: {address: %s, port_value: %s}}}\n", h, port)
	}
	cfg := `
node: {id: e2e-node, cluster: e2e-cluster}
admin:
  address:
    socket_address: {address: 127.0.0.1, port_value: 0}
static_resources:
  clusters:
  - name: backend
    connect_timeout: 0.25s
    type: STATIC
    common_lb_config: {update_merge_window: 0s}
    health_checks:
    - timeout: 0.2s
      interval: 0.2s
      no_traffic_interval: 0.2s
      unhealthy_threshold: 2
      healthy_threshold: 2
      event_log_path: ` + events + `
      http_health_check: {path: /healthz}
    load_assignment:
      cluster_name: backend
      endpoints:
      - lb_endpoints:
` + endpoint(a.addr) + endpoint(b.addr)
	// start waits for /ready: the cluster warms only after every host's first check.
	p := start(t, "-c", writeConfig(t, cfg))
	for _, u := range []*upstream{a, b} {
		p.waitLine("/clusters", "backend::"+u.addr+"::health_flags::healthy", 5*time.Second)
	}

	a.kill()
	took := p.waitLine("/clusters", "backend::"+a.addr+"::health_flags::/failed_active_hc", 10*time.Second)
	bound := interval*unhealthyThreshold + timeout
	t.Logf("killed upstream marked /failed_active_hc after %v (bound %v + %v slack)", took, bound, slack)
	if took > bound+slack {
		t.Errorf("killed upstream marked unhealthy after %v; want within %v (interval × unhealthy_threshold + timeout) + %v", took, bound, slack)
	}
	if _, _, body := p.get("/clusters"); !strings.Contains(body, "backend::"+b.addr+"::health_flags::healthy\n") {
		t.Errorf("the live upstream is not healthy after the other was killed:\n%s", body)
	}

	startUpstream(t, a.addr)
	took = p.waitLine("/clusters", "backend::"+a.addr+"::health_flags::healthy", 10*time.Second)
	t.Logf("restarted upstream healthy after %v", took)
	if min := (healthyThreshold - 1) * interval; took < min {
		t.Errorf("restarted upstream healthy after %v; want at least %v (healthy_threshold passes)", took, min)
	}
	if max := healthyThreshold*interval + timeout + slack; took > max {
		t.Errorf("restarted upstream healthy after %v; want within %v", took, max)
	}

	// The host's flag is cleared before the cluster republishes its partitions (OnChange), so
	// the membership gauge may trail what /clusters shows by that republish.
	p.waitLine("/stats?filter=^cluster\\.backend\\.membership_healthy$", "cluster.backend.membership_healthy: 2", 2*time.Second)
	_, _, st := p.get("/stats?filter=^cluster\\.backend\\.(health_check|membership_healthy)")
	for _, want := range []string{"cluster.backend.health_check.healthy: 2", "cluster.backend.membership_healthy: 2"} {
		if !strings.Contains(st, want+"\n") {
			t.Errorf("/stats lacks %q:\n%s", want, st)
		}
	}
	if !strings.Contains(st, "cluster.backend.health_check.network_failure: ") || strings.Contains(st, "cluster.backend.health_check.network_failure: 0\n") {
		t.Errorf("/stats shows no network_failure:\n%s", st)
	}
	log, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"eject_unhealthy_event":{"failure_type":"NETWORK"`, `"add_healthy_event":{"first_check":false}`} {
		if !strings.Contains(string(log), want) {
			t.Errorf("event log lacks %s:\n%s", want, log)
		}
	}
}
