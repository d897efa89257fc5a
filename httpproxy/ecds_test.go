package httpproxy

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	healthcheckv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/health_check/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	tapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/tap/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/filters/healthcheck"
	"github.com/legateproxy/legate/httpproxy/filters/tap"
)

// fakeExtensions is an ExtensionConfigProvider the test pushes configurations through. Like
// the xDS client, it offers a configuration to every watcher's type_urls, then to every
// watcher's check, before any watcher's update sees it (discarding what the checks built when
// a later one refuses), and hands a new watcher no configuration that does not suit it.
type fakeExtensions struct {
	mu        sync.Mutex
	gen       uint64
	cur       map[string]*corev3.TypedExtensionConfig
	watches   map[string][]*fakeWatch
	conflicts int
}

type fakeWatch struct {
	typeURLs []string
	check    func(*corev3.TypedExtensionConfig) (func(), error)
	update   func(uint64, *corev3.TypedExtensionConfig)
}

// vet runs the type_urls of ws, then their checks, on tc; on a refusal it discards what the
// checks before built.
func vet(ws []*fakeWatch, tc *corev3.TypedExtensionConfig) error {
	for _, w := range ws {
		if err := checkType(w.typeURLs, tc.GetTypedConfig().GetTypeUrl()); err != nil {
			return err
		}
	}
	var discards []func()
	for _, w := range ws {
		d, err := w.check(tc)
		if err != nil {
			for _, d := range discards {
				d()
			}
			return err
		}
		if d != nil {
			discards = append(discards, d)
		}
	}
	return nil
}

func newFakeExtensions() *fakeExtensions {
	return &fakeExtensions{cur: map[string]*corev3.TypedExtensionConfig{}, watches: map[string][]*fakeWatch{}}
}

func (f *fakeExtensions) WatchExtensionConfig(name string, cd *corev3.ExtensionConfigSource, check func(*corev3.TypedExtensionConfig) (func(), error),
	update func(uint64, *corev3.TypedExtensionConfig)) (*corev3.TypedExtensionConfig, uint64, func(), error) {
	w := &fakeWatch{typeURLs: cd.GetTypeUrls(), check: check, update: update}
	f.mu.Lock()
	f.watches[name] = append(f.watches[name], w)
	cur, gen := f.cur[name], f.gen
	f.mu.Unlock()
	if cur != nil && vet([]*fakeWatch{w}, cur) != nil {
		f.mu.Lock()
		f.conflicts++
		f.mu.Unlock()
		cur = nil
	}
	cancel := func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.watches[name] = slices.DeleteFunc(f.watches[name], func(x *fakeWatch) bool { return x == w })
	}
	return cur, gen, cancel, nil
}

// push offers tc (nil: removed or timed out) to the watchers of name and returns the error
// that rejects it, as the xDS client NACKs it.
func (f *fakeExtensions) push(name string, tc *corev3.TypedExtensionConfig) error {
	f.mu.Lock()
	ws := append([]*fakeWatch(nil), f.watches[name]...)
	f.mu.Unlock()
	if tc != nil {
		if err := vet(ws, tc); err != nil {
			return err
		}
	}
	f.mu.Lock()
	f.gen++
	f.cur[name] = tc
	gen := f.gen
	f.mu.Unlock()
	for _, w := range ws {
		w.update(gen, tc)
	}
	return nil
}

// mustPush pushes a configuration that must be accepted.
func (f *fakeExtensions) mustPush(t *testing.T, name string, tc *corev3.TypedExtensionConfig) {
	t.Helper()
	if err := f.push(name, tc); err != nil {
		t.Fatalf("push %q: %v; want accepted", name, err)
	}
}

