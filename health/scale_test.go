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
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/clock"
)

// TestScale20k is part 2 of the health-checking issue: 20,000 endpoints checked over HTTP/1.1
// every 5 s, all in lockstep (no jitter: the worst case), against an upstream farm in a child
// process (20,000 listeners on 127.0.0.1), for at least three intervals. No check may fail and no
// host may be marked unhealthy. It logs the CPU the checker process and the farm used per
// interval. Envoy's single-threaded checker falls over at this size (envoy#28699).
//
// LEGATE_SCALE=1 enables it; LEGATE_SCALE_HOSTS and LEGATE_SCALE_INTERVALS change the size.
func TestScale20k(t *testing.T) {
	if os.Getenv("LEGATE_SCALE") != "1" {
		t.Skip("set LEGATE_SCALE=1 to run the 20,000-endpoint health-check scale test")
	}
	n := envInt("LEGATE_SCALE_HOSTS", 20000)
	rounds := envInt("LEGATE_SCALE_INTERVALS", 3)
	const interval = 5 * time.Second
	if err := raiseFileLimit(uint64(n + 4096)); err != nil {
		t.Fatalf("raise RLIMIT_NOFILE to %d: %v", n+4096, err)
	}
	up := startUpstream(t, fmt.Sprintf("farm:%d", n))
	if len(up.addrs) != n {
		t.Fatalf("farm listens on %d ports; want %d", len(up.addrs), n)
	}

	s := httpSpec(nil)
	s.Interval, s.Timeout = interval, time.Second
	s.UnhealthyInterval, s.UnhealthyEdgeInterval, s.HealthyEdgeInterval = interval, interval, interval
	s.UnhealthyThreshold, s.HealthyThreshold = 1, 1 // strictest: any failed check would mark a host

	var st Stats
	var healthyCount, falseMarks atomic.Int64
	allHealthy := make(chan struct{})
	sched := NewScheduler(0)
	c, err := New(s, Options{ClusterName: "scale", Stats: &st, Scheduler: sched,
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
	for i, a := range up.addrs {
		hosts[i] = newHost(t, a, InitialFlags(false, false))
	}
	c.SetHosts(hosts)

	cpu0, farm0 := selfCPU(), processCPU(up.cmd.Process.Pid)
	start := time.Now()
	c.Start()
	select {
	case <-allHealthy:
	case <-time.After(2 * interval):
		t.Fatalf("only %d of %d hosts healthy after %v", healthyCount.Load(), n, 2*interval)
	}
	t.Logf("%d hosts, scheduler capacity %d, GOMAXPROCS %d", n, sched.Capacity(), goruntime.GOMAXPROCS(0))
	t.Logf("first round: all healthy after %v; checker CPU %v, farm CPU %v",
		time.Since(start).Round(time.Millisecond), selfCPU()-cpu0, processCPU(up.cmd.Process.Pid)-farm0)

	for i := range rounds {
		cpu0, farm0, att0 := selfCPU(), processCPU(up.cmd.Process.Pid), st.Attempt.Value()
		<-time.After(interval)
		cpu, farm, att := selfCPU()-cpu0, processCPU(up.cmd.Process.Pid)-farm0, st.Attempt.Value()-att0
		perCheck := time.Duration(0)
		if att > 0 {
			perCheck = cpu / time.Duration(att)
		}
		t.Logf("interval %d: %d checks, checker CPU %v (%.1f%% of one core, %v per check), farm CPU %v",
			i+1, att, cpu.Round(time.Millisecond), 100*cpu.Seconds()/interval.Seconds(), perCheck, farm.Round(time.Millisecond))
		if lo := uint64(n) * 9 / 10; att < lo {
			t.Errorf("interval %d: %d checks; want about %d (>= %d)", i+1, att, n, lo)
		}
	}
	if f, m := st.Failure.Value(), falseMarks.Load(); f != 0 || m != 0 {
		t.Errorf("failures %d (network %d), hosts marked unhealthy %d; want 0, 0", f, st.NetworkFailure.Value(), m)
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
		spec *config.HealthCheckSpec
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
	clk := clock.NewFake(epoch)
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
