package pool

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/breaker"
	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// counts is the subset of cluster and host stats the tests compare.
type counts struct {
	CxTotal, CxActive, CxConnectFail, RqTotal, RqActive, RqSuccess, RqError, RqTimeout int64
	UpstreamCxTotal, UpstreamCxActive, UpstreamCxDestroyLocal, UpstreamCxMaxRequests   uint64
	UpstreamRqTotal, UpstreamRqActive, UpstreamCxHTTP1, UpstreamCxHTTP2                uint64
}

func countsOf(m *Manager, h *host.Host) counts {
	hs := m.cluster.Snapshot().HostStats(h)
	rq := hs.Rq()
	st := m.st
	return counts{
		CxTotal: int64(hs.CxTotal.Load()), CxActive: hs.CxActive.Load(), CxConnectFail: int64(hs.CxConnectFail.Load()),
		RqTotal: int64(rq.Total), RqActive: rq.Active, RqSuccess: int64(rq.Success),
		RqError: int64(rq.Error), RqTimeout: int64(rq.Timeout),
		UpstreamCxTotal: st.UpstreamCxTotal.Value(), UpstreamCxActive: st.UpstreamCxActive.Value(),
		UpstreamCxDestroyLocal: st.UpstreamCxDestroyLocal.Value(), UpstreamCxMaxRequests: st.UpstreamCxMaxRequests.Value(),
		UpstreamRqTotal: st.UpstreamRqTotal.Value(), UpstreamRqActive: st.UpstreamRqActive.Value(),
		UpstreamCxHTTP1: st.UpstreamCxHTTP1Total.Value(), UpstreamCxHTTP2: st.UpstreamCxHTTP2Total.Value(),
	}
}

func TestKeepAlive(t *testing.T) {
	tests := []struct {
		name       string
		extra      string
		requests   int
		wantConns  int64
		wantCounts counts
		wantClosed int
	}{
		{
			name: "reused", requests: 5, wantConns: 1,
			wantCounts: counts{CxTotal: 1, CxActive: 1, RqTotal: 5, RqSuccess: 5, UpstreamCxTotal: 1, UpstreamCxActive: 1,
				UpstreamRqTotal: 5, UpstreamCxHTTP1: 1},
		},
		{
			name: "max_requests_per_connection 1", extra: "max_requests_per_connection: 1", requests: 5, wantConns: 5,
			wantCounts: counts{CxTotal: 5, RqTotal: 5, RqSuccess: 5, UpstreamCxTotal: 5, UpstreamCxDestroyLocal: 5,
				UpstreamCxMaxRequests: 5, UpstreamRqTotal: 5, UpstreamCxHTTP1: 5},
			wantClosed: 5,
		},
		{
			name: "max_requests_per_connection 2", extra: "max_requests_per_connection: 2", requests: 5, wantConns: 3,
			wantCounts: counts{CxTotal: 3, CxActive: 1, RqTotal: 5, RqSuccess: 5, UpstreamCxTotal: 3, UpstreamCxActive: 1,
				UpstreamCxDestroyLocal: 2, UpstreamCxMaxRequests: 2, UpstreamRqTotal: 5, UpstreamCxHTTP1: 3},
			wantClosed: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, cc := newCountedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "%s %s", r.Host, r.URL.Path)
			}))
			srv.Start()
			defer srv.Close()
			cm, store := newClusterManager(t, staticCluster(tt.extra, srv.Listener.Addr().String()))
			m := newManager(t, cm, store, nil)
			h := onlyHost(t, m)
			for i := range tt.requests {
				code, body := get(t, m, h, fmt.Sprintf("/r%d", i))
				if want := fmt.Sprintf("example.com /r%d", i); code != 200 || body != want {
					t.Fatalf("response = %d %q; want 200 %q", code, body, want)
				}
			}
			cc.waitClosed(t, tt.wantClosed)
			if got := cc.opened.Load(); got != tt.wantConns {
				t.Errorf("upstream connections = %d; want %d", got, tt.wantConns)
			}
			if d := cmp.Diff(tt.wantCounts, countsOf(m, h)); d != "" {
				t.Errorf("stats (-want +got):\n%s", d)
			}
		})
	}
}