func mustAnyOf(t testing.TB, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func healthCheckAny(t *testing.T, path string) *anypb.Any {
	t.Helper()
	var hc healthcheckv3.HealthCheck
	fromYAML(t, fmt.Sprintf(`{pass_through_mode: false, headers: [{name: ":path", string_match: {exact: %q}}]}`, path), &hc)
	return mustAnyOf(t, &hc)
}

// ecdsHCM is a connection manager whose filter "name" discovers its configuration of type
// typeURL, with more config_discovery fields, before the router.
func ecdsHCM(name, typeURL, more string) string {
	return fmt.Sprintf(webHCM+`http_filters:
- name: %s
  config_discovery:
    config_source: {ads: {}}
    type_urls: [%s]
    %s
- name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`, name, typeURL, more)
}

const defaultHealthCheck = `default_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.health_check.v3.HealthCheck, pass_through_mode: false, headers: [{name: ":path", string_match: {exact: /default}}]}`

// TestECDSFilter runs a health_check filter whose configuration comes from ECDS through a real
// listener: 500 (NFCF) before any configuration, then the delivered configuration answers its
// path locally while other paths reach the upstream; an update moves the path; a configuration
// of a type not in type_urls, or one the filter's factory refuses, is rejected and the previous
// one stays; removal falls back to default_config, which serves from the start.
func TestECDSFilter(t *testing.T) {
	up := echo(t, "up")
	check := func(t *testing.T, e *env, path string, wantStatus int, wantBody string) {
		t.Helper()
		resp, body := e.get(e.client(), path)
		if resp.StatusCode != wantStatus || body != wantBody {
			t.Errorf("GET %s = %d %q; want %d %q", path, resp.StatusCode, body, wantStatus, wantBody)
		}
	}
	newECDSEnv := func(t *testing.T, ext *fakeExtensions, more string) *env {
		return newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up.Listener.Addr().String())}, hcm: ecdsHCM("hc", healthcheck.TypeURL, more), ecds: ext})
	}
	t.Run("discovered", func(t *testing.T) {
		ext := newFakeExtensions()
		e := newECDSEnv(t, ext, "")
		check(t, e, "/healthz", 500, "")
		ext.mustPush(t, "hc", &corev3.TypedExtensionConfig{Name: "hc", TypedConfig: healthCheckAny(t, "/healthz")})
		check(t, e, "/healthz", 200, "")
		check(t, e, "/app", 200, "up /app")
		ext.mustPush(t, "hc", &corev3.TypedExtensionConfig{Name: "hc", TypedConfig: healthCheckAny(t, "/ready")})
		check(t, e, "/ready", 200, "")
		check(t, e, "/healthz", 200, "up /healthz")

		rejected := []struct {
			name string
			tc   *corev3.TypedExtensionConfig
			want string
		}{
			{"type not in type_urls", &corev3.TypedExtensionConfig{Name: "hc", TypedConfig: mustAnyOf(t, &routerv3.Router{})},
				`typed_config type "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router" is not one of config_discovery.type_urls ["` + healthcheck.TypeURL + `"]`},
			{"refused by the factory", &corev3.TypedExtensionConfig{Name: "hc", TypedConfig: mustAnyOf(t, &healthcheckv3.HealthCheck{})},
				`http_connection_manager "ingress": http_filters "hc": envoy.filters.http.health_check: pass_through_mode: unset; it is required`},
		}
		for _, r := range rejected {
			t.Run(r.name, func(t *testing.T) {
				if err := ext.push("hc", r.tc); err == nil || err.Error() != r.want {
					t.Errorf("push = %v; want %q", err, r.want)
				}
				check(t, e, "/ready", 200, "") // still the previous configuration
			})
		}
		ext.mustPush(t, "hc", nil)
		check(t, e, "/ready", 500, "")
	})
	for _, warming := range []bool{false, true} {
		t.Run(fmt.Sprintf("default config without warming %v", warming), func(t *testing.T) {
			ext := newFakeExtensions()
			e := newECDSEnv(t, ext, defaultHealthCheck+fmt.Sprintf("\n    apply_default_config_without_warming: %v", warming))
			check(t, e, "/default", 200, "")
			check(t, e, "/app", 200, "up /app")
			ext.mustPush(t, "hc", &corev3.TypedExtensionConfig{Name: "hc", TypedConfig: healthCheckAny(t, "/healthz")})
			check(t, e, "/default", 200, "up /default")
			ext.mustPush(t, "hc", nil)
			check(t, e, "/default", 200, "")
		})
	}
	t.Run("conflict", func(t *testing.T) {
		// The subscription already has a configuration this filter's type_urls exclude: the
		// filter serves its default and the provider counts a conflict.
		ext := newFakeExtensions()
		ext.mustPush(t, "hc", &corev3.TypedExtensionConfig{Name: "hc", TypedConfig: mustAnyOf(t, &routerv3.Router{})})
		e := newECDSEnv(t, ext, defaultHealthCheck)
		check(t, e, "/default", 200, "")
		if ext.conflicts != 1 {
			t.Errorf("conflicts = %d; want 1", ext.conflicts)
		}
	})
	t.Run("load errors", func(t *testing.T) {
		router := mustAnyOf(t, &routerv3.Router{})
		tests := []struct {
			name string
			cd   *corev3.ExtensionConfigSource
			deps Deps
			want string
		}{
			{"no provider", &corev3.ExtensionConfigSource{}, Deps{},
				`http_connection_manager "ingress": http_filters "hc": config_discovery needs the xDS client`},
			{"default_config not in type_urls", &corev3.ExtensionConfigSource{TypeUrls: []string{healthcheck.TypeURL}, DefaultConfig: router},
				Deps{ExtensionConfigs: newFakeExtensions(), Filters: filter.NewRegistry()},
				`http_connection_manager "ingress": http_filters "hc": config_discovery.default_config: typed_config type "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router" is not one of config_discovery.type_urls ["` + healthcheck.TypeURL + `"]`},
			{"default_config of no filter", &corev3.ExtensionConfigSource{DefaultConfig: router},
				Deps{ExtensionConfigs: newFakeExtensions(), Filters: filter.NewRegistry()},
				`http_connection_manager "ingress": http_filters "hc": config_discovery.default_config: typed_config type "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router": unknown HTTP filter`},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				sh := &shared{deps: tc.deps}
				h := &Handler{cfg: &config.HTTPConnectionManager{StatPrefix: "ingress"}}
				err := sh.startECDS(h, []config.DiscoveredFilter{{Name: "hc", Source: tc.cd}})
				if err == nil || err.Error() != tc.want {
					t.Errorf("startECDS error = %v; want %q", err, tc.want)
				}
			})
		}
	})
}

