package health

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/clock/clocktest"
)

// TestScale20k is part 2 of the health-checking issue: 20,000 endpoints checked over HTTP/1.1
// every 5 s, all in lockstep (no jitter: the worst case), against upstream farms in child
// processes (20,000 listeners on 127.0.0.1 in all), for at least three intervals. No check may
// fail and no host may be marked unhealthy. It logs the CPU the checker process and the farms used
// per interval. Envoy's single-threaded checker falls over at this size (envoy#28699).
//
// Each check opens a new connection (reuse_connection: false) unless LEGATE_SCALE_REUSE=1: kept
// connections need one descriptor per host in the checker, more than a 20,000 RLIMIT_NOFILE
// hard limit allows. The farm is split over processes of farmSize listeners for the same reason.
//
// LEGATE_SCALE=1 enables it; LEGATE_SCALE_HOSTS and LEGATE_SCALE_INTERVALS change the size,
// LEGATE_SCALE_SLOTS the scheduler bound, LEGATE_SCALE_PROTO=tcp checks by connecting only.
func TestScale20k(t *testing.T) {
	if os.Getenv("LEGATE_SCALE") != "1" {
		t.Skip("set LEGATE_SCALE=1 to run the 20,000-endpoint health-check scale test")
	}
	n := envInt("LEGATE_SCALE_HOSTS", 20000)
	rounds := envInt("LEGATE_SCALE_INTERVALS", 3)
	reuse := os.Getenv("LEGATE_SCALE_REUSE") == "1"
	const interval = 5 * time.Second
	const farmSize = 7000
	need := uint64(4096)
	if reuse {
		need += uint64(n)
	}
	if got, err := raiseFileLimit(need); err != nil || got < need {
		t.Fatalf("RLIMIT_NOFILE = %d (%v); need %d", got, err, need)
	}
	setup := time.Now()
	var farms []*upstream
	var addrs []string
	// Ports below Linux's ephemeral range (32768+), 10,000 per farm: 2000..31999 for three farms.
	for i, left := 0, n; left > 0; i, left = i+1, left-farmSize {
		lo := 2000 + i*10000
		f := startUpstream(t, fmt.Sprintf("farm:%d:%d:%d", min(left, farmSize), lo, lo+10000))
		farms = append(farms, f)
		addrs = append(addrs, f.addrs...)
	}
	if len(addrs) != n {
		t.Fatalf("farms listen on %d ports; want %d", len(addrs), n)
	}
	farmCPU := func() time.Duration {
		var d time.Duration
		for _, f := range farms {
			d += processCPU(f.cmd.Process.Pid)
		}
		return d
	}

	s := httpSpec(nil)
	if os.Getenv("LEGATE_SCALE_PROTO") == "tcp" {
		s = tcpSpec("") // connect-only, as tcp_health_check: {}
	}
	s.ReuseConnection = reuse
	s.Interval, s.Timeout = interval, time.Second
	s.UnhealthyInterval, s.UnhealthyEdgeInterval, s.HealthyEdgeInterval = interval, interval, interval
	s.UnhealthyThreshold, s.HealthyThreshold = 1, 1 // strictest: any failed check would mark a host

	t.Logf("farms ready after %v", time.Since(setup).Round(time.Millisecond))
	var st Stats
	var healthyCount, falseMarks atomic.Int64
	allHealthy := make(chan struct{})
	sched := NewScheduler(envInt("LEGATE_SCALE_SLOTS", 0))
	opts := Options{ClusterName: "scale"}
	real, err := newProber(s, &opts)
	if err != nil {
		t.Fatal(err)
	}
	errs := &errorSample{}
	c, err := New(s, Options{ClusterName: "scale", Stats: &st, Scheduler: sched, Prober: recordingProber{real, errs},
		OnChange: func(h *host.Host, changed bool) {
			if !changed {
				return
			}
			if h.HasHealthFlag(host.FailedActiveHC) {
				falseMarks.Add(1)
			} else if healthyCount.Add(1) == int64(n) {
				close(allHealthy)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hosts := make([]*host.Host, n)
	for i, a := range addrs {
		hosts[i] = newHost(t, a, InitialFlags(false, false))
	}
	c.SetHosts(hosts)

	cpu0, farm0 := selfCPU(), farmCPU()
	start := time.Now()
	c.Start()
	select {
	case <-allHealthy:
	case <-time.After(2 * interval):
		t.Fatalf("only %d of %d hosts healthy after %v; failures %d; first errors: %v",
			healthyCount.Load(), n, 2*interval, st.Failure.Value(), errs.list())
	}
	t.Logf("%d hosts in %d farm processes, reuse_connection %v, scheduler capacity %d, GOMAXPROCS %d",
		n, len(farms), reuse, sched.Capacity(), goruntime.GOMAXPROCS(0))
	t.Logf("first round: all healthy after %v; checker CPU %v, farm CPU %v",
		time.Since(start).Round(time.Millisecond), selfCPU()-cpu0, farmCPU()-farm0)

	var total uint64
	for i := range rounds {
		cpu0, farm0, att0 := selfCPU(), farmCPU(), st.Attempt.Value()
		<-time.After(interval)
		cpu, farm, att := selfCPU()-cpu0, farmCPU()-farm0, st.Attempt.Value()-att0
		perCheck := time.Duration(0)
		if att > 0 {
			perCheck = cpu / time.Duration(att)
		}
		t.Logf("interval %d: %d checks, checker CPU %v (%.1f%% of one core, %v per check), farm CPU %v",
			i+1, att, cpu.Round(time.Millisecond), 100*cpu.Seconds()/interval.Seconds(), perCheck, farm.Round(time.Millisecond))
		total += att
	}
	// Each window sees the checks falling due in it, which varies with the phase of the
	// lockstep rounds; over all windows every host must have been checked about once per interval.
	if lo := uint64(n*rounds) * 9 / 10; total < lo {
		t.Errorf("%d checks in %d intervals; want about %d (>= %d)", total, rounds, n*rounds, lo)
	}
	if f, m := st.Failure.Value(), falseMarks.Load(); f != 0 || m != 0 {
		t.Errorf("failures %d (network %d), hosts marked unhealthy %d; want 0, 0; first errors: %v",
			f, st.NetworkFailure.Value(), m, errs.list())
	}
	if got := st.Healthy.Value(); got != uint64(n) {
		t.Errorf("healthy gauge = %d; want %d", got, n)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// selfCPU is the user plus system CPU time this process has used (getrusage).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU is the user plus system CPU time of another process, from /proc/PID/stat (clock
// ticks of 10 ms).
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// BenchmarkProbe measures one check of each prober against a server on 127.0.0.1.
func BenchmarkProbe(b *testing.B) {
	httpSrv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer httpSrv.Close()
	tcp := startTCP(b, pingPong)
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, grpchealth.NewServer())
	go gs.Serve(gl)
	defer gs.Stop()

	httpHost := strings.TrimPrefix(httpSrv.URL, "http://")
	noReuse := httpSpec(nil)
	noReuse.ReuseConnection = false
	for _, bc := range []struct {
		name string
		spec *config.HealthCheck
		addr string
	}{
		{"http_keepalive", httpSpec(nil), httpHost},
		{"http_new_connection", noReuse, httpHost},
		{"tcp_connect", tcpSpec(""), tcp.l.Addr().String()},
		{"tcp_send_receive", tcpSpec("PING", "PONG"), tcp.l.Addr().String()},
		{"grpc", grpcSpec("", ""), gl.Addr().String()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			opts := Options{ClusterName: "web"}
			p, err := newProber(bc.spec, &opts)
			if err != nil {
				b.Fatal(err)
			}
			sess := p.Session(newHost(b, bc.addr, 0))
			defer sess.Close()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if r := sess.Check(ctx); r.Outcome != Succeeded {
					b.Fatalf("check = %+v", r)
				}
			}
		})
	}
}

// BenchmarkCheckerRound measures the checker's own cost per check (timers, goroutine, slot,
// flags, stats, callback) with a prober that answers at once: one op is one round of 1,000 hosts.
func BenchmarkCheckerRound(b *testing.B) {
	const hosts = 1000
	clk := clocktest.NewFake(epoch)
	var st Stats
	done := make(chan struct{}, hosts)
	c, err := New(spec(nil), Options{ClusterName: "bench", Stats: &st, Clock: clk, Prober: instantProber{},
		OnChange: func(*host.Host, bool) { done <- struct{}{} }})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	hs := make([]*host.Host, hosts)
	for i := range hs {
		hs[i] = newHost(b, fmt.Sprintf("127.0.0.1:%d", i+1), 0)
	}
	c.SetHosts(hs)
	c.Start()
	waitN := func() {
		for range hosts {
			<-done
		}
	}
	waitN()
	b.ReportAllocs()
	for b.Loop() {
		clk.Advance(10 * time.Second)
		waitN()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*hosts), "ns/check")
}

type instantProber struct{}

func (instantProber) Session(*host.Host) ProbeSession { return instantProber{} }
func (instantProber) Check(context.Context) Result    { return Result{Outcome: Succeeded} }
func (instantProber) Close()                          {}

// recordingProber keeps the first errors of a prober's failed checks.
type recordingProber struct {
	p    Prober
	errs *errorSample
}

func (r recordingProber) Session(h *host.Host) ProbeSession {
	return recordingSession{r.p.Session(h), r.errs}
}

type recordingSession struct {
	ProbeSession
	errs *errorSample
}

func (r recordingSession) Check(ctx context.Context) Result {
	res := r.ProbeSession.Check(ctx)
	if res.Outcome == Failed {
		r.errs.add(res.Err)
	}
	return res
}

type errorSample struct {
	mu   sync.Mutex
	errs []error
}

func (e *errorSample) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.errs) < 5 {
		e.errs = append(e.errs, err)
	}
}

func (e *errorSample) list() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]error(nil), e.errs...)
}
