package httpproxy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"testing"
	"time"

	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/accesslog/als"
	"github.com/legateproxy/legate/accesslog/als/alstest"
	"github.com/legateproxy/legate/lb"
)

// alsHCM routes to web and logs to the gRPC access log service of cluster als.
func alsHCM(bufferBytes int) string {
	return fmt.Sprintf(webHCM+`access_log:
- name: envoy.access_loggers.http_grpc
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.access_loggers.grpc.v3.HttpGrpcAccessLogConfig
    common_config:
      log_name: edge
      transport_api_version: V3
      grpc_service: {envoy_grpc: {cluster_name: als}}
      buffer_size_bytes: %d
      buffer_flush_interval: 0.05s
    additional_request_headers_to_log: ["x-custom"]
    additional_response_headers_to_log: ["x-upstream"]
`, bufferBytes)
}

// clusterDialer dials a host of the named cluster that (*e)'s cluster manager picks. *e may be
// set after the dialer is made, as long as it is before the first dial: the env needs the
// access log manager that dials.
func clusterDialer(e **env) func(ctx context.Context, cluster string) (net.Conn, error) {
	return func(ctx context.Context, name string) (net.Conn, error) {
		cl := (*e).clusters.Get(name)
		if cl == nil {
			return nil, fmt.Errorf("no cluster %q", name)
		}
		h, err := cl.Pick(&lb.Context{})
		if err != nil {
			return nil, err
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", h.Address())
	}
}

// newALSEnv starts a proxy whose access log streams to the cluster als at alsAddr.
func newALSEnv(t *testing.T, alsAddr string, bufferBytes int) (*env, *als.Manager) {
	t.Helper()
	up := echo(t, "a")
	var e *env
	// The manager's stats go to a store of their own: the env's is made by newEnv.
	m := alstest.RunManager(t, clusterDialer(&e))
	e = newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String()), staticCluster("als", "", alsAddr)},
		hcm:      alsHCM(bufferBytes),
		als:      m,
	})
	return e, m
}

// TestGRPCAccessLog sends requests through a real listener and checks what a real
// AccessLogService receives: the identifier on the stream's first message, then one
// HTTPAccessLogEntry per request with its method, path, status, cluster and the additional
// headers; and that with the service down the buffer fills and further entries are dropped
// and counted.
func TestGRPCAccessLog(t *testing.T) {
	t.Run("entries reach the service", func(t *testing.T) {
		srv := alstest.Start(t)
		e, m := newALSEnv(t, srv.Addr, 16384)
		c := e.client()
		for i := range 3 {
			e.get(c, fmt.Sprintf("/p%d", i), "x-custom", "v1")
		}
		var got []string
		first := true
		deadline := time.After(wait)
		for len(got) < 3 {
			select {
			case msg := <-srv.Msgs:
				if first {
					id := msg.GetIdentifier()
					if id.GetLogName() != "edge" || id.GetNode().GetId() != "node-1" {
						t.Errorf("first message identifier = %v; want log_name edge, node node-1", id)
					}
					first = false
				} else if msg.GetIdentifier() != nil {
					t.Errorf("later message carries an identifier: %v", msg.GetIdentifier())
				}
				for _, le := range msg.GetHttpLogs().GetLogEntry() {
					got = append(got, fmt.Sprintf("%s %s %d %s %s %s %s",
						le.GetRequest().GetRequestMethod(), le.GetRequest().GetPath(),
						le.GetResponse().GetResponseCode().GetValue(), le.GetCommonProperties().GetUpstreamCluster(),
						le.GetRequest().GetRequestHeaders()["x-custom"], le.GetResponse().GetResponseHeaders()["x-upstream"],
						le.GetProtocolVersion()))
				}
			case <-deadline:
				t.Fatalf("received %q; want 3 entries", got)
			}
		}
		sort.Strings(got) // connections may log in any order
		want := []string{"GET /p0 200 web v1 a HTTP11", "GET /p1 200 web v1 a HTTP11", "GET /p2 200 web v1 a HTTP11"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("entries (-want +got):\n%s", diff)
		}
		if w, d := m.Stats().LogsWritten.Value(), m.Stats().LogsDropped.Value(); w != 3 || d != 0 {
			t.Errorf("logs_written = %d, logs_dropped = %d; want 3, 0", w, d)
		}
	})
	t.Run("service started later: the next flush connects", func(t *testing.T) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := lis.Addr().String()
		lis.Close()
		e, _ := newALSEnv(t, addr, 1)
		c := e.client()
		e.get(c, "/before")
		lis, err = net.Listen("tcp", addr)
		if err != nil {
			t.Skipf("cannot listen on %s again: %v", addr, err)
		}
		srv := alstest.Serve(t, lis)
		deadline := time.After(wait)
		for i := 0; ; i++ {
			e.get(c, fmt.Sprintf("/after%d", i))
			select {
			case msg := <-srv.Msgs:
				if msg.GetIdentifier().GetLogName() != "edge" {
					t.Errorf("first message after reconnecting: identifier %v; want log_name edge", msg.GetIdentifier())
				}
				return
			case <-deadline:
				t.Fatal("no entry reached the service after it started")
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	t.Run("service down: buffer full then dropped", func(t *testing.T) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := lis.Addr().String()
		lis.Close() // nothing listens: every stream fails
		e, m := newALSEnv(t, addr, 1)
		c := e.client()
		c.Transport.(*http.Transport).MaxConnsPerHost = 1
		for i := range 5 {
			e.get(c, fmt.Sprintf("/p%d", i))
		}
		// Requests are logged before the next is read on the single connection; the fifth is
		// logged once its response was sent, so wait for the count.
		deadline := time.After(wait)
		for m.Stats().LogsWritten.Value()+m.Stats().LogsDropped.Value() < 5 {
			select {
			case <-deadline:
				t.Fatalf("logs_written + logs_dropped = %d; want 5", m.Stats().LogsWritten.Value()+m.Stats().LogsDropped.Value())
			case <-time.After(5 * time.Millisecond):
			}
		}
		if w, d := m.Stats().LogsWritten.Value(), m.Stats().LogsDropped.Value(); w != 1 || d != 4 {
			t.Errorf("logs_written = %d, logs_dropped = %d; want 1 (the buffer of 1 byte), 4", w, d)
		}
	})
}
