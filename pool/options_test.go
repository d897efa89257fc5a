package pool

import (
	"bytes"
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
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// h2cServer starts a counted upstream speaking HTTP/2 with prior knowledge.
func h2cServer(t testing.TB, h http.Handler) (addr string, cc *connCounter) {
	t.Helper()
	srv, cc := newCountedServer(t, h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), cc
}

// typedOptions returns the cluster field typed_extension_protocol_options holding the upstream
// HttpProtocolOptions fields given.
func typedOptions(fields string) string {
	return "typed_extension_protocol_options:\n  envoy.extensions.upstreams.http.v3.HttpProtocolOptions:\n" +
		"    '@type': type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions\n    " + fields
}

// protocolCases are the two upstream protocols, each configured through the typed
// HttpProtocolOptions with the common options given.
func protocolCases(common string) []struct{ name, cluster string } {
	return []struct{ name, cluster string }{
		{"HTTP/1.1", typedOptions("explicit_http_config: {http_protocol_options: {}}\n    common_http_protocol_options: " + common)},
		{"HTTP/2", typedOptions("explicit_http_config: {http2_protocol_options: {}}\n    common_http_protocol_options: " + common)},
	}
}

// upstreamFor starts an upstream for the protocol of a protocolCases entry.
func upstreamFor(t *testing.T, name string, h http.Handler) (string, *connCounter) {
	if name == "HTTP/2" {
		return h2cServer(t, h)
	}
	srv, cc := newCountedServer(t, h)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), cc
}

// TestTypedExplicitHTTP2: explicit_http_config.http2_protocol_options in the typed options
// makes the upstream connection HTTP/2 (prior knowledge).
func TestTypedExplicitHTTP2(t *testing.T) {
	addr, _ := h2cServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Proto) }))
	cm, store := newClusterManager(t, staticCluster(typedOptions("explicit_http_config: {http2_protocol_options: {}}"), addr))
	m := newManager(t, cm, store, nil)
	if code, body := get(t, m, onlyHost(t, m), "/"); code != 200 || body != "HTTP/2.0" {
		t.Fatalf("response = %d %q; want 200 \"HTTP/2.0\"", code, body)
	}
	if got := m.st.UpstreamCxHTTP2Total.Value(); got != 1 {
		t.Errorf("upstream_cx_http2_total = %d; want 1", got)
	}
}