func TestConnectFailure(t *testing.T) {
	addr := "127.0.0.1:1" // unbindable without privileges: connections are refused
	cm, store := newClusterManager(t, staticCluster("", addr))
	m := newManager(t, cm, store, nil)
	h := onlyHost(t, m)
	var resp Response
	err := m.RoundTrip(context.Background(), h, &Request{Method: "GET", Path: "/"}, &resp)
	if !errors.Is(err, ErrConnectFailure) || errors.Is(err, ErrConnectTimeout) {
		t.Fatalf("RoundTrip = %v; want ErrConnectFailure (not a timeout)", err)
	}
	want := counts{CxTotal: 1, CxConnectFail: 1, RqTotal: 1, RqError: 1, UpstreamCxTotal: 1, UpstreamRqTotal: 1}
	if d := cmp.Diff(want, countsOf(m, h)); d != "" {
		t.Errorf("stats (-want +got):\n%s", d)
	}
	if got := m.st.UpstreamCxConnectFail.Value(); got != 1 {
		t.Errorf("upstream_cx_connect_fail = %d; want 1", got)
	}
}

// fullBacklogListener returns the address of a socket that listens with a backlog of 0 and
// never accepts, after filling its accept queue: further connection attempts hang.
func fullBacklogListener(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			break // the queue is full
		}
		t.Cleanup(func() { c.Close() })
		if i > 64 {
			t.Skip("the kernel keeps accepting connections into a backlog-0 queue")
		}
	}
	return addr
}

func TestConnectTimeout(t *testing.T) {
	addr := fullBacklogListener(t)
	cm, store := newClusterManager(t, strings.Replace(staticCluster("", addr), "connect_timeout: 1s", "connect_timeout: 0.2s", 1))
	m := newManager(t, cm, store, nil)
	h := onlyHost(t, m)
	var resp Response
	err := m.RoundTrip(context.Background(), h, &Request{Method: "GET", Path: "/"}, &resp)
	if !errors.Is(err, ErrConnectTimeout) {
		t.Fatalf("RoundTrip = %v; want ErrConnectTimeout", err)
	}
	if got, want := [3]uint64{m.st.UpstreamCxConnectTimeout.Value(), m.st.UpstreamCxConnectFail.Value(),
		m.cluster.Snapshot().HostStats(h).CxConnectFail.Load()}, [3]uint64{1, 1, 1}; got != want {
		t.Errorf("connect_timeout, connect_fail, host cx_connect_fail = %v; want %v", got, want)
	}
}

// blockingServer answers each request once release is closed; arrived gets one value per
// request received.
func blockingServer(t *testing.T) (addr string, arrived chan struct{}, release chan struct{}) {
	arrived, release = make(chan struct{}, 100), make(chan struct{})
	srv, _ := newCountedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		io.WriteString(w, "ok")
	}))
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), arrived, release
}