// pinnedFilter is a filter.StreamFilter built from a StringValue (its name): it names itself
// in the x-instance response header and reports what its streams saw when they end.
type pinnedFilter struct {
	name    string
	records chan<- string
	closed  *atomic.Int32
}

func (f *pinnedFilter) OnRequest(*filter.Exchange) *filter.Reply { return nil }
func (f *pinnedFilter) OnResponse(_ *filter.Exchange, h http.Header) {
	h.Set("X-Instance", f.name)
}
func (f *pinnedFilter) Close() error { f.closed.Add(1); return nil }
func (f *pinnedFilter) NewStream(*filter.Exchange) filter.Stream {
	return &pinnedStream{f: f}
}

type pinnedStream struct {
	f          *pinnedFilter
	req, resp  strings.Builder
	respStatus int
}

func (s *pinnedStream) RequestBody(p []byte)                      { s.req.Write(p) }
func (s *pinnedStream) RequestTrailers(http.Header)               {}
func (s *pinnedStream) ResponseHeaders(status int, h http.Header) { s.respStatus = status }
func (s *pinnedStream) ResponseBody(p []byte)                     { s.resp.Write(p) }
func (s *pinnedStream) ResponseTrailers(http.Header)              {}
func (s *pinnedStream) End() {
	s.f.records <- fmt.Sprintf("%s: %d %q -> %q", s.f.name, s.respStatus, s.req.String(), s.resp.String())
}

const stringValueType = "type.googleapis.com/google.protobuf.StringValue"

func pinnedConfig(t *testing.T, name string) *corev3.TypedExtensionConfig {
	return &corev3.TypedExtensionConfig{Name: "pinned", TypedConfig: mustAnyOf(t, wrapperspb.String(name))}
}

