package health

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/runtime"
)

// probeOnce builds the prober for s and runs one check against h.
func probeOnce(t *testing.T, s *config.HealthCheck, opts Options, h *host.Host) Result {
	t.Helper()
	if opts.ClusterName == "" {
		opts.ClusterName = "web"
	}
	p, err := newProber(s, &opts)
	if err != nil {
		t.Fatalf("newProber: %v", err)
	}
	sess := p.Session(h)
	defer sess.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return sess.Check(ctx)
}

func httpSpec(mod func(*config.HTTPHealthCheck)) *config.HealthCheck {
	return spec(func(s *config.HealthCheck) {
		s.Kind = config.HTTPHealthCheckKind
		s.TCP = nil
		s.HTTP = &config.HTTPHealthCheck{Path: "/hc", Method: "GET", ResponseBufferSize: 1024,
			ExpectedStatuses: []config.StatusRange{{Start: 200, End: 201}}}
		if mod != nil {
			mod(s.HTTP)
		}
	})
}

func hostFor(t *testing.T, rawURL string) *host.Host {
	t.Helper()
	return newHost(t, strings.TrimPrefix(strings.TrimPrefix(rawURL, "http://"), "https://"), 0)
}

// seenRequest records what the upstream received.
type seenRequest struct {
	Method, Path, Host, Proto, UserAgent, Body string
	Header                                     http.Header
}

func recordingServer(t *testing.T, respond func(w http.ResponseWriter)) (*httptest.Server, *seenRequest) {
	var mu sync.Mutex
	seen := &seenRequest{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		*seen = seenRequest{Method: r.Method, Path: r.URL.RequestURI(), Host: r.Host, Proto: r.Proto,
			UserAgent: r.UserAgent(), Body: string(body), Header: r.Header.Clone()}
		mu.Unlock()
		respond(w)
	}))
	t.Cleanup(srv.Close)
	return srv, seen
}

func TestHTTPVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mod     func(*config.HTTPHealthCheck)
		respond func(w http.ResponseWriter)
		want    Result
	}{
		{"200 passes", nil, func(w http.ResponseWriter) {}, Result{Outcome: Succeeded, HTTPStatus: 200}},
		{"204 fails by default", nil, func(w http.ResponseWriter) { w.WriteHeader(204) },
			Result{Outcome: Failed, Failure: Active, HTTPStatus: 204}},
		{"expected range", func(h *config.HTTPHealthCheck) { h.ExpectedStatuses = []config.StatusRange{{Start: 200, End: 300}} },
			func(w http.ResponseWriter) { w.WriteHeader(204) }, Result{Outcome: Succeeded, HTTPStatus: 204}},
		{"retriable", func(h *config.HTTPHealthCheck) { h.RetriableStatuses = []config.StatusRange{{Start: 503, End: 504}} },
			func(w http.ResponseWriter) { w.WriteHeader(503) }, Result{Outcome: Failed, Failure: Active, Retriable: true, HTTPStatus: 503}},
		{"immediate fail header", nil, func(w http.ResponseWriter) {
			w.Header().Set("x-envoy-immediate-health-check-fail", "true")
			w.WriteHeader(503)
		}, Result{Outcome: Failed, Failure: Active, ImmediateFail: true, HTTPStatus: 503}},
		{"degraded", nil, func(w http.ResponseWriter) { w.Header().Set("x-envoy-degraded", "") },
			Result{Outcome: SucceededDegraded, HTTPStatus: 200}},
		{"receive matches in order", func(h *config.HTTPHealthCheck) { h.Receive = [][]byte{[]byte("up"), []byte("ok")} },
			func(w http.ResponseWriter) { io.WriteString(w, "status: up and ok") }, Result{Outcome: Succeeded, HTTPStatus: 200}},
		{"receive out of order", func(h *config.HTTPHealthCheck) { h.Receive = [][]byte{[]byte("ok"), []byte("up")} },
			func(w http.ResponseWriter) { io.WriteString(w, "status: up and ok") }, Result{Outcome: Failed, Failure: Active, HTTPStatus: 200}},
		{"receive beyond buffer", func(h *config.HTTPHealthCheck) { h.Receive = [][]byte{[]byte("ok")}; h.ResponseBufferSize = 4 },
			func(w http.ResponseWriter) { io.WriteString(w, "....ok") }, Result{Outcome: Failed, Failure: Active, HTTPStatus: 200}},
		{"service name matches", func(h *config.HTTPHealthCheck) { h.ServiceNameMatcher = prefixMatch(t, "web") },
			func(w http.ResponseWriter) { w.Header().Set("x-envoy-upstream-healthchecked-cluster", "web-prod") },
			Result{Outcome: Succeeded, VerifiedCluster: true, HTTPStatus: 200}},
		{"service name mismatch", func(h *config.HTTPHealthCheck) { h.ServiceNameMatcher = prefixMatch(t, "web") },
			func(w http.ResponseWriter) { w.Header().Set("x-envoy-upstream-healthchecked-cluster", "api") },
			Result{Outcome: Failed, Failure: Active, VerifiedCluster: true, HTTPStatus: 200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := recordingServer(t, tc.respond)
			srv.Start()
			got := probeOnce(t, httpSpec(tc.mod), Options{}, hostFor(t, srv.URL))
			got.Err = nil
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Check (-want +got):\n%s", diff)
			}
		})
	}
}