func TestBreakerOverflow(t *testing.T) {
	tests := []struct {
		name       string
		thresholds string
		// wantErr: the second request's outcome, while the first holds the only connection.
		wantPendingOverflow, wantCxOverflow uint64
		secondWaits                         bool
	}{
		{name: "max_requests", thresholds: "max_requests: 1", wantPendingOverflow: 1},
		{name: "max_connections queues", thresholds: "max_connections: 1, max_pending_requests: 1", secondWaits: true, wantPendingOverflow: 1, wantCxOverflow: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, arrived, release := blockingServer(t)
			cm, store := newClusterManager(t, staticCluster("circuit_breakers: {thresholds: [{"+tt.thresholds+"}]}", addr))
			m := newManager(t, cm, store, nil)
			h := onlyHost(t, m)
			var wg sync.WaitGroup
			defer wg.Wait()
			first := make(chan error, 2)
			wg.Add(1)
			go func() {
				defer wg.Done()
				first <- roundTrip(m, h, "/first")
			}()
			select {
			case <-arrived:
			case err := <-first:
				t.Fatalf("first request = %v before reaching the upstream", err)
			}
			var second chan error
			if tt.secondWaits {
				second = make(chan error, 1)
				wg.Add(1)
				go func() {
					defer wg.Done()
					second <- roundTrip(m, h, "/second")
				}()
				waitFor(t, "a pending request", func() bool { return m.st.UpstreamRqPendingActive.Value() == 1 })
			}
			var resp Response
			err := m.RoundTrip(context.Background(), h, &Request{Method: "GET", Path: "/overflow"}, &resp)
			if !errors.Is(err, breaker.ErrOverflow) {
				t.Errorf("RoundTrip = %v; want breaker.ErrOverflow", err)
			}
			close(release)
			if err := <-first; err != nil {
				t.Error(err)
			}
			if second != nil {
				if err := <-second; err != nil {
					t.Errorf("queued request = %v; want nil", err)
				}
			}
			if got := m.st.UpstreamRqPendingOverflow.Value(); got != tt.wantPendingOverflow {
				t.Errorf("upstream_rq_pending_overflow = %d; want %d", got, tt.wantPendingOverflow)
			}
			if got := m.st.UpstreamCxOverflow.Value(); got < tt.wantCxOverflow {
				t.Errorf("upstream_cx_overflow = %d; want >= %d", got, tt.wantCxOverflow)
			}
		})
	}
}

func TestPendingOverflowWhileConnecting(t *testing.T) {
	// A request that must wait for a new connection is pending (Envoy): with
	// max_pending_requests 0 it overflows.
	cm, store := newClusterManager(t, staticCluster("circuit_breakers: {thresholds: [{max_pending_requests: 0}]}", "127.0.0.1:1"))
	m := newManager(t, cm, store, nil)
	var resp Response
	err := m.RoundTrip(context.Background(), onlyHost(t, m), &Request{Method: "GET", Path: "/"}, &resp)
	if !errors.Is(err, breaker.ErrOverflow) {
		t.Fatalf("RoundTrip = %v; want breaker.ErrOverflow", err)
	}
	if got := m.st.UpstreamRqPendingOverflow.Value(); got != 1 {
		t.Errorf("upstream_rq_pending_overflow = %d; want 1", got)
	}
	if got := m.st.UpstreamCxTotal.Value(); got != 0 {
		t.Errorf("upstream_cx_total = %d; want 0", got)
	}
}

func TestHTTP2(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "test ca"})
	leaf := ca.Issue(t, tlstest.Options{CommonName: "upstream", IPs: []string{"127.0.0.1"}})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	tests := []struct {
		name string
		tls  bool
	}{
		{name: "h2c prior knowledge"},
		{name: "TLS with ALPN h2", tls: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, cc := newCountedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "%s %v %s", r.Proto, r.TLS != nil, r.Header.Get("X-Test"))
			}))
			var hook func(*host.Host) *tls.Config
			if tt.tls {
				srv.EnableHTTP2 = true
				srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leaf.Cert.Raw}, PrivateKey: leaf.Key}}}
				srv.StartTLS()
				hook = func(*host.Host) *tls.Config {
					return &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", NextProtos: []string{"h2", "http/1.1"}}
				}
			} else {
				srv.Config.Protocols = new(http.Protocols)
				srv.Config.Protocols.SetUnencryptedHTTP2(true)
				srv.Start()
			}
			defer srv.Close()
			cm, store := newClusterManager(t, staticCluster("http2_protocol_options: {}", srv.Listener.Addr().String()))
			m := newManager(t, cm, store, func(c *ManagerConfig) { c.TLS = hook })
			h := onlyHost(t, m)
			const n = 8
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var resp Response
					req := Request{Method: "GET", Path: "/", Header: []Field{{Name: "x-test", Value: fmt.Sprint(i)}}}
					if err := m.RoundTrip(context.Background(), h, &req, &resp); err != nil {
						errs <- err
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Close()
					if want := fmt.Sprintf("HTTP/2.0 %v %d", tt.tls, i); string(b) != want || !resp.HTTP2 {
						errs <- fmt.Errorf("body = %q (HTTP2 %v); want %q over HTTP/2", b, resp.HTTP2, want)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if got := cc.opened.Load(); got != 1 {
				t.Errorf("upstream connections = %d; want 1 (streams multiplexed)", got)
			}
			want := counts{CxTotal: 1, CxActive: 1, RqTotal: n, RqSuccess: n, UpstreamCxTotal: 1, UpstreamCxActive: 1,
				UpstreamRqTotal: n, UpstreamCxHTTP2: 1}
			if d := cmp.Diff(want, countsOf(m, h)); d != "" {
				t.Errorf("stats (-want +got):\n%s", d)
			}
		})
	}
}