// TestECDSStreamFilter: a filter.StreamFilter delivered over ECDS gets its streams' bodies, and
// a stream keeps the instance that was current when it started — OnResponse and its Stream
// both — when a new configuration arrives while it is in flight. The replaced instance is
// closed once.
func TestECDSStreamFilter(t *testing.T) {
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/slow" {
			arrived <- struct{}{}
			<-release
		}
		fmt.Fprintf(w, "echo %s", body)
	}))
	t.Cleanup(up.Close)
	records := make(chan string, 4)
	var closed atomic.Int32
	filters := filter.NewRegistry()
	if err := filters.Register("test.pinned", func(cfg *anypb.Any, _ *filter.Context) (filter.Filter, error) {
		var name wrapperspb.StringValue
		if err := cfg.UnmarshalTo(&name); err != nil {
			return nil, err
		}
		return &pinnedFilter{name: name.GetValue(), records: records, closed: &closed}, nil
	}, stringValueType); err != nil {
		t.Fatal(err)
	}
	ext := newFakeExtensions()
	e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm: ecdsHCM("pinned", stringValueType, ""), ecds: ext, filters: filters})
	ext.mustPush(t, "pinned", pinnedConfig(t, "A"))

	post := func(path, body string) (string, string) {
		resp, err := e.client().Post("http://"+e.addr+path, "text/plain", strings.NewReader(body))
		if err != nil {
			t.Errorf("POST %s: %v", path, err)
			return "", ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.Header.Get("X-Instance"), string(b)
	}
	type result struct{ instance, body string }
	slow := make(chan result, 1)
	go func() {
		i, b := post("/slow", "ping")
		slow <- result{i, b}
	}()
	select {
	case <-arrived:
	case <-time.After(wait):
		t.Fatal("the request did not reach the upstream")
	}
	ext.mustPush(t, "pinned", pinnedConfig(t, "B"))
	close(release)
	if got, want := <-slow, (result{"A", "echo ping"}); got != want {
		t.Errorf("in-flight stream: instance, body = %v; want %v", got, want)
	}
	if got, want := nextRecord(t, records), `A: 200 "ping" -> "echo ping"`; got != want {
		t.Errorf("in-flight stream's record = %s; want %s", got, want)
	}
	if i, b := post("/next", "pong"); i != "B" || b != "echo pong" {
		t.Errorf("next stream: instance, body = %q, %q; want B, echo pong", i, b)
	}
	if got, want := nextRecord(t, records), `B: 200 "pong" -> "echo pong"`; got != want {
		t.Errorf("next stream's record = %s; want %s", got, want)
	}
	if got := closed.Load(); got != 1 {
		t.Errorf("instances closed = %d; want 1 (A)", got)
	}
}

func nextRecord(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(wait):
		t.Fatal("no stream record")
		return ""
	}
}