func prefixMatch(t *testing.T, prefix string) *config.StringMatch {
	m, err := config.StringMatchFromProto("m", stringMatcherPrefix(prefix))
	if err != nil {
		t.Fatalf("StringMatchFromProto: %v", err)
	}
	return m
}

func TestHTTPRequest(t *testing.T) {
	srv, seen := recordingServer(t, func(w http.ResponseWriter) {})
	srv.Start()
	s := httpSpec(func(h *config.HTTPHealthCheck) {
		h.Path = "/healthz?full=1"
		h.Method = "POST"
		h.Send = []byte("ping")
		h.RequestHeadersToAdd = []config.HeaderToAdd{
			{Key: "x-a", Value: "1"},
			{Key: "x-a", Value: "2", Action: config.AppendIfExistsOrAdd},
			{Key: "x-b", Value: "over", Action: config.OverwriteIfExistsOrAdd},
			{Key: "x-c", Value: "", Action: config.AppendIfExistsOrAdd},
			{Key: "x-d", Value: "", KeepEmptyValue: true},
			{Key: "x-e", Value: "never", Action: config.OverwriteIfExists},
		}
		h.RequestHeadersToRemove = []string{"user-agent"}
	})
	if r := probeOnce(t, s, Options{}, hostFor(t, srv.URL)); r.Outcome != Succeeded {
		t.Fatalf("Check = %+v; want success", r)
	}
	got := seenRequest{Method: seen.Method, Path: seen.Path, Host: seen.Host, Proto: seen.Proto, UserAgent: seen.UserAgent, Body: seen.Body}
	want := seenRequest{Method: "POST", Path: "/healthz?full=1", Host: "web", Proto: "HTTP/1.1", Body: "ping"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	hdr := map[string][]string{}
	for _, k := range []string{"X-A", "X-B", "X-C", "X-D", "X-E", "Accept-Encoding"} {
		if v, ok := seen.Header[k]; ok {
			hdr[k] = v
		}
	}
	wantHdr := map[string][]string{"X-A": {"1", "2"}, "X-B": {"over"}, "X-D": {""}}
	if diff := cmp.Diff(wantHdr, hdr); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}

	// The configured host wins over the cluster name, and the user agent is Envoy's.
	s = httpSpec(func(h *config.HTTPHealthCheck) { h.Host = "svc.internal" })
	probeOnce(t, s, Options{}, hostFor(t, srv.URL))
	if seen.Host != "svc.internal" || seen.UserAgent != "Envoy/HC" || seen.Method != "GET" {
		t.Errorf("host %q, user-agent %q, method %q; want svc.internal, Envoy/HC, GET", seen.Host, seen.UserAgent, seen.Method)
	}
}

func TestHTTP2PriorKnowledge(t *testing.T) {
	srv, seen := recordingServer(t, func(w http.ResponseWriter) {})
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	r := probeOnce(t, httpSpec(func(h *config.HTTPHealthCheck) { h.HTTP2 = true }), Options{}, hostFor(t, srv.URL))
	if r.Outcome != Succeeded || seen.Proto != "HTTP/2.0" || seen.Host != "web" {
		t.Errorf("Check = %+v over %q with :authority %q; want success over HTTP/2.0 with web", r, seen.Proto, seen.Host)
	}
}

func TestHTTPTLS(t *testing.T) {
	for _, tc := range []struct {
		name  string
		http2 bool
		want  string
	}{{"http1", false, "HTTP/1.1"}, {"h2", true, "HTTP/2.0"}} {
		t.Run(tc.name, func(t *testing.T) {
			srv, seen := recordingServer(t, func(w http.ResponseWriter) {})
			srv.EnableHTTP2 = true
			srv.StartTLS()
			var asked atomic.Int32
			opts := Options{TLSConfigFor: func(h *host.Host) *tls.Config {
				asked.Add(1)
				return &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, ServerName: "example.com"}
			}}
			r := probeOnce(t, httpSpec(func(h *config.HTTPHealthCheck) { h.HTTP2 = tc.http2 }), opts, hostFor(t, srv.URL))
			if r.Outcome != Succeeded || seen.Proto != tc.want || asked.Load() != 1 {
				t.Errorf("Check = %+v over %q (TLSConfigFor called %d times); want success over %s, 1 call", r, seen.Proto, asked.Load(), tc.want)
			}
		})
	}
}