// TestUpstreamIdleConnectionClosed: common_http_protocol_options.idle_timeout, and
// max_connection_duration, close an idle upstream connection, HTTP/1.1 and HTTP/2 alike,
// counting upstream_cx_idle_timeout or upstream_cx_max_duration_reached.
func TestUpstreamIdleConnectionClosed(t *testing.T) {
	for _, opt := range []struct{ common, counter string }{
		{"{idle_timeout: 0.05s}", "upstream_cx_idle_timeout"},
		{"{max_connection_duration: 0.05s}", "upstream_cx_max_duration_reached"},
	} {
		for _, tc := range protocolCases(opt.common) {
			t.Run(opt.counter+"/"+tc.name, func(t *testing.T) {
				addr, cc := upstreamFor(t, tc.name, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
				cm, store := newClusterManager(t, staticCluster(tc.cluster, addr))
				m := newManager(t, cm, store, nil)
				get(t, m, onlyHost(t, m), "/")
				cc.waitClosed(t, 1)
				waitFor(t, "upstream_cx_active 0", func() bool { return m.st.UpstreamCxActive.Value() == 0 })
				want := map[string]uint64{"upstream_cx_idle_timeout": 0, "upstream_cx_max_duration_reached": 0, "upstream_cx_destroy_local": 1}
				want[opt.counter] = 1
				got := map[string]uint64{
					"upstream_cx_idle_timeout":         m.st.UpstreamCxIdleTimeout.Value(),
					"upstream_cx_max_duration_reached": m.st.UpstreamCxMaxDurationReached.Value(),
					"upstream_cx_destroy_local":        m.st.UpstreamCxDestroyLocal.Value(),
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("stats (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestUpstreamMaxConnectionDuration: at max_connection_duration a connection busy with a
// request takes no new one and closes when that request ends (counted in
// upstream_cx_max_duration_reached); the next request opens a new connection.
func TestUpstreamMaxConnectionDuration(t *testing.T) {
	for _, tc := range protocolCases("{max_connection_duration: 0.1s}") {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			addr, cc := upstreamFor(t, tc.name, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/slow" {
					<-release
				}
				io.WriteString(w, "ok")
			}))
			cm, store := newClusterManager(t, staticCluster(tc.cluster, addr))
			m := newManager(t, cm, store, nil)
			h := onlyHost(t, m)
			done := make(chan error, 1)
			go func() { done <- roundTrip(m, h, "/slow") }()
			waitFor(t, "upstream_cx_max_duration_reached 1", func() bool { return m.st.UpstreamCxMaxDurationReached.Value() == 1 })
			if got := m.st.UpstreamCxActive.Value(); got != 1 {
				t.Fatalf("upstream_cx_active = %d while its request runs; want 1 (drained, not closed)", got)
			}
			close(release)
			if err := <-done; err != nil {
				t.Fatalf("request on the draining connection: %v", err)
			}
			cc.waitClosed(t, 1)
			get(t, m, h, "/")
			if got := cc.opened.Load(); got != 2 {
				t.Errorf("upstream connections = %d; want 2 (the drained one is not reused)", got)
			}
		})
	}
}

// TestUpstreamMaxHeadersCount: a response head with more fields than max_headers_count is a
// protocol error (upstream_cx_protocol_error); one at the limit passes.
func TestUpstreamMaxHeadersCount(t *testing.T) {
	for _, tc := range protocolCases("{max_headers_count: 5}") {
		t.Run(tc.name, func(t *testing.T) {
			addr, _ := upstreamFor(t, tc.name, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := 2 // with Content-Length: 3 fields, or 7 for /many (Date is suppressed)
				if r.URL.Path == "/many" {
					n = 6
				}
				w.Header()["Date"] = nil
				for i := range n {
					w.Header().Set(fmt.Sprintf("X-H%d", i), "v")
				}
				w.Header().Set("Content-Length", "0")
			}))
			cm, store := newClusterManager(t, staticCluster(tc.cluster, addr))
			m := newManager(t, cm, store, nil)
			h := onlyHost(t, m)
			if code, _ := get(t, m, h, "/few"); code != 200 {
				t.Fatalf("/few = %d; want 200", code)
			}
			err := roundTrip(m, h, "/many")
			if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "max_headers_count") {
				t.Fatalf("/many: %v; want a protocol error naming max_headers_count", err)
			}
			// HTTP/1.1 loses the connection (a codec error, as in Envoy); HTTP/2 resets the
			// stream only.
			counter, name := &m.st.UpstreamCxProtocolError, "upstream_cx_protocol_error"
			if tc.name == "HTTP/2" {
				counter, name = &m.st.UpstreamRqTxReset, "upstream_rq_tx_reset"
			}
			if got := counter.Value(); got != 1 {
				t.Errorf("%s = %d; want 1", name, got)
			}
		})
	}
}

// TestUpstreamMaxStreamDuration: max_stream_duration resets an exchange still waiting for its
// response (ErrMaxStreamDuration, upstream_rq_max_duration_reached) and one whose body is
// still arriving, and leaves a fast exchange alone.
func TestUpstreamMaxStreamDuration(t *testing.T) {
	for _, tc := range protocolCases("{max_stream_duration: 0.2s}") {
		t.Run(tc.name, func(t *testing.T) {
			unblock := make(chan struct{})
			t.Cleanup(func() { close(unblock) })
			addr, _ := upstreamFor(t, tc.name, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/head":
					select {
					case <-unblock:
					case <-r.Context().Done():
					}
				case "/body":
					io.WriteString(w, "part")
					w.(http.Flusher).Flush()
					select {
					case <-unblock:
					case <-r.Context().Done():
					}
				default:
					io.WriteString(w, "ok")
				}
			}))
			cm, store := newClusterManager(t, staticCluster(tc.cluster, addr))
			m := newManager(t, cm, store, nil)
			h := onlyHost(t, m)
			if code, body := get(t, m, h, "/fast"); code != 200 || body != "ok" {
				t.Fatalf("/fast = %d %q", code, body)
			}
			err := roundTrip(m, h, "/head")
			if !errors.Is(err, ErrMaxStreamDuration) {
				t.Fatalf("/head: %v; want ErrMaxStreamDuration", err)
			}
			var resp Response
			if err := m.RoundTrip(context.Background(), h, &Request{Method: "GET", Path: "/body"}, &resp); err != nil {
				t.Fatalf("/body head: %v", err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Close()
			if err == nil || string(b) != "part" {
				t.Fatalf("/body read %q, %v; want \"part\" then an error", b, err)
			}
			if got := m.st.UpstreamRqMaxDurationReached.Value(); got != 2 {
				t.Errorf("upstream_rq_max_duration_reached = %d; want 2", got)
			}
		})
	}
}

