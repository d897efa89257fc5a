package httpproxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/filters/tap"
	"github.com/legateproxy/legate/internal/http1"
	"github.com/legateproxy/legate/listener"
)

// streamRecord is what a recording filter's Stream saw of one stream.
type streamRecord struct {
	Path         string
	RequestBody  string
	Trailers     http.Header
	Status       int
	HasServer    bool // the server header was in place when ResponseHeaders ran
	HasDate      bool
	Upstream     string // x-upstream response header
	ResponseBody string
	Events       []string // the order of the calls
}

// recordingFilter is a filter.StreamFilter that sends each stream's record when it ends.
type recordingFilter struct {
	records chan streamRecord
	closed  atomic.Int32
}

func (f *recordingFilter) OnRequest(*filter.Exchange) *filter.Reply { return nil }
func (f *recordingFilter) OnResponse(*filter.Exchange, http.Header) {}
func (f *recordingFilter) Close() error                             { f.closed.Add(1); return nil }

func (f *recordingFilter) NewStream(x *filter.Exchange) filter.Stream {
	if strings.HasPrefix(x.Request.Path, "/untracked") {
		return nil
	}
	return &recordingStream{f: f, rec: streamRecord{Path: x.Request.Path}}
}

type recordingStream struct {
	f           *recordingFilter
	rec         streamRecord
	reqB, respB bytes.Buffer
}

func (s *recordingStream) event(e string) {
	if n := len(s.rec.Events); n > 0 && s.rec.Events[n-1] == e {
		return // consecutive body chunks are one event
	}
	s.rec.Events = append(s.rec.Events, e)
}

func (s *recordingStream) RequestBody(p []byte) { s.event("request body"); s.reqB.Write(p) }
func (s *recordingStream) RequestTrailers(h http.Header) {
	s.event("request trailers")
	s.rec.Trailers = h.Clone()
}
func (s *recordingStream) ResponseHeaders(status int, h http.Header) {
	s.event("response headers")
	s.rec.Status = status
	s.rec.HasServer, s.rec.HasDate = h.Get("Server") != "", h.Get("Date") != ""
	s.rec.Upstream = h.Get("X-Upstream")
}
func (s *recordingStream) ResponseBody(p []byte)        { s.event("response body"); s.respB.Write(p) }
func (s *recordingStream) ResponseTrailers(http.Header) { s.event("response trailers") }
func (s *recordingStream) End() {
	s.event("end")
	s.rec.RequestBody, s.rec.ResponseBody = s.reqB.String(), s.respB.String()
	s.f.records <- s.rec
}

// filterServer serves the env's clusters through a second listener whose connection manager
// (hcm YAML) runs a recordingFilter, registered as "test.recording"; it returns the listener's
// address, the filter and the Handler.
func filterServer(t testing.TB, e *env, hcm string) (addr string, f *recordingFilter, h *Handler) {
	t.Helper()
	f = &recordingFilter{records: make(chan streamRecord, 16)}
	filters := filter.NewRegistry()
	if err := filters.Register("test.recording", func(*anypb.Any, *filter.Context) (filter.Filter, error) { return f, nil }); err != nil {
		t.Fatal(err)
	}
	addr, pb := serveFilters(t, e, filters, hcm)
	h = buildHandler(t, e, filters, pb)
	t.Cleanup(func() { h.Close() })
	return addr, f, h
}

// serveFilters serves the env's clusters through a listener whose connection manager (hcm
// YAML) builds its filters from filters; it returns the listener's address and the
// connection manager's configuration.
func serveFilters(t testing.TB, e *env, filters *filter.Registry, hcm string) (string, *hcmv3.HttpConnectionManager) {
	t.Helper()
	svc, err := NewService(Deps{Clusters: e.clusters, Pools: e.pools, Stats: e.store, Filters: filters})
	if err != nil {
		t.Fatal(err)
	}
	ext := testExtensions(t)
	var pb hcmv3.HttpConnectionManager
	fromYAML(t, hcm, &pb)
	anyHCM, err := anypb.New(&pb)
	if err != nil {
		t.Fatal(err)
	}
	var lpb listenerv3.Listener
	fromYAML(t, "name: filters\naddress: {socket_address: {address: 127.0.0.1, port_value: 0}}", &lpb)
	lpb.FilterChains = []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
		Name: config.HTTPConnectionManagerFilter, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: anyHCM},
	}}}}
	l, err := config.ListenerFromProto(&lpb, config.Limits{Extensions: ext})
	if err != nil {
		t.Fatal(err)
	}
	lm, err := listener.NewManager(listener.ManagerConfig{Stats: e.store, Extensions: ext, Services: listener.Services{config.HTTPConnectionManagerFilter: svc}})
	if err != nil {
		t.Fatal(err)
	}
	if err := lm.AddStatic([]*config.Listener{l}); err != nil {
		t.Fatal(err)
	}
	if err := lm.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lm.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return lm.Addrs()["filters"][0].String(), &pb
}