// TestECDSTap: the tap filter delivered over ECDS (admin_config) taps the request and
// response bodies of a proxied request for an admin session.
func TestECDSTap(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "echo %s", body)
	}))
	t.Cleanup(up.Close)
	taps := tap.NewManager()
	filters := filtersOf(t, taps)
	ext := newFakeExtensions()
	e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm: ecdsHCM("tap", tap.TypeURL, ""), ecds: ext, filters: filters})
	var pb tapv3.Tap
	fromYAML(t, `common_config: {admin_config: {config_id: ecds}}`, &pb)
	ext.mustPush(t, "tap", &corev3.TypedExtensionConfig{Name: "tap", TypedConfig: mustAnyOf(t, &pb)})
	req, err := tap.ParseRequest([]byte(`{config_id: ecds, tap_config: {match: {any_match: true}, output_config: {sinks: [{streaming_admin: {}}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := taps.Attach(req)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	defer s.Close()
	resp, err := e.client().Post("http://"+e.addr+"/tapped", "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	select {
	case tw := <-s.Traces():
		tr := tw.GetHttpBufferedTrace()
		got := []string{string(tr.GetRequest().GetBody().GetAsBytes()), string(tr.GetResponse().GetBody().GetAsBytes())}
		if diff := cmp.Diff([]string{"hello", "echo hello"}, got); diff != "" {
			t.Errorf("tapped request and response bodies (-want +got):\n%s", diff)
		}
	case <-time.After(wait):
		t.Fatal("no trace")
	}
}

// BenchmarkProxyECDS is BenchmarkProxy through a connection manager with a health check
// filter delivered over ECDS (not a StreamFilter), requests passing it: the cost of pinning
// the stream's instance.
func BenchmarkProxyECDS(b *testing.B) { benchClients(b, ecdsClients(b)) }

// ecdsClients serves BenchmarkProxyECDS's proxy and returns how to connect a client to it.
func ecdsClients(tb testing.TB) func() *rawClient {
	ext := newFakeExtensions()
	e := newEnv(tb, envOptions{clusters: []string{staticCluster("web", "", rawUpstream(tb))}, hcm: ecdsHCM("hc", healthcheck.TypeURL, ""), ecds: ext})
	var hc healthcheckv3.HealthCheck
	fromYAML(tb, `{pass_through_mode: false, headers: [{name: ":path", string_match: {exact: /healthz}}]}`, &hc)
	if err := ext.push("hc", &corev3.TypedExtensionConfig{Name: "hc", TypedConfig: mustAnyOf(tb, &hc)}); err != nil {
		tb.Fatal(err)
	}
	return func() *rawClient { return newRawClient(tb, e.addr, "/") }
}

// TestECDSRejectedElsewhere: two connection managers discover "tap" from one subscription;
// the first's factory accepts an admin_config tap (registering it for /tap), the second's
// refuses it. The configuration is rejected, and the instance the first built is released
// at once: /tap goes away with it rather than lingering until the next configuration.
func TestECDSRejectedElsewhere(t *testing.T) {
	up := echo(t, "up")
	taps := tap.NewManager()
	var available []bool
	taps.Watch(func(ok bool) { available = append(available, ok) })
	accepting := filtersOf(t, taps)
	refusing := filter.NewRegistry()
	if err := refusing.Register(tap.Name, func(*anypb.Any, *filter.Context) (filter.Filter, error) {
		return nil, fmt.Errorf("refused by the second connection manager")
	}, tap.TypeURL); err != nil {
		t.Fatal(err)
	}
	ext := newFakeExtensions()
	var envs []*env
	for _, r := range []*filter.Registry{accepting, refusing} {
		envs = append(envs, newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
			hcm: ecdsHCM("tap", tap.TypeURL, ""), ecds: ext, filters: r}))
	}
	var pb tapv3.Tap
	fromYAML(t, `common_config: {admin_config: {config_id: ecds}}`, &pb)
	err := ext.push("tap", &corev3.TypedExtensionConfig{Name: "tap", TypedConfig: mustAnyOf(t, &pb)})
	want := `http_connection_manager "ingress": http_filters "tap": refused by the second connection manager`
	if err == nil || err.Error() != want {
		t.Fatalf("push = %v; want %q", err, want)
	}
	if diff := cmp.Diff([]bool{true, false}, available); diff != "" {
		t.Errorf("/tap availability (-want +got):\n%s", diff)
	}
	for i, e := range envs {
		if resp, _ := e.get(e.client(), "/app"); resp.StatusCode != 500 {
			t.Errorf("connection manager %d: GET /app = %d; want 500 (no configuration)", i, resp.StatusCode)
		}
	}
}

// TestCheckDiscoveredFilter: the check the server hands the xDS client builds the filter as a
// connection manager would and releases it at once.
func TestCheckDiscoveredFilter(t *testing.T) {
	taps := tap.NewManager()
	var available []bool
	taps.Watch(func(ok bool) { available = append(available, ok) })
	filters := filtersOf(t, taps, healthcheck.Register)
	check := CheckDiscoveredFilter(filters, &filter.Context{})
	var adminTap tapv3.Tap
	fromYAML(t, `common_config: {admin_config: {config_id: ecds}}`, &adminTap)
	tests := []struct {
		name string
		tc   *corev3.TypedExtensionConfig
		want string
	}{
		{"health check", &corev3.TypedExtensionConfig{Name: "hc", TypedConfig: healthCheckAny(t, "/healthz")}, ""},
		{"admin tap", &corev3.TypedExtensionConfig{Name: "tap", TypedConfig: mustAnyOf(t, &adminTap)}, ""},
		{"refused by the factory", &corev3.TypedExtensionConfig{Name: "hc", TypedConfig: mustAnyOf(t, &healthcheckv3.HealthCheck{})},
			`envoy.filters.http.health_check: pass_through_mode: unset; it is required`},
		{"no factory", &corev3.TypedExtensionConfig{Name: "x", TypedConfig: mustAnyOf(t, &routerv3.Router{})},
			`typed_config type "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router": unknown HTTP filter`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if err := check(tc.tc); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("check = %q; want %q", got, tc.want)
			}
		})
	}
	if diff := cmp.Diff([]bool{true, false}, available); diff != "" {
		t.Errorf("/tap availability after the checks (-want +got):\n%s", diff)
	}
}
