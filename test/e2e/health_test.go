package e2e

import (
	"bufio"
	"encoding/json"
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
// /failed_active_hc after unhealthy_threshold failed checks (interval × unhealthy_threshold),
// restarts it and expects it healthy again after healthy_threshold passes.
//
// Its upper bounds are counted in the checker's rounds, read from its event log (every
// check is logged), not in time (it was 400 ms of slack): a busy machine can delay the
// checker's timers, and this test's polling, past any fixed slack, but it delays the other
// host's checks alike.
func TestActiveHealthCheckKilledUpstream(t *testing.T) {
	const (
		interval           = 200 * time.Millisecond
		unhealthyThreshold = 2
		healthyThreshold   = 2
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
      always_log_health_check_failures: true
      always_log_health_check_success: true
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

	killed := time.Now()
	a.kill()
	took := p.waitLine("/clusters", "backend::"+a.addr+"::health_flags::/failed_active_hc", 10*time.Second)
	// a fails each of its checks at once (connection refused), at the interval b's checks
	// keep: it is ejected at its unhealthy_threshold-th failure (logged after the eject
	// event, the ones before it before), by when b has been checked as often, and once more
	// where their timers' phases differ.
	ejected, before := hcEventsUntil(t, events, killed, a.addr, "eject_unhealthy_event")
	failures, rounds := 0, 0
	for _, ev := range before {
		switch {
		case ev.addr == a.addr && ev.kind == "health_check_failure_event":
			failures++
		case ev.addr == b.addr:
			rounds++
		}
	}
	t.Logf("killed upstream marked /failed_active_hc after %v (event log: %v), %d checks of the other upstream meanwhile", took, ejected.Sub(killed), rounds)
	if failures != unhealthyThreshold-1 {
		t.Errorf("killed upstream ejected at its failure %d; want unhealthy_threshold (%d)", failures+1, unhealthyThreshold)
	}
	if rounds > unhealthyThreshold+1 {
		t.Errorf("killed upstream marked unhealthy after %d checks of the other upstream; want at most unhealthy_threshold (%d) + 1", rounds, unhealthyThreshold)
	}
	if _, _, body := p.get("/clusters"); !strings.Contains(body, "backend::"+b.addr+"::health_flags::healthy\n") {
		t.Errorf("the live upstream is not healthy after the other was killed:\n%s", body)
	}

	restarted := time.Now()
	startUpstream(t, a.addr)
	took = p.waitLine("/clusters", "backend::"+a.addr+"::health_flags::healthy", 10*time.Second)
	// The passes that count are those after a's last failure (a check refused before the
	// process listened, or one that timed out on a busy machine); the one that makes the
	// host healthy is logged as the add_healthy_event itself.
	healthy, before := hcEventsUntil(t, events, restarted, a.addr, "add_healthy_event")
	var passes []time.Time
	for _, ev := range before {
		switch {
		case ev.addr != a.addr:
		case ev.kind == "health_check_failure_event":
			passes = nil
		case ev.kind == "successful_health_check_event":
			passes = append(passes, ev.at)
		}
	}
	passes = append(passes, healthy)
	t.Logf("restarted upstream healthy after %v (event log: %v), at pass %d", took, healthy.Sub(restarted), len(passes))
	if len(passes) != healthyThreshold {
		t.Errorf("restarted upstream marked healthy at pass %d; want healthy_threshold (%d)", len(passes), healthyThreshold)
	}
	// Timed by the checker's own log, from the first of those passes: not from when this
	// test saw the process listen, which the checker may have reached before.
	if d, min := healthy.Sub(passes[0]), (healthyThreshold-1)*interval; d < min {
		t.Errorf("restarted upstream healthy %v after its first pass; want at least %v (healthy_threshold passes an interval apart)", d, min)
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

// hcEvent is a health check event log line: its kind (the name of its event field), time and
// host address.
type hcEvent struct {
	kind string
	at   time.Time
	addr string
}

// hcEventsUntil waits until the event log at path has, among the events logged after since,
// one of kind for the host at addr; it returns that event's time and the events after since
// before it, in the log's order.
func hcEventsUntil(t *testing.T, path string, since time.Time, addr, kind string) (time.Time, []hcEvent) {
	t.Helper()
	var at time.Time
	var before []hcEvent
	eventually(t, kind+" for "+addr+" in the event log", func() bool {
		b, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		before = nil
		for _, l := range lines(string(b)) {
			var line struct {
				Host struct {
					SocketAddress struct {
						Address   string      `json:"address"`
						PortValue json.Number `json:"port_value"`
					} `json:"socket_address"`
				} `json:"host"`
				Timestamp time.Time `json:"timestamp"`
			}
			var fields map[string]json.RawMessage
			if json.Unmarshal([]byte(l), &line) != nil || json.Unmarshal([]byte(l), &fields) != nil {
				t.Fatalf("event log line %q is not an event", l)
			}
			sa := line.Host.SocketAddress
			ev := hcEvent{at: line.Timestamp, addr: net.JoinHostPort(sa.Address, sa.PortValue.String())}
			for k := range fields {
				if strings.HasSuffix(k, "_event") {
					ev.kind = k
				}
			}
			if !ev.at.After(since) {
				continue
			}
			if ev.addr == addr && ev.kind == kind {
				at = ev.at
				return true
			}
			before = append(before, ev)
		}
		return false
	})
	return at, before
}