// TestHTTP2StreamWindow: a response nobody reads makes its HTTP/2 upstream stop once the
// stream's receive window is used: per_connection_buffer_limit_bytes (not x/net's default of
// 4 MiB), or http2_protocol_options.initial_stream_window_size when smaller; reading on lets
// it continue.
func TestHTTP2StreamWindow(t *testing.T) {
	for _, tc := range []struct {
		name, cluster string
		window        int64
	}{
		{"buffer limit", "per_connection_buffer_limit_bytes: 65536\n" + typedOptions("explicit_http_config: {http2_protocol_options: {}}"), 64 << 10},
		{"initial_stream_window_size", typedOptions("explicit_http_config: {http2_protocol_options: {initial_stream_window_size: 100000}}"), 100000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var written atomic.Int64
			stop := make(chan struct{})
			addr, _ := h2cServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				chunk := make([]byte, 4<<10)
				for written.Load() < 8<<20 {
					select {
					case <-stop:
						return
					default:
					}
					n, err := w.Write(chunk)
					written.Add(int64(n))
					if err != nil {
						return
					}
					w.(http.Flusher).Flush()
				}
			}))
			defer close(stop)
			cm, store := newClusterManager(t, staticCluster(tc.cluster, addr))
			m := newManager(t, cm, store, nil)
			var resp Response
			if err := m.RoundTrip(context.Background(), onlyHost(t, m), &Request{Method: "GET", Path: "/"}, &resp); err != nil {
				t.Fatal(err)
			}
			defer resp.Close()
			// The upstream sends a window's worth, then waits for a WINDOW_UPDATE that never
			// comes: watch its writes stop for a while.
			waitFor(t, "the upstream to send the window", func() bool { return written.Load() >= tc.window/2 })
			settled := written.Load()
			for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end) && settled <= 2*tc.window; {
				time.Sleep(10 * time.Millisecond)
				settled = written.Load()
			}
			// The handler's own buffer (4 KiB) and one chunk may be in flight past the window.
			if settled > tc.window+16<<10 {
				t.Fatalf("upstream wrote %d bytes with nothing read; want at most about the %d byte window", settled, tc.window)
			}
			if _, err := io.CopyN(io.Discard, resp.Body, tc.window); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the upstream to continue once read", func() bool { return written.Load() > settled+tc.window/2 })
		})
	}
}

// TestHTTP2MaxConcurrentStreams: http2_protocol_options.max_concurrent_streams caps the
// streams Legate opens on one connection: a second request while one is in flight opens a
// second connection, though the upstream allows many streams.
func TestHTTP2MaxConcurrentStreams(t *testing.T) {
	arrived, release := make(chan struct{}, 2), make(chan struct{})
	addr, cc := h2cServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
	}))
	cm, store := newClusterManager(t, staticCluster(typedOptions("explicit_http_config: {http2_protocol_options: {max_concurrent_streams: 1}}"), addr))
	m := newManager(t, cm, store, nil)
	h := onlyHost(t, m)
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- roundTrip(m, h, "/") }()
	}
	for range 2 {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("both requests did not reach the upstream at once")
		}
	}
	close(release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := cc.opened.Load(); got != 2 {
		t.Errorf("upstream connections = %d; want 2 (one stream each)", got)
	}
}

// TestHTTP2ConnectionKeepalive: connection_keepalive sends a PING once the upstream has been
// silent for the interval, and closes the connection when the answer does not come within
// the timeout. The upstream is a scripted HTTP/2 server that never answers PINGs.
func TestHTTP2ConnectionKeepalive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	pinged, closed := make(chan struct{}, 1), make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(c, preface); err != nil {
			return
		}
		fr := http2.NewFramer(c, c)
		fr.WriteSettings()
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				close(closed) // Legate closed the connection
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					fr.WriteSettingsAck()
				}
			case *http2.HeadersFrame:
				var block bytes.Buffer
				hpack.NewEncoder(&block).WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
				fr.WriteHeaders(http2.HeadersFrameParam{StreamID: f.StreamID, BlockFragment: block.Bytes(), EndHeaders: true, EndStream: true})
			case *http2.PingFrame:
				if !f.IsAck() {
					select {
					case pinged <- struct{}{}:
					default:
					}
				}
			}
		}
	}()
	cm, store := newClusterManager(t, staticCluster(typedOptions("explicit_http_config: {http2_protocol_options: {connection_keepalive: {interval: 0.2s, timeout: 0.2s}}}"), ln.Addr().String()))
	m := newManager(t, cm, store, nil)
	if code, _ := get(t, m, onlyHost(t, m), "/"); code != 200 {
		t.Fatalf("status %d; want 200", code)
	}
	for _, ev := range []struct {
		what string
		ch   <-chan struct{}
	}{{"a PING", pinged}, {"the connection to close", closed}} {
		select {
		case <-ev.ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("timed out waiting for %s", ev.what)
		}
	}
}

