package listener

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/stats"
)

// dialerEnv makes the test binary a dialer process (see runDialer): the memory benchmark keeps
// its client ends in another process so that the listener's process holds only the server
// ends, as in production.
const dialerEnv = "LEGATE_LISTENER_TEST_DIALER"

// runDialer dials $LEGATE_LISTENER_TEST_DIALER ("addr count") count times, prints "ready",
// and holds the connections until its standard input closes.
func runDialer() int {
	var addr string
	var n int
	if _, err := fmt.Sscan(os.Getenv(dialerEnv), &addr, &n); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	conns := make([]net.Conn, 0, n)
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		conns = append(conns, c)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		c.Close()
	}
	return 0
}

// BenchmarkAcceptHandOff measures accepting a connection and handing it to a handler, with and
// without the TLS inspector (a client that sends a ClientHello).
func BenchmarkAcceptHandOff(b *testing.B) {
	for _, tc := range []struct {
		name string
		yaml string
		send []byte
	}{
		{"raw", "{name: l, address: {socket_address: {address: 127.0.0.1, port_value: 0}}, filter_chains: [{filters: [{name: bench}]}]}", nil},
		{"tls_inspector", "{name: l, address: {socket_address: {address: 127.0.0.1, port_value: 0}}, listener_filters: [{name: envoy.filters.listener.tls_inspector}], filter_chains: [{filter_chain_match: {server_names: [a.example.com]}, filters: [{name: bench}]}, {filters: [{name: bench}]}]}", helloBytes(b, "a.example.com", "h2")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			handed := make(chan struct{}, 1024)
			reg := serving("bench", func(*ChainContext, any) (FilterChainHandler, error) {
				return HandlerFunc(func(c *Conn) { c.Close(); handed <- struct{}{} }), nil
			})
			m := testManager(b, ManagerConfig{Services: reg}, listenerFromYAML(b, tc.yaml))
			addr := addrOf(b, m, "l")
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					b.Fatal(err)
				}
				if tc.send != nil {
					c.Write(tc.send)
				}
				<-handed
				c.Close()
			}
		})
	}
}

// BenchmarkIdleConnMemory measures the memory an idle accepted connection costs the process
// (heap in use plus goroutine stacks) with 10,000 connections held open by a dialer process.
// "listener" hands connections to a handler that keeps them without a goroutine: the
// listener's own share (socket, poller, Conn, accounting). "blocked_reader" keeps the
// connection goroutine blocked in a Read of a 1-byte buffer, the least any goroutine-per-
// connection handler costs. Run with -benchtime=1x.
func BenchmarkIdleConnMemory(b *testing.B) {
	const n = 10000
	for _, mode := range []string{"listener", "blocked_reader"} {
		b.Run(mode, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.ReportMetric(idleConnBytes(b, n, mode), "bytes/conn")
			}
		})
	}
}

func idleConnBytes(b *testing.B, n int, mode string) float64 {
	var mu sync.Mutex
	var held []*Conn
	var count atomic.Int64
	all := make(chan struct{})
	reg := serving("hold", func(*ChainContext, any) (FilterChainHandler, error) {
		return HandlerFunc(func(c *Conn) {
			if count.Add(1) == int64(n) {
				close(all)
			}
			if mode == "blocked_reader" {
				var one [1]byte
				c.Read(one[:])
				c.Close()
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}), nil
	})
	st, _ := stats.New(stats.Config{})
	m, err := NewManager(ManagerConfig{Stats: st, Services: reg, Extensions: testExtensions(b)})
	if err != nil {
		b.Fatal(err)
	}
	if err := m.AddStatic([]*config.Listener{listenerFromYAML(b, "{name: l, address: {socket_address: {address: 127.0.0.1, port_value: 0}}, filter_chains: [{filters: [{name: hold}]}]}")}); err != nil {
		b.Fatal(err)
	}
	if err := m.Start(); err != nil {
		b.Fatal(err)
	}
	runDone := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { m.Run(ctx); close(runDone) }()
	defer func() { cancel(); <-runDone }()

	before := memNow()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), dialerEnv+"="+addrOf(b, m, "l")+" "+strconv.Itoa(n))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		b.Fatalf("dialer: %q, %v", line, err)
	}
	select {
	case <-all:
	case <-time.After(time.Minute):
		b.Fatalf("accepted %d of %d connections", count.Load(), n)
	}
	after := memNow()
	runtime.KeepAlive(held)
	return float64(after-before) / float64(n)
}

// memNow returns heap in use plus stack in use after a collection.
func memNow() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}
