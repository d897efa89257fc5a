package httpproxy

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/legateproxy/legate/overload"
	"github.com/legateproxy/legate/stats"
)

// overloadEnv is a proxy in front of an upstream answering 200 "ok", under the overload
// manager ov, logging "%RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS%" to the
// returned path.
func overloadEnv(t *testing.T, ov *overload.Manager, bypass bool) (*env, string) {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	t.Cleanup(up.Close)
	path := filepath.Join(t.TempDir(), "access.log")
	return newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm:      simpleHCM("web", "") + "access_log:" + fileLogYAML(path, "%RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS%\n", ""),
		overload: ov.State(),
		bypass:   bypass,
	}), path
}

// alwaysOn is an overload manager whose actions are saturated from its first refresh: a
// global connection limit monitor with threshold-0 triggers.
func alwaysOn(t *testing.T, actions ...string) *overload.Manager {
	t.Helper()
	cfg := &overload.Config{RefreshInterval: time.Second, Monitors: []overload.Monitor{{Name: overload.GlobalConnections, MaxConnections: 1000}}}
	for _, a := range actions {
		cfg.Actions = append(cfg.Actions, overload.Action{Name: a, Triggers: []overload.Trigger{{Monitor: overload.GlobalConnections}}})
	}
	ov := overload.New(cfg, newStatsStore(t), nil)
	t.Cleanup(ov.Close)
	ov.Refresh()
	return ov
}