func TestHTTPReuseConnection(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reuse bool
		want  int32
	}{{"reused", true, 1}, {"not reused", false, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := recordingServer(t, func(w http.ResponseWriter) {})
			var conns atomic.Int32
			srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
				if st == http.StateNew {
					conns.Add(1)
				}
			}
			srv.Start()
			s := httpSpec(nil)
			s.ReuseConnection = tc.reuse
			opts := Options{ClusterName: "web"}
			p, err := newProber(s, &opts)
			if err != nil {
				t.Fatalf("newProber: %v", err)
			}
			sess := p.Session(hostFor(t, srv.URL))
			defer sess.Close()
			for i := range 3 {
				if r := sess.Check(context.Background()); r.Outcome != Succeeded {
					t.Fatalf("check %d = %+v", i, r)
				}
			}
			if got := conns.Load(); got != tc.want {
				t.Errorf("connections = %d; want %d", got, tc.want)
			}
		})
	}
}

func TestHTTPNetworkFailure(t *testing.T) {
	addr := closedAddr(t)
	r := probeOnce(t, httpSpec(nil), Options{}, newHost(t, addr, 0))
	if r.Outcome != Failed || r.Failure != Network {
		t.Errorf("Check against a closed port = %+v; want a network failure", r)
	}
}

func TestMatchPayloads(t *testing.T) {
	for _, tc := range []struct {
		name string
		segs []string
		buf  string
		want bool
	}{
		{"none", nil, "", true},
		{"one", []string{"ab"}, "xxabyy", true},
		{"in order", []string{"ab", "cd"}, "abcd", true},
		{"overlap not allowed", []string{"abc", "cd"}, "abcd", false},
		{"reversed", []string{"cd", "ab"}, "abcd", false},
		{"missing", []string{"zz"}, "abcd", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var segs [][]byte
			for _, s := range tc.segs {
				segs = append(segs, []byte(s))
			}
			if got := matchPayloads(segs, []byte(tc.buf)); got != tc.want {
				t.Errorf("matchPayloads(%q, %q) = %v; want %v", tc.segs, tc.buf, got, tc.want)
			}
		})
	}
}

func FuzzMatchPayloads(f *testing.F) {
	f.Add([]byte("ab"), []byte("cd"), []byte("xxabcdyy"))
	f.Fuzz(func(t *testing.T, a, b, buf []byte) {
		got := matchPayloads([][]byte{a, b}, buf)
		// Brute force: some a, then some b starting at or after a's end.
		want := false
		for i := 0; i+len(a) <= len(buf) && !want; i++ {
			if !bytes.Equal(buf[i:i+len(a)], a) {
				continue
			}
			for j := i + len(a); j+len(b) <= len(buf); j++ {
				if bytes.Equal(buf[j:j+len(b)], b) {
					want = true
					break
				}
			}
		}
		if got != want {
			t.Errorf("matchPayloads(%q, %q in %q) = %v; want %v", a, b, buf, got, want)
		}
	})
}

func TestHTTPVerifyClusterRuntime(t *testing.T) {
	srv, _ := recordingServer(t, func(w http.ResponseWriter) {
		w.Header().Set("x-envoy-upstream-healthchecked-cluster", "api")
	})
	srv.Start()
	rt, err := runtime.New(runtime.Config{Layers: []runtime.LayerConfig{{Name: "static",
		Static: map[string]any{"health_check": map[string]any{"verify_cluster": 0.0}}}}})
	if err != nil {
		t.Fatal(err)
	}
	s := httpSpec(func(h *config.HTTPHealthCheck) { h.ServiceNameMatcher = prefixMatch(t, "web") })
	r := probeOnce(t, s, Options{Runtime: rt}, hostFor(t, srv.URL))
	if r.Outcome != Succeeded || r.VerifiedCluster {
		t.Errorf("with health_check.verify_cluster 0: Check = %+v; want success without verification", r)
	}
}

func TestTLSALPNOverride(t *testing.T) {
	s := httpSpec(nil)
	s.TLSALPN = []string{"custom"}
	opts := Options{TLSConfigFor: func(*host.Host) *tls.Config { return &tls.Config{NextProtos: []string{"h2"}} }}
	tg := target{spec: s, opts: &opts}
	h := newHost(t, "127.0.0.1:1", 0)
	if got := tg.tlsConfig(h, "http/1.1").NextProtos; !cmp.Equal(got, []string{"custom"}) {
		t.Errorf("NextProtos with tls_options.alpn_protocols = %q; want [custom]", got)
	}
	s.TLSALPN = nil
	if got := tg.tlsConfig(h, "http/1.1").NextProtos; !cmp.Equal(got, []string{"h2"}) {
		t.Errorf("NextProtos from the cluster = %q; want [h2]", got)
	}
	opts.TLSConfigFor = func(*host.Host) *tls.Config { return &tls.Config{} }
	if got := tg.tlsConfig(h, "http/1.1").NextProtos; !cmp.Equal(got, []string{"http/1.1"}) {
		t.Errorf("NextProtos default = %q; want [http/1.1]", got)
	}
	opts.TLSConfigFor = func(*host.Host) *tls.Config { return nil }
	if tg.tlsConfig(h) != nil {
		t.Errorf("nil TLS config from the hook did not mean plain text")
	}
}