func TestIdleTimeout(t *testing.T) {
	srv, cc := newCountedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Start()
	defer srv.Close()
	cm, store := newClusterManager(t, staticCluster("common_http_protocol_options: {idle_timeout: 0.02s}", srv.Listener.Addr().String()))
	m := newManager(t, cm, store, nil)
	h := onlyHost(t, m)
	get(t, m, h, "/")
	cc.waitClosed(t, 1)
	waitFor(t, "cx_active 0", func() bool { return m.st.UpstreamCxActive.Value() == 0 })
	if got := m.st.UpstreamCxIdleTimeout.Value(); got != 1 {
		t.Errorf("upstream_cx_idle_timeout = %d; want 1", got)
	}
}

func TestStaleKeepAliveRetried(t *testing.T) {
	// The upstream closes every connection after one response without saying so.
	s := newRawServer(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 1)
	cm, store := newClusterManager(t, staticCluster("", s.addr()))
	m := newManager(t, cm, store, nil)
	h := onlyHost(t, m)
	for i := range 3 {
		if code, body := get(t, m, h, "/"); code != 200 || body != "ok" {
			t.Fatalf("request %d = %d %q; want 200 \"ok\"", i, code, body)
		}
	}
	if got := s.accepted.Load(); got < 3 {
		t.Errorf("upstream connections = %d; want >= 3", got)
	}
}

// edsCluster is an EDS cluster "up"; its hosts come from assign.
const edsCluster = `name: up
type: EDS
connect_timeout: 1s
eds_cluster_config: {eds_config: {ads: {}}}
`

