package pool

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/cputime"
)

// withProcs runs the test with GOMAXPROCS n, so that new pools get n idle lists.
func withProcs(t testing.TB, n int) {
	prev := runtime.GOMAXPROCS(n)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

// spreadIdle moves hp's idle connections onto its idle lists in turn, starting at list
// first, as requests finishing on different Ps would leave them.
func spreadIdle(hp *hostPool, first int) {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	for i, c := range hp.takeAllIdleLocked() {
		hp.h1[c] = struct{}{}
		lists := hp.idle.lists()
		s := lists[(first+i)%len(lists)]
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.n.Store(int32(len(s.conns)))
		c.shard.Store(s)
		s.mu.Unlock()
	}
}

// hostPoolOf returns the pool of m's only host.
func hostPoolOf(t testing.TB, m *Manager) *hostPool {
	t.Helper()
	hp, err := m.pool(onlyHost(t, m))
	if err != nil {
		t.Fatal(err)
	}
	return hp
}

// idleSharingSetup runs the test at procs Ps, against an upstream that counts its connections,
// through a manager of one static host.
func idleSharingSetup(t *testing.T, procs int) (*Manager, *host.Host, *connCounter) {
	t.Helper()
	withProcs(t, procs)
	srv, cc := newCountedServer(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Start()
	t.Cleanup(srv.Close)
	cm, store := newClusterManager(t, staticCluster("", srv.Listener.Addr().String()))
	m := newManager(t, cm, store, nil)
	return m, onlyHost(t, m), cc
}

// TestIdleSharedAcrossPs: sequential requests from many goroutines, whose connection is left
// idle on another P's list each time, all reuse the one connection.
func TestIdleSharedAcrossPs(t *testing.T) {
	m, h, cc := idleSharingSetup(t, 4)
	hp := hostPoolOf(t, m)
	for i := range 40 {
		errc := make(chan error, 1)
		go func() { errc <- roundTrip(m, h, fmt.Sprintf("/r%d", i)) }()
		if err := <-errc; err != nil {
			t.Fatalf("request %d = %v", i, err)
		}
		if n := len(hp.idle.lists()); n != 4 {
			t.Fatalf("idle lists = %d; want 4 (one per P)", n)
		}
		spreadIdle(hp, i)
	}
	if got := cc.opened.Load(); got != 1 {
		t.Errorf("upstream connections = %d; want 1", got)
	}
	if got := m.st.UpstreamCxHTTP1Total.Value(); got != 1 {
		t.Errorf("upstream_cx_http1_total = %d; want 1", got)
	}
}

// TestIdleShardsMaxConnections: concurrent requests from more goroutines than Ps and than
// max_connections open exactly max_connections connections, all of them idle at the end.
func TestIdleShardsMaxConnections(t *testing.T) {
	withProcs(t, 4)
	srv, cc := newCountedServer(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Start()
	defer srv.Close()
	cm, store := newClusterManager(t, staticCluster("circuit_breakers: {thresholds: [{max_connections: 2}]}", srv.Listener.Addr().String()))
	m := newManager(t, cm, store, nil)
	h := onlyHost(t, m)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if err := roundTrip(m, h, fmt.Sprintf("/g%d/r%d", g, i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := cc.opened.Load(); got > 2 {
		t.Errorf("upstream connections = %d; want at most 2 (max_connections)", got)
	}
	hp := hostPoolOf(t, m)
	hp.mu.Lock()
	idle, open := hp.idleCount(), len(hp.h1)
	hp.mu.Unlock()
	if want := int(cc.opened.Load()); idle != want || open != want {
		t.Errorf("idle, open connections = %d, %d; want %d, %d", idle, open, want, want)
	}
	if got := m.st.UpstreamCxActive.Value(); got != uint64(cc.opened.Load()) {
		t.Errorf("upstream_cx_active = %d; want %d", got, cc.opened.Load())
	}
}

// TestIdleShardsWalked: idle connections spread over every P's list are all closed when the
// host fails, and all of them when the pool drains.
func TestIdleShardsWalked(t *testing.T) {
	for _, tt := range []struct {
		name string
		end  func(m *Manager, hp *hostPool)
	}{
		{"host failed", func(m *Manager, hp *hostPool) { m.HostFailed(hp.host, false) }},
		{"host failed, close connections", func(m *Manager, hp *hostPool) { m.HostFailed(hp.host, true) }},
		{"drain", func(m *Manager, hp *hostPool) { hp.drain() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			withProcs(t, 4)
			const n = 4
			var arrived sync.WaitGroup
			arrived.Add(n)
			all := make(chan struct{})
			go func() { arrived.Wait(); close(all) }()
			srv, cc := newCountedServer(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				arrived.Done()
				<-all // n requests in flight at once: n connections
			}))
			srv.Start()
			defer srv.Close()
			cm, store := newClusterManager(t, staticCluster("", srv.Listener.Addr().String()))
			m := newManager(t, cm, store, nil)
			h := onlyHost(t, m)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := roundTrip(m, h, fmt.Sprintf("/r%d", i)); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			hp := hostPoolOf(t, m)
			spreadIdle(hp, 0)
			for i, s := range hp.idle.lists() {
				if got := s.n.Load(); got != 1 {
					t.Fatalf("idle list %d holds %d connections; want 1", i, got)
				}
			}
			tt.end(m, hp)
			cc.waitClosed(t, n)
			hp.mu.Lock()
			idle, open := hp.idleCount(), len(hp.h1)
			hp.mu.Unlock()
			if idle != 0 || open != 0 {
				t.Errorf("idle, open connections = %d, %d; want 0, 0", idle, open)
			}
			if got := m.st.UpstreamCxActive.Value(); got != 0 {
				t.Errorf("upstream_cx_active = %d; want 0", got)
			}
		})
	}
}

// BenchmarkIdleGetPut takes an idle HTTP/1.1 connection of one host and returns it, from
// every P at once (parallel) and from one (serial), reporting the process CPU per iteration:
// a lock or list every request writes shows up as more CPU per iteration in parallel. Each
// take includes the idle check's MSG_PEEK on the socket.
func BenchmarkIdleGetPut(b *testing.B) {
	s := newRawServer(b, benchResponse, 0)
	cm, store := newClusterManager(b, staticCluster("", s.addr()))
	m := newManager(b, cm, store, nil)
	hp := hostPoolOf(b, m)
	prio, err := m.priority(config.PriorityDefault)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	getPut := func() {
		c, err := hp.getH1(ctx, prio)
		if err != nil {
			b.Error(err)
			return
		}
		hp.releaseH1(c, true)
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		cputime.Report(b, func() {
			for b.Loop() {
				getPut()
			}
		})
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		cputime.Report(b, func() {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					getPut()
				}
			})
		})
	})
}