// TestAutoConfigALPN: auto_config offers h2 and http/1.1 by ALPN and speaks what each TLS
// upstream chose: HTTP/2 with one that offers h2, HTTP/1.1 (on the connection it dialled,
// then reused) with one that does not.
func TestAutoConfigALPN(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "test ca"})
	leaf := ca.Issue(t, tlstest.Options{CommonName: "upstream", IPs: []string{"127.0.0.1"}})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	for _, tc := range []struct {
		name  string
		h2    bool
		proto string
	}{
		{"upstream offers h2", true, "HTTP/2.0"},
		{"upstream offers http/1.1 only", false, "HTTP/1.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, cc := newCountedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Proto) }))
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leaf.Cert.Raw}, PrivateKey: leaf.Key}}}
			srv.EnableHTTP2 = tc.h2
			srv.StartTLS()
			t.Cleanup(srv.Close)
			cm, store := newClusterManager(t, staticCluster(typedOptions("auto_config: {}")+"\n"+
				"transport_socket: {name: envoy.transport_sockets.tls, typed_config: {'@type': type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext}}",
				srv.Listener.Addr().String()))
			m := newManager(t, cm, store, func(c *ManagerConfig) {
				c.TLS = func(*host.Host) *tls.Config { return &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"} }
			})
			h := onlyHost(t, m)
			for i := range 3 {
				if code, body := get(t, m, h, "/"); code != 200 || body != tc.proto {
					t.Fatalf("request %d = %d %q; want 200 %q", i, code, body, tc.proto)
				}
			}
			if got := cc.opened.Load(); got != 1 {
				t.Errorf("upstream connections = %d; want 1", got)
			}
			want1, want2 := uint64(1), uint64(0)
			if tc.h2 {
				want1, want2 = 0, 1
			}
			if h1, h2 := m.st.UpstreamCxHTTP1Total.Value(), m.st.UpstreamCxHTTP2Total.Value(); h1 != want1 || h2 != want2 {
				t.Errorf("upstream_cx_http1_total, upstream_cx_http2_total = %d, %d; want %d, %d", h1, h2, want1, want2)
			}
		})
	}
}

// TestHTTP2WaitsForStreamAtConnectionLimit: with max_connections reached and the one
// connection's streams all taken, a request waits (as a pending request) for a stream to end
// instead of being sent beyond the stream limit, where the upstream would refuse it. Envoy
// queues it the same way.
func TestHTTP2WaitsForStreamAtConnectionLimit(t *testing.T) {
	arrived, release := make(chan string, 2), make(chan struct{})
	addr, cc := h2cServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.URL.Path
		if r.URL.Path == "/first" {
			<-release
		}
	}))
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the server's Close, which waits for its handlers
	cm, store := newClusterManager(t, staticCluster("circuit_breakers: {thresholds: [{max_connections: 1}]}\n"+
		typedOptions("explicit_http_config: {http2_protocol_options: {max_concurrent_streams: 1}}"), addr))
	m := newManager(t, cm, store, nil)
	h := onlyHost(t, m)
	errs := make(chan error, 2)
	go func() { errs <- roundTrip(m, h, "/first") }()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the first request did not reach the upstream")
	}
	go func() { errs <- roundTrip(m, h, "/second") }()
	waitFor(t, "the second request pending", func() bool { return m.st.UpstreamRqPendingActive.Value() == 1 })
	select {
	case p := <-arrived:
		t.Fatalf("%s reached the upstream while the only stream was taken", p)
	case err := <-errs:
		t.Fatalf("a request ended while the first was held: %v", err)
	default:
	}
	unblock()
	for range 2 {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the waiting request was not served once the stream ended")
		}
	}
	if got := cc.opened.Load(); got != 1 {
		t.Errorf("upstream connections = %d; want 1 (max_connections)", got)
	}
}