func assign(t *testing.T, c *cluster.Cluster, addrs ...string) {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"cluster_name":"up","endpoints":[{"lb_endpoints":[`)
	for i, a := range addrs {
		h, p, _ := net.SplitHostPort(a)
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"endpoint":{"address":{"socket_address":{"address":%q,"port_value":%s}}}}`, h, p)
	}
	b.WriteString("]}]}")
	if err := c.ApplyAssignment(claFromJSON(t, b.String())); err != nil {
		t.Fatal(err)
	}
}

func TestDrainOnHostRemoval(t *testing.T) {
	addrA, arrived, release := blockingServer(t)
	srvB, _ := newCountedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srvB.Start()
	defer srvB.Close()
	cm, store := newClusterManager(t, edsCluster)
	c := cm.Warming()[0]
	assign(t, c, addrA, srvB.Listener.Addr().String())
	m := newManager(t, cm, store, nil)
	var a *host.Host
	for _, h := range c.Snapshot().PrioritySet.Sets()[0].Hosts() {
		if h.Address() == addrA {
			a = h
		}
	}
	// Two connections to A: one busy, one idle.
	done := make(chan struct{})
	go func() {
		defer close(done)
		get(t, m, a, "/busy")
	}()
	<-arrived
	idleDone := make(chan struct{})
	go func() {
		defer close(idleDone)
		get(t, m, a, "/idle")
	}()
	<-arrived
	release <- struct{}{} // one of them finishes; its connection goes idle
	waitFor(t, "one idle connection", func() bool {
		hp, _ := m.pool(a)
		return hp.idleCount() == 1
	})
	assign(t, c, srvB.Listener.Addr().String())
	m.Sync()
	if _, ok := m.pools.Load(a); ok {
		t.Error("pool of the removed host is still listed")
	}
	// The drained pool is no longer attached to the host either: if the host is used again
	// (back in the cluster, or picked from an older snapshot), it gets a new pool.
	if hp, _ := m.pool(a); hp.draining.Load() {
		t.Error("the removed host's drained pool is still found through the host")
	}
	if got := m.st.UpstreamCxActive.Value(); got != 1 {
		t.Errorf("upstream_cx_active after drain = %d; want 1 (the busy connection)", got)
	}
	close(release)
	<-done
	<-idleDone
	if got, want := [2]uint64{m.st.UpstreamCxActive.Value(), m.st.UpstreamCxDestroyLocal.Value()}, [2]uint64{0, 2}; got != want {
		t.Errorf("upstream_cx_active, upstream_cx_destroy_local = %v; want %v", got, want)
	}
}

// Two Managers holding the same host (a cluster's old and new pools across an update) each
// find their own pool of it, whichever attached last.
func TestManagersShareAHost(t *testing.T) {
	srv, _ := newCountedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Start()
	defer srv.Close()
	cm, store := newClusterManager(t, edsCluster)
	c := cm.Warming()[0]
	assign(t, c, srv.Listener.Addr().String())
	a := c.Snapshot().PrioritySet.Sets()[0].Hosts()[0]
	m1 := newManager(t, cm, store, nil)
	m2 := newManager(t, cm, store, nil)
	p1, _ := m1.pool(a)
	p2, _ := m2.pool(a)
	if p1 == p2 || p1.m != m1 || p2.m != m2 {
		t.Fatalf("pools %p (of %p) and %p (of %p); want one pool per manager", p1, p1.m, p2, p2.m)
	}
	for i := 0; i < 3; i++ {
		if q1, _ := m1.pool(a); q1 != p1 {
			t.Fatalf("manager 1 found %p; want its pool %p", q1, p1)
		}
		if q2, _ := m2.pool(a); q2 != p2 {
			t.Fatalf("manager 2 found %p; want its pool %p", q2, p2)
		}
	}
	get(t, m1, a, "/one")
	get(t, m2, a, "/two")
	m2.Close()
	if _, err := m2.pool(a); err == nil {
		t.Error("a closed manager still hands out its host's pool")
	}
	if q1, _ := m1.pool(a); q1 != p1 {
		t.Errorf("after the other manager closed, manager 1 found %p; want %p", q1, p1)
	}
}

func TestCloseOnHealthFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	cm, store := newClusterManager(t, staticCluster("close_connections_on_host_health_failure: true", ln.Addr().String()))
	m := newManager(t, cm, store, nil)
	h := onlyHost(t, m)
	tc, err := m.ConnectTCP(context.Background(), h, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	up := <-accepted
	defer up.Close()
	m.Sync()
	up.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := up.Read(make([]byte, 1)); !errors.Is(err, syscall.ETIMEDOUT) && !isTimeout(err) {
		t.Fatalf("healthy host: upstream read = %v; want a timeout (connection open)", err)
	}
	h.SetHealthFlag(host.FailedActiveHC)
	m.Sync()
	up.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := up.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("unhealthy host: upstream read = %v; want io.EOF (connection closed)", err)
	}
	if got := m.st.UpstreamCxActive.Value(); got != 0 {
		t.Errorf("upstream_cx_active = %d; want 0", got)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestRequestTimeout(t *testing.T) {
	addr, arrived, release := blockingServer(t)
	defer close(release)
	cm, store := newClusterManager(t, staticCluster("", addr))
	m := newManager(t, cm, store, nil)
	h := onlyHost(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var resp Response
	err := m.RoundTrip(ctx, h, &Request{Method: "GET", Path: "/"}, &resp)
	<-arrived
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("RoundTrip = %v; want context.DeadlineExceeded", err)
	}
	hs := m.cluster.Snapshot().HostStats(h)
	if got, want := [3]uint64{m.st.UpstreamRqTimeout.Value(), hs.Rq().Timeout, hs.Rq().Error}, [3]uint64{1, 1, 1}; got != want {
		t.Errorf("upstream_rq_timeout, rq_timeout, rq_error = %v; want %v", got, want)
	}
}

func TestHostFailed(t *testing.T) {
	tests := []struct {
		name             string
		closeConnections bool
		wantCxActive     uint64 // after the failure: the TCP connection survives a plain drain
	}{
		{name: "drain HTTP connections", wantCxActive: 1},
		{name: "close_connections_on_host_health_failure", closeConnections: true, wantCxActive: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, cc := newCountedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			srv.Start()
			defer srv.Close()
			cm, store := newClusterManager(t, staticCluster("", srv.Listener.Addr().String()))
			m := newManager(t, cm, store, nil)
			h := onlyHost(t, m)
			get(t, m, h, "/") // leaves one idle HTTP connection
			tc, err := m.ConnectTCP(context.Background(), h, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer tc.Close()
			m.HostFailed(h, tt.closeConnections)
			cc.waitClosed(t, 1)
			if got := m.st.UpstreamCxActive.Value(); got != tt.wantCxActive {
				t.Errorf("upstream_cx_active = %d; want %d", got, tt.wantCxActive)
			}
			get(t, m, h, "/") // the pool stays usable with a new connection
			if got := cc.opened.Load(); got != 3 {
				t.Errorf("upstream connections = %d; want 3 (HTTP, TCP, new HTTP)", got)
			}
		})
	}
}

func TestHTTP2MaxRequestsPerConnection(t *testing.T) {
	srv, cc := newCountedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	defer srv.Close()
	cm, store := newClusterManager(t, staticCluster("http2_protocol_options: {}\nmax_requests_per_connection: 2", srv.Listener.Addr().String()))
	m := newManager(t, cm, store, nil)
	h := onlyHost(t, m)
	for range 4 {
		get(t, m, h, "/")
	}
	cc.waitClosed(t, 2)
	want := counts{CxTotal: 2, RqTotal: 4, RqSuccess: 4, UpstreamCxTotal: 2, UpstreamCxDestroyLocal: 2,
		UpstreamCxMaxRequests: 2, UpstreamRqTotal: 4, UpstreamCxHTTP2: 2}
	if d := cmp.Diff(want, countsOf(m, h)); d != "" {
		t.Errorf("stats (-want +got):\n%s", d)
	}
}

func TestUseDownstreamProtocol(t *testing.T) {
	srv, _ := newCountedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	defer srv.Close()
	cm, store := newClusterManager(t, staticCluster(`typed_extension_protocol_options:
  envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
    "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
    use_downstream_protocol_config: {}`, srv.Listener.Addr().String()))
	m := newManager(t, cm, store, nil)
	h := onlyHost(t, m)
	for _, tt := range []struct {
		name  string
		http2 bool
		want  string
	}{{"HTTP/1.1 downstream", false, "HTTP/1.1"}, {"HTTP/2 downstream", true, "HTTP/2.0"}} {
		t.Run(tt.name, func(t *testing.T) {
			var resp Response
			if err := m.RoundTrip(context.Background(), h, &Request{Method: "GET", Path: "/", HTTP2: tt.http2}, &resp); err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Close()
			if string(b) != tt.want {
				t.Errorf("upstream protocol = %q; want %q", b, tt.want)
			}
		})
	}
}

func TestRegistry(t *testing.T) {
	cm, r := newStaticRegistry(t)
	m := r.Get("up")
	if m == nil || r.Get("up") != m {
		t.Fatalf("Get(up) = %p then %p; want the same non-nil Manager", m, r.Get("up"))
	}
	if got := r.Get("missing"); got != nil {
		t.Errorf("Get(missing) = %p; want nil", got)
	}
	api := mustCluster(t, strings.Replace(staticCluster("", "127.0.0.1:2"), "name: up", "name: api", 1))
	if _, err := cm.AddOrUpdate(api, "1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "cluster api active", func() bool { return cm.Get("api") != nil })
	am := r.Get("api")
	if am == nil {
		t.Fatal("Get(api) = nil; want a Manager")
	}
	cm.Remove("api") // the cluster manager's OnRetire closes its pools: no Sync, no polling
	am.mu.Lock()
	closed := am.closed
	am.mu.Unlock()
	if !closed || r.Get("api") != nil {
		t.Errorf("after removal: Manager closed = %v, Get(api) = %p; want true, nil", closed, r.Get("api"))
	}
	if r.Get("up") != m {
		t.Error("Get(up) changed after an unrelated removal")
	}
}

// TestRegistryFollowsClusterEvents: a host that leaves a cluster has its pool drained as the
// cluster publishes its new host set (OnSnapshot), with no Sync and no polling.
func TestRegistryFollowsClusterEvents(t *testing.T) {
	srvA, _ := newCountedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srvA.Start()
	defer srvA.Close()
	srvB, _ := newCountedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srvB.Start()
	defer srvB.Close()
	cm, store := newClusterManager(t, edsCluster)
	r, err := NewRegistry(RegistryConfig{Clusters: cm, Stats: store})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := cm.Warming()[0]
	assign(t, c, srvA.Listener.Addr().String(), srvB.Listener.Addr().String())
	waitFor(t, "cluster up active", func() bool { return cm.Get("up") != nil })
	m := r.Get("up")
	var a *host.Host
	for _, h := range c.Snapshot().PrioritySet.Sets()[0].Hosts() {
		if h.Address() == srvA.Listener.Addr().String() {
			a = h
		}
	}
	if code, _ := get(t, m, a, "/"); code != http.StatusOK {
		t.Fatalf("GET via A = %d; want 200", code)
	}
	if _, ok := m.pools.Load(a); !ok {
		t.Fatal("no pool for A after a request")
	}
	assign(t, c, srvB.Listener.Addr().String()) // A leaves
	if _, ok := m.pools.Load(a); ok {
		t.Error("A's pool is still listed once A left the cluster")
	}
	if got := m.st.UpstreamCxActive.Value(); got != 0 {
		t.Errorf("upstream_cx_active = %d after A left; want 0 (its idle connection closed)", got)
	}
}

// TestRegistryDial: Legate's own gRPC channels (xDS, the access-log service) reach a cluster
// through the pools' dialer, so its connection is counted on the cluster and a refused
// connection is a connect failure.
func TestRegistryDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cm, store := newClusterManager(t, staticCluster("", ln.Addr().String()))
	r, err := NewRegistry(RegistryConfig{Clusters: cm, Stats: store})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	conn, err := r.Dial(context.Background(), "up")
	if err != nil {
		t.Fatal(err)
	}
	up, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	io.WriteString(conn, "ping")
	b := make([]byte, 4)
	if _, err := io.ReadFull(up, b); err != nil || string(b) != "ping" {
		t.Fatalf("upstream read %q, %v; want ping", b, err)
	}
	m := r.Get("up")
	if got := m.st.UpstreamCxActive.Value(); got != 1 {
		t.Errorf("upstream_cx_active = %d with the channel open; want 1", got)
	}
	conn.Close()
	if got := m.st.UpstreamCxActive.Value(); got != 0 {
		t.Errorf("upstream_cx_active = %d after close; want 0", got)
	}
	if _, err := r.Dial(context.Background(), "missing"); err == nil {
		t.Error("Dial(missing) succeeded")
	}

	refused, rstore := newClusterManager(t, staticCluster("", "127.0.0.1:1"))
	rr, err := NewRegistry(RegistryConfig{Clusters: refused, Stats: rstore})
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Close()
	if _, err := rr.Dial(context.Background(), "up"); !errors.Is(err, ErrConnectFailure) {
		t.Errorf("Dial to a refusing host = %v; want ErrConnectFailure", err)
	}
}

// TestActiveRequestsTracked checks that a request counts in its host's ActiveRequests only on a
// cluster whose balancer reads them (least request), and in the host's rq_active always.
func TestActiveRequestsTracked(t *testing.T) {
	for _, tt := range []struct {
		policy     string
		wantActive int64
	}{{"ROUND_ROBIN", 0}, {"LEAST_REQUEST", 1}} {
		t.Run(tt.policy, func(t *testing.T) {
			addr, arrived, release := blockingServer(t)
			cm, store := newClusterManager(t, staticCluster("lb_policy: "+tt.policy, addr))
			m := newManager(t, cm, store, nil)
			h := onlyHost(t, m)
			done := make(chan int, 1)
			go func() {
				var resp Response
				if err := m.RoundTrip(context.Background(), h, &Request{Method: "GET", Path: "/"}, &resp); err != nil {
					done <- 0
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Close()
				done <- resp.StatusCode
			}()
			<-arrived
			hs := m.cluster.Snapshot().HostStats(h)
			if got, rq := h.ActiveRequests(), hs.Rq().Active; got != tt.wantActive || rq != 1 {
				t.Errorf("in flight: ActiveRequests, rq_active = %d, %d; want %d, 1", got, rq, tt.wantActive)
			}
			close(release)
			if code := <-done; code != 200 {
				t.Fatalf("status = %d; want 200", code)
			}
			if got, rq := h.ActiveRequests(), hs.Rq(); got != 0 || rq.Active != 0 || rq.Total != 1 || rq.Success != 1 {
				t.Errorf("after: ActiveRequests = %d, host rq = %+v; want 0 and total 1, success 1, active 0", got, rq)
			}
		})
	}
}

// TestRegistryGetAgain: the Manager a caller kept is given back while it is the active
// cluster's, and Get's answer once the cluster was replaced or removed, or the registry closed.
func TestRegistryGetAgain(t *testing.T) {
	cm, r := newStaticRegistry(t)
	m := r.GetAgain("up", nil)
	if m == nil || r.GetAgain("up", m) != m || r.Get("up") != m {
		t.Fatalf("GetAgain(up) = %p, then %p; want Get's Manager %p", m, r.GetAgain("up", m), r.Get("up"))
	}
	if got := r.GetAgain("missing", m); got != nil {
		t.Errorf("GetAgain(missing, up's Manager) = %p; want nil", got)
	}
	apiAt := func(addr, version string) *cluster.Cluster {
		t.Helper()
		if _, err := cm.AddOrUpdate(mustCluster(t, strings.Replace(staticCluster("", addr), "name: up", "name: api", 1)), version); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "cluster api at "+addr, func() bool {
			c := cm.Get("api")
			return c != nil && c.Version() == version
		})
		return cm.Get("api")
	}
	apiAt("127.0.0.1:2", "1")
	am := r.GetAgain("api", nil)
	if am == nil || r.GetAgain("api", am) != am {
		t.Fatalf("GetAgain(api) = %p, then %p; want the same Manager", am, r.GetAgain("api", am))
	}
	c2 := apiAt("127.0.0.1:3", "2")
	am2 := r.GetAgain("api", am)
	if am2 == nil || am2 == am || am2.Cluster() != c2 || !am.gone.Load() {
		t.Errorf("after the update: GetAgain(api, old) = %p, old closed %v; want a new Manager of the new cluster and the old closed", am2, am.gone.Load())
	}
	cm.Remove("api")
	if got := r.GetAgain("api", am2); got != nil {
		t.Errorf("after removal: GetAgain(api) = %p; want nil", got)
	}
	r.Close()
	if got := r.GetAgain("up", m); got != nil {
		t.Errorf("after Close: GetAgain(up) = %p; want nil", got)
	}
}

// newStaticRegistry is a Registry over a cluster manager holding the static cluster "up",
// closed when the test ends.
func newStaticRegistry(t *testing.T) (*cluster.Manager, *Registry) {
	t.Helper()
	cm, store := newClusterManager(t, staticCluster("", "127.0.0.1:1"))
	r, err := NewRegistry(RegistryConfig{Clusters: cm, Stats: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return cm, r
}