// BenchmarkIdleLists is BenchmarkIdleGetPut without the socket: the idle lists alone, one
// host, a take and a return per iteration.
func BenchmarkIdleLists(b *testing.B) {
	for _, par := range []bool{false, true} {
		name := map[bool]string{false: "serial", true: "parallel"}[par]
		b.Run(name, func(b *testing.B) {
			hp := &hostPool{}
			for range 2 * runtime.GOMAXPROCS(0) {
				hp.putIdle(&h1conn{}, 0)
			}
			b.ReportAllocs()
			cputime.Report(b, func() {
				if !par {
					for b.Loop() {
						hp.putIdle(hp.popIdle(), 0)
					}
					return
				}
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						hp.putIdle(hp.popIdle(), 0)
					}
				})
			})
		})
	}
}

// TestIdleListsFollowGOMAXPROCS raises GOMAXPROCS after a pool's idle lists were made for one
// P: requests on the new Ps grow the table to a list per P, each on lines of its own, holding
// the list the one connection was idle on, and every request, one at a time from goroutines on
// all the Ps, reuses that connection wherever the last one left it.
func TestIdleListsFollowGOMAXPROCS(t *testing.T) {
	m, h, cc := idleSharingSetup(t, 1)
	if err := roundTrip(m, h, "/first"); err != nil {
		t.Fatal(err)
	}
	hp := hostPoolOf(t, m)
	first := hp.idle.lists()
	if len(first) != 1 || first[0].n.Load() != 1 {
		t.Fatalf("at GOMAXPROCS 1: %d idle lists; want 1, holding the connection", len(first))
	}
	const procs = 4
	runtime.GOMAXPROCS(procs)
	// Goroutines on every P take turns for a request until the table grew to a list per P (the
	// runtime starts the idle Ps' threads when goroutines are runnable); bounded, not timed.
	var turn sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, procs)
	for g := range procs {
		wg.Go(func() {
			for i := 0; i < 2000 && len(hp.idle.lists()) < procs; i++ {
				turn.Lock()
				err := roundTrip(m, h, fmt.Sprintf("/g%d/r%d", g, i))
				turn.Unlock()
				if err != nil {
					errs <- err
					return
				}
				runtime.Gosched()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	lists := hp.idle.lists()
	if len(lists) != procs {
		t.Fatalf("after requests on %d Ps: %d idle lists; want one per P", procs, len(lists))
	}
	if lists[0] != first[0] {
		t.Error("the list the connection was idle on was replaced when the table grew")
	}
	lines := map[uintptr]int{}
	for i, s := range lists {
		for a := uintptr(unsafe.Pointer(s)); a < uintptr(unsafe.Pointer(s))+unsafe.Sizeof(*s); a += 64 {
			if other, ok := lines[a/64]; ok {
				t.Fatalf("the idle lists of Ps %d and %d share a cache line", other, i)
			}
			lines[a/64] = i
		}
	}
	if got := cc.opened.Load(); got != 1 {
		t.Errorf("upstream connections = %d; want 1 (the idle one found from every P)", got)
	}
	hp.mu.Lock()
	idle, open := hp.idleCount(), len(hp.h1)
	hp.mu.Unlock()
	if idle != 1 || open != 1 {
		t.Errorf("idle, open connections = %d, %d; want 1, 1", idle, open)
	}
}