// buildHandler builds a Handler of pb over the env's clusters with filters, outside any
// listener.
func buildHandler(t testing.TB, e *env, filters *filter.Registry, pb *hcmv3.HttpConnectionManager) *Handler {
	t.Helper()
	cfg, err := config.HTTPConnectionManagerFromProto(pb)
	if err != nil {
		t.Fatal(err)
	}
	sh := &shared{deps: Deps{Clusters: e.clusters, Pools: e.pools, Filters: filters, Now: time.Now, AccessLogs: e.logs},
		stats: newStatsRegistry(nil), dates: newDateCache(time.Now)}
	h, err := sh.build(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// recordingHCM routes /local to a direct response and everything else to cluster web, with
// the recording filter before the router.
const recordingHCM = `stat_prefix: filters
http_protocol_options: {enable_trailers: true}
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: {prefix: "/local"}
      direct_response: {status: 202, body: {inline_string: "local answer"}}
    - match: {prefix: "/"}
      route: {cluster: web}
http_filters:
- name: test.recording
- name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`

// TestStreamFilterHooks: a filter.StreamFilter sees the request body and trailers, the final
// status and headers (server and date in place), the response body and the end, in order, on
// every downstream codec, for proxied requests and local replies.
func TestStreamFilterHooks(t *testing.T) {
	up := echo(t, "up")
	e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up.Listener.Addr().String())}, hcm: simpleHCM("web", "")})
	addr, f, _ := filterServer(t, e, recordingHCM)
	clients := []struct {
		name string
		addr string
		c    *http.Client
	}{
		{"http1 codec", addr, e.client()},
		{"h2c", addr, h2cClient(t)},
	}
	requestBody := strings.Repeat("0123456789", 2000) // several reads
	for _, cl := range clients {
		t.Run(cl.name, func(t *testing.T) {
			t.Run("proxied with trailers", func(t *testing.T) {
				req, _ := http.NewRequest(http.MethodPost, "http://"+cl.addr+"/echo", io.NopCloser(strings.NewReader(requestBody)))
				req.ContentLength = -1 // chunked in HTTP/1.1, so trailers can follow
				req.Trailer = http.Header{"X-Checksum": {"abc"}}
				resp, err := cl.c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				want := streamRecord{
					Path: "/echo", RequestBody: requestBody, Trailers: http.Header{"X-Checksum": {"abc"}},
					Status: 200, HasServer: true, HasDate: true, Upstream: "up", ResponseBody: string(body),
					Events: []string{"request body", "request trailers", "response headers", "response body", "end"},
				}
				if diff := cmp.Diff(want, next(t, f.records)); diff != "" {
					t.Errorf("record (-want +got):\n%s", diff)
				}
			})
			t.Run("local reply", func(t *testing.T) {
				resp, err := cl.c.Get("http://" + cl.addr + "/local")
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				want := streamRecord{
					Path: "/local", Status: 202, HasServer: true, HasDate: true, ResponseBody: "local answer",
					Events: []string{"response headers", "response body", "end"},
				}
				if diff := cmp.Diff(want, next(t, f.records)); diff != "" {
					t.Errorf("record (-want +got):\n%s", diff)
				}
			})
			t.Run("local reply to HEAD", func(t *testing.T) {
				resp, err := cl.c.Head("http://" + cl.addr + "/local")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				want := streamRecord{
					Path: "/local", Status: 202, HasServer: true, HasDate: true,
					Events: []string{"response headers", "end"},
				}
				if diff := cmp.Diff(want, next(t, f.records)); diff != "" {
					t.Errorf("record (-want +got):\n%s", diff)
				}
			})
		})
	}
	t.Run("no stream", func(t *testing.T) {
		resp, err := e.client().Get("http://" + addr + "/untracked")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		select {
		case r := <-f.records:
			t.Errorf("a stream the filter declined was recorded: %+v", r)
		default:
		}
	})
}