func newStatsStore(t *testing.T) *stats.Store {
	t.Helper()
	st, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// overloadH2Get sends a GET over a new prior-knowledge HTTP/2 connection and returns the response
// status and body.
func overloadH2Get(t *testing.T, addr string) (int, string) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := (&http2.Transport{AllowHTTP: true}).NewClientConn(nc)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	resp, err := cc.RoundTrip(req)
	if err != nil {
		t.Fatalf("HTTP/2 GET: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestOverloadStopAcceptingRequestsOnHeldHeap holds 128 MiB of heap past a fixed_heap limit:
// stop_accepting_requests saturates and new HTTP/1 and HTTP/2 requests get Envoy's 503
// "envoy overloaded", counted in downstream_rq_overload_close; freeing the memory lifts it.
func TestOverloadStopAcceptingRequestsOnHeldHeap(t *testing.T) {
	runtime.GC()
	const hold = 128 << 20
	limit := heapObjects() + hold
	cfg := &overload.Config{
		RefreshInterval: time.Second,
		Monitors:        []overload.Monitor{{Name: overload.FixedHeap, MaxHeapBytes: limit}},
		Actions:         []overload.Action{{Name: overload.StopAcceptingRequests, Triggers: []overload.Trigger{{Monitor: overload.FixedHeap, Scaling: 0.9, Saturation: 0.9}}}},
	}
	st := newStatsStore(t)
	ov := overload.New(cfg, st, nil)
	t.Cleanup(ov.Close)
	e, logPath := overloadEnv(t, ov, false)
	c := e.client()
	ov.Refresh()
	if resp, body := e.get(c, "/"); resp.StatusCode != http.StatusOK || body != "ok" {
		t.Fatalf("under the limit: %d %q; want 200 ok", resp.StatusCode, body)
	}

	held := make([]byte, hold)
	for i := range held {
		held[i] = 1
	}
	ov.Refresh()
	resp, body := e.get(c, "/")
	if resp.StatusCode != http.StatusServiceUnavailable || body != "envoy overloaded" {
		t.Errorf("HTTP/1 over the heap limit: %d %q; want 503 \"envoy overloaded\"", resp.StatusCode, body)
	}
	if code, body := overloadH2Get(t, e.addr); code != http.StatusServiceUnavailable || body != "envoy overloaded" {
		t.Errorf("HTTP/2 over the heap limit: %d %q; want 503 \"envoy overloaded\"", code, body)
	}
	if got := e.stat("http.ingress.downstream_rq_overload_close"); got != 2 {
		t.Errorf("downstream_rq_overload_close = %d; want 2", got)
	}
	runtime.KeepAlive(held)

	held = nil
	runtime.GC()
	ov.Refresh()
	if resp, body := e.get(c, "/"); resp.StatusCode != http.StatusOK || body != "ok" {
		t.Errorf("after freeing the memory: %d %q; want 200 ok", resp.StatusCode, body)
	}
	// Envoy's response flag (OM) and details for a shed request.
	waitLogLines(t, e, logPath, []string{"200 - via_upstream", "503 OM overload", "503 OM overload", "200 - via_upstream"})
}

// TestOverloadBypassListener checks that a listener with bypass_overload_manager serves
// requests while stop_accepting_requests holds.
func TestOverloadBypassListener(t *testing.T) {
	ov := alwaysOn(t, overload.StopAcceptingRequests)
	e, _ := overloadEnv(t, ov, true)
	if resp, body := e.get(e.client(), "/"); resp.StatusCode != http.StatusOK || body != "ok" {
		t.Errorf("bypassing listener: %d %q; want 200 ok", resp.StatusCode, body)
	}
	if got := e.stat("http.ingress.downstream_rq_overload_close"); got != 0 {
		t.Errorf("downstream_rq_overload_close = %d; want 0", got)
	}
}

// TestOverloadDisableKeepalive checks that while disable_http_keepalive holds an HTTP/1
// response carries "connection: close" and an HTTP/2 connection gets GOAWAY after its
// response, each counted in downstream_cx_overload_disable_keepalive.
func TestOverloadDisableKeepalive(t *testing.T) {
	ov := alwaysOn(t, overload.DisableHTTPKeepalive)
	e, _ := overloadEnv(t, ov, false)
	resp, body := e.get(e.client(), "/")
	if resp.StatusCode != http.StatusOK || body != "ok" || !resp.Close {
		t.Errorf("HTTP/1: %d %q close=%v; want 200 ok with connection: close", resp.StatusCode, body, resp.Close)
	}

	nc, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(wait))
	io.WriteString(nc, http2.ClientPreface)
	fr := http2.NewFramer(nc, nc)
	fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", e.addr}, {":path", "/"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("HTTP/2: no GOAWAY before %v", err)
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			if ga.ErrCode != http2.ErrCodeNo {
				t.Errorf("GOAWAY error code %v; want NO_ERROR", ga.ErrCode)
			}
			break
		}
		if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
			fr.WriteSettingsAck()
		}
	}
	if got := e.stat("http.ingress.downstream_cx_overload_disable_keepalive"); got != 2 {
		t.Errorf("downstream_cx_overload_disable_keepalive = %d; want 2", got)
	}
}

// BenchmarkProxyOverload is BenchmarkProxy's legate case under an overload manager whose
// request actions are configured but not active: the per-request checks are atomic loads and
// allocate nothing.
func BenchmarkProxyOverload(b *testing.B) { benchClients(b, overloadClients(b)) }

// overloadClients serves BenchmarkProxyOverload's proxy and returns how to connect a client to
// it.
func overloadClients(tb testing.TB) func() *rawClient {
	st, err := stats.New(stats.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	triggers := []overload.Trigger{{Monitor: overload.GlobalConnections, Scaling: 0.99, Saturation: 0.99}}
	ov := overload.New(&overload.Config{
		RefreshInterval: time.Second,
		Monitors:        []overload.Monitor{{Name: overload.GlobalConnections, MaxConnections: 1 << 20}},
		Actions: []overload.Action{
			{Name: overload.StopAcceptingRequests, Triggers: triggers},
			{Name: overload.DisableHTTPKeepalive, Triggers: triggers},
		},
	}, st, nil)
	tb.Cleanup(ov.Close)
	ov.Refresh()
	e := newEnv(tb, envOptions{
		clusters: []string{staticCluster("web", "", rawUpstream(tb))},
		hcm:      simpleHCM("web", ""),
		overload: ov.State(),
	})
	return func() *rawClient { return newRawClient(tb, e.addr, "/") }
}
