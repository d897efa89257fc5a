package pool

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/stats"
)

// mustCluster converts a cluster's YAML.
func mustCluster(t testing.TB, yml string) *config.Cluster {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(yml))
	if err != nil {
		t.Fatal(err)
	}
	var pb clusterv3.Cluster
	if err := protojson.Unmarshal(js, &pb); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ClusterFromProto(&pb, config.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// newClusterManager builds a cluster manager holding the cluster described by yml.
func newClusterManager(t testing.TB, yml string) (*cluster.Manager, *stats.Store) {
	t.Helper()
	cfg := mustCluster(t, yml)
	store, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := cluster.NewManager(cluster.ManagerConfig{Stats: store})
	if err != nil {
		t.Fatal(err)
	}
	if err := cm.AddStatic([]*config.Cluster{cfg}); err != nil {
		t.Fatal(err)
	}
	return cm, store
}

// staticCluster returns YAML for a static cluster "up" with the given endpoints and extra
// top-level fields.
func staticCluster(extra string, addrs ...string) string {
	var b strings.Builder
	b.WriteString("name: up\ntype: STATIC\nconnect_timeout: 1s\n")
	b.WriteString(extra)
	b.WriteString("\nload_assignment:\n  cluster_name: up\n  endpoints:\n  - lb_endpoints:\n")
	for _, a := range addrs {
		h, p, _ := net.SplitHostPort(a)
		b.WriteString("    - endpoint: {address: {socket_address: {address: " + h + ", port_value: " + p + "}}}\n")
	}
	return b.String()
}

// newManager builds the pools of the single cluster "up" of cm.
func newManager(t testing.TB, cm *cluster.Manager, store *stats.Store, mut func(*ManagerConfig)) *Manager {
	t.Helper()
	cfg := ManagerConfig{Cluster: cm.Get("up"), Stats: store}
	if cfg.Cluster == nil {
		t.Fatal("cluster up is not active")
	}
	if mut != nil {
		mut(&cfg)
	}
	m, err := NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// onlyHost returns the cluster's only host.
func onlyHost(t testing.TB, m *Manager) *host.Host {
	t.Helper()
	hs := m.cluster.Snapshot().PrioritySet.Sets()[0].Hosts()
	if len(hs) != 1 {
		t.Fatalf("cluster has %d hosts; want 1", len(hs))
	}
	return hs[0]
}

// connCounter counts the connections an httptest server sees and reports their closing.
type connCounter struct {
	opened atomic.Int64
	closed chan struct{}
}

func newCountedServer(t testing.TB, h http.Handler) (*httptest.Server, *connCounter) {
	t.Helper()
	cc := &connCounter{closed: make(chan struct{}, 1000)}
	s := httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			cc.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			cc.closed <- struct{}{}
		}
	}
	return s, cc
}

// waitClosed waits for n connection closes.
func (cc *connCounter) waitClosed(t testing.TB, n int) {
	t.Helper()
	for range n {
		select {
		case <-cc.closed:
		case <-time.After(5 * time.Second):
			t.Fatal("timed out waiting for the upstream connection to close")
		}
	}
}

// waitFor polls cond until it holds or five seconds pass; for conditions no event reports
// (gauges moved by another goroutine).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// get runs one GET through the pool and returns the status and body.
func get(t testing.TB, m *Manager, h *host.Host, path string) (int, string) {
	t.Helper()
	var resp Response
	req := Request{Method: "GET", Path: path, Host: "example.com"}
	if err := m.RoundTrip(context.Background(), h, &req, &resp); err != nil {
		t.Fatalf("RoundTrip(%s) = %v; want nil", path, err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	resp.Close()
	return resp.StatusCode, string(b)
}

// rawServer is a minimal HTTP/1.1 upstream: for every request head it reads it answers with
// the fixed response; after perConn responses it closes the connection. It stops when the
// test ends.
type rawServer struct {
	ln       net.Listener
	response []byte
	perConn  int
	accepted atomic.Int64
	wg       sync.WaitGroup
}

func newRawServer(t testing.TB, response string, perConn int) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln, response: []byte(response), perConn: perConn}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(func() {
		ln.Close()
		s.wg.Wait()
	})
	return s
}

func (s *rawServer) addr() string { return s.ln.Addr().String() }

func (s *rawServer) serve() {
	defer s.wg.Done()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.accepted.Add(1)
		conns = append(conns, c)
		s.wg.Add(1)
		go s.serveConn(c)
	}
}

func (s *rawServer) serveConn(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	br := bufio.NewReader(c)
	for n := 0; s.perConn == 0 || n < s.perConn; n++ {
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(bytes.TrimRight(line, "\r\n")) == 0 {
				break
			}
		}
		if _, err := c.Write(s.response); err != nil {
			return
		}
	}
}

func claFromJSON(t testing.TB, js string) *endpointv3.ClusterLoadAssignment {
	t.Helper()
	var cla endpointv3.ClusterLoadAssignment
	if err := protojson.Unmarshal([]byte(js), &cla); err != nil {
		t.Fatal(err)
	}
	return &cla
}

// roundTrip runs one GET and discards the response; it is safe to call from any goroutine.
func roundTrip(m *Manager, h *host.Host, path string) error {
	var resp Response
	err := m.RoundTrip(context.Background(), h, &Request{Method: "GET", Path: path}, &resp)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Close()
	}
	return err
}