// next receives one record or fails after wait.
func next(t *testing.T, ch <-chan streamRecord) streamRecord {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(wait):
		t.Fatal("no stream record")
		return streamRecord{}
	}
}

// TestHandlerClosesFilters: closing a Handler closes its filters (io.Closer), once.
func TestHandlerClosesFilters(t *testing.T) {
	e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", deadAddr(t))}, hcm: simpleHCM("web", "")})
	_, f, h := filterServer(t, e, recordingHCM)
	h.Close()
	h.Close()
	if got := f.closed.Load(); got != 1 {
		t.Errorf("filter closed %d times after Handler.Close; want 1", got)
	}
}

var _ filter.StreamFilter = (*recordingFilter)(nil)

// FuzzTrailerLine: any line of a chunked trailer section is kept as a valid header field
// (token name, value without CR/LF/NUL) or dropped; nothing panics.
func FuzzTrailerLine(f *testing.F) {
	for _, s := range []string{"X-Checksum: abc", "x: ", ": v", "bad name: v", "k:\tv \t", "k: a\x00b", "k:v:w"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		s := getStream()
		defer putStream(s)
		s.arena = s.arena[:0]
		clear(s.trailers)
		s.addTrailer(line)
		for k, vs := range s.trailers {
			if !http1.ValidToken(k) {
				t.Errorf("kept name %q is not a token", k)
			}
			for _, v := range vs {
				if !http1.ValidValue(v) || v != http1.TrimOWS(v) {
					t.Errorf("kept value %q is not a trimmed field value", v)
				}
			}
		}
	})
}

// BenchmarkProxyStreamFilterIdle is BenchmarkProxy through a chain with a StreamFilter that
// declines the stream (as the tap filter does while nothing is tapped).
func BenchmarkProxyStreamFilterIdle(b *testing.B) { benchClients(b, streamFilterIdleClients(b)) }

// streamFilterIdleClients serves BenchmarkProxyStreamFilterIdle's proxy and returns how to
// connect a client to it.
func streamFilterIdleClients(tb testing.TB) func() *rawClient {
	e := newEnv(tb, envOptions{clusters: []string{staticCluster("web", "", rawUpstream(tb))}, hcm: simpleHCM("web", "")})
	addr, _, _ := filterServer(tb, e, recordingHCM)
	return func() *rawClient { return newRawClient(tb, addr, "/untracked") }
}

// TestHandlerCloseRemovesTap: the admin's /tap exists while a tap filter with an admin_config
// does; closing the last Handler that built one removes it.
func TestHandlerCloseRemovesTap(t *testing.T) {
	taps := tap.NewManager()
	var available []bool
	taps.Watch(func(a bool) { available = append(available, a) })
	filters := filtersOf(t, taps)
	hcm := strings.Replace(simpleHCM("web", ""), "http_filters:\n", `http_filters:
- name: envoy.filters.http.tap
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.tap.v3.Tap, common_config: {admin_config: {config_id: demo}}}
`, 1)
	var pb hcmv3.HttpConnectionManager
	fromYAML(t, hcm, &pb)
	e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", deadAddr(t))}, hcm: simpleHCM("web", "")})
	h1, h2 := buildHandler(t, e, filters, &pb), buildHandler(t, e, filters, &pb)
	h1.Close()
	if diff := cmp.Diff([]bool{true}, available); diff != "" {
		t.Errorf("/tap availability after closing one of two handlers (-want +got):\n%s", diff)
	}
	h2.Close()
	if diff := cmp.Diff([]bool{true, false}, available); diff != "" {
		t.Errorf("/tap availability after closing both handlers (-want +got):\n%s", diff)
	}
}
