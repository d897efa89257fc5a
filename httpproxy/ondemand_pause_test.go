package httpproxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/legateproxy/legate/httpproxy/filters/ondemand"
)

// heldScopes is an on-demand ScopedRouteProvider that answers a scope load only when the
// test says so: each load is reported on loads, and each withdrawal on cancels.
type heldScopes struct {
	fakeScopes
	scopes  []*routev3.ScopedRouteConfiguration
	routes  map[string]*routev3.RouteConfiguration
	loads   chan heldLoad
	cancels chan string
}

// heldLoad is one pending load: answer publishes the scope's route configuration and wakes
// the request.
type heldLoad struct {
	key  string
	done func()
}

func (f *heldScopes) WatchScopedRoutesOnDemand(sr *hcmv3.ScopedRoutes, prefix string, update func(uint64, []*routev3.ScopedRouteConfiguration, map[string]*routev3.RouteConfiguration)) (func(), func(string, func()) (func(), bool), error) {
	cancel, err := f.WatchScopedRoutes(sr, prefix, update)
	load := func(key string, done func()) (func(), bool) {
		f.loads <- heldLoad{key: key, done: done}
		return func() { f.cancels <- key }, true
	}
	return cancel, load, err
}

// answer publishes the route configuration rc for the held scope and wakes the request.
func (f *heldScopes) answer(l heldLoad, rc *routev3.RouteConfiguration) {
	routes := map[string]*routev3.RouteConfiguration{}
	for k, v := range f.routes {
		routes[k] = v
	}
	routes[rc.GetName()] = rc
	f.push(f.scopes, routes)
	l.done()
}

// pauseEnv is a listener whose connection manager has the on_demand filter and on_demand
// scoped routes (key: the x-foo-key header) served by a heldScopes, and an upstream cluster
// "up" that answers with the request body it received.
func pauseEnv(t *testing.T) (*env, *heldScopes, *routev3.RouteConfiguration) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %d:%s", r.Method, len(b), b)
	}))
	t.Cleanup(up.Close)
	lazy := scope("sl", "rl", "l")
	lazy.OnDemand = true
	f := &heldScopes{scopes: []*routev3.ScopedRouteConfiguration{lazy}, routes: map[string]*routev3.RouteConfiguration{},
		loads: make(chan heldLoad, 10), cancels: make(chan string, 10)}
	reg := filtersOf(t, nil, ondemand.Register)
	e := newEnv(t, envOptions{hcm: srdsOnDemandHCM, srds: f, filters: reg,
		clusters: []string{staticCluster("up", "", up.Listener.Addr().String())}})
	f.push(f.scopes, f.routes)
	var rc routev3.RouteConfiguration
	fromYAML(t, `
name: rl
virtual_hosts:
- name: all
  domains: ["*"]
  routes: [{match: {prefix: /}, route: {cluster: up}}]`, &rc)
	return e, f, &rc
}

func recvLoad(t *testing.T, f *heldScopes) heldLoad {
	t.Helper()
	select {
	case l := <-f.loads:
		return l
	case <-time.After(wait):
		t.Fatal("the paused request asked for no scope")
	}
	return heldLoad{}
}

// TestOnDemandPauseBody: a POST whose scope is loaded on demand has its body read while it
// waits (the connection's received bytes include the whole body before the answer), and the
// body reaches the upstream once the route configuration arrives; chunked and HTTP/2 bodies
// too.
func TestOnDemandPauseBody(t *testing.T) {
	body := strings.Repeat("0123456789", 3000) // 30000 bytes: more than one read buffer
	for _, tc := range []struct {
		name    string
		chunked bool
		h2      bool
	}{
		{name: "content-length"},
		{name: "chunked", chunked: true},
		{name: "http2", h2: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, f, rc := pauseEnv(t)
			type result struct {
				status int
				body   string
				err    error
			}
			res := make(chan result, 1)
			var rawLen int
			if tc.h2 {
				go func() {
					req, _ := http.NewRequest(http.MethodPost, "http://"+e.addr+"/p", strings.NewReader(body))
					req.Header.Set("X-Foo-Key", "l")
					resp, err := h2cClient(t).Do(req)
					if err != nil {
						res <- result{err: err}
						return
					}
					defer resp.Body.Close()
					b, err := io.ReadAll(resp.Body)
					res <- result{resp.StatusCode, string(b), err}
				}()
			} else {
				conn, err := net.Dial("tcp", e.addr)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				var raw string
				if tc.chunked {
					raw = "POST /p HTTP/1.1\r\nHost: x\r\nX-Foo-Key: l\r\nTransfer-Encoding: chunked\r\n\r\n" +
						fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
				} else {
					raw = fmt.Sprintf("POST /p HTTP/1.1\r\nHost: x\r\nX-Foo-Key: l\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
				}
				rawLen = len(raw)
				go func() {
					if _, err := io.WriteString(conn, raw); err != nil {
						res <- result{err: err}
						return
					}
					resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
					if err != nil {
						res <- result{err: err}
						return
					}
					defer resp.Body.Close()
					b, err := io.ReadAll(resp.Body)
					res <- result{resp.StatusCode, string(b), err}
				}()
			}
			l := recvLoad(t, f)
			if !tc.h2 {
				// The whole request, body included, is read while the request waits.
				pollUntil(t, func() bool { return e.stat("http.ingress.downstream_cx_rx_bytes_total") >= uint64(rawLen) },
					func() string {
						return fmt.Sprintf("downstream_cx_rx_bytes_total = %d while paused; want %d (the body buffered)", e.stat("http.ingress.downstream_cx_rx_bytes_total"), rawLen)
					})
			}
			select {
			case r := <-res:
				t.Fatalf("answered before the scope loaded: %+v", r)
			default:
			}
			f.answer(l, rc)
			select {
			case r := <-res:
				want := fmt.Sprintf("POST %d:%s", len(body), body)
				if r.err != nil || r.status != 200 || r.body != want {
					t.Errorf("POST = %d %.40q (err %v); want 200 %.40q", r.status, r.body, r.err, want)
				}
			case <-time.After(wait):
				t.Fatal("no response after the scope loaded")
			}
		})
	}
}

// TestOnDemandPauseBufferLimit: a body larger than per_connection_buffer_limit_bytes is not
// refused (Envoy's on_demand filter asks for watermark buffering, not a 413): reading stops
// at the limit while the request waits, and the whole body is forwarded after.
func TestOnDemandPauseBufferLimit(t *testing.T) {
	e, f, rc := pauseEnv(t)
	body := strings.Repeat("x", 3<<20) // 3 MiB: over the default 1 MiB limit
	conn, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	wrote := make(chan error, 1)
	go func() {
		_, err := fmt.Fprintf(conn, "POST /p HTTP/1.1\r\nHost: x\r\nX-Foo-Key: l\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		wrote <- err
	}()
	l := recvLoad(t, f)
	f.answer(l, rc)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := fmt.Sprintf("POST %d:", len(body))
	if resp.StatusCode != 200 || !strings.HasPrefix(string(b), want) || len(b) != len(want)+len(body) {
		t.Errorf("POST 3 MiB = %d %.20q (%d bytes); want 200 %q and the body", resp.StatusCode, b, len(b), want)
	}
	if err := <-wrote; err != nil {
		t.Errorf("writing the request: %v", err)
	}
}

// TestOnDemandPauseClientGone: a client that closes its connection (HTTP/1) or resets its
// stream (HTTP/2) while its request waits ends the wait at once — the request's interest in
// the scope is withdrawn long before the 5 s bound — and the stream ends unanswered.
func TestOnDemandPauseClientGone(t *testing.T) {
	for _, tc := range []struct {
		name string
		h2   bool
	}{{name: "http1 close"}, {name: "http2 reset", h2: true}} {
		t.Run(tc.name, func(t *testing.T) {
			e, f, _ := pauseEnv(t)
			start := time.Now()
			if tc.h2 {
				ctx, cancel := context.WithCancel(context.Background())
				errc := make(chan error, 1)
				go func() {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.addr+"/p", nil)
					req.Header.Set("X-Foo-Key", "l")
					resp, err := h2cClient(t).Do(req)
					if err == nil {
						resp.Body.Close()
					}
					errc <- err
				}()
				recvLoad(t, f)
				cancel() // RST_STREAM
				<-errc
			} else {
				conn, err := net.Dial("tcp", e.addr)
				if err != nil {
					t.Fatal(err)
				}
				io.WriteString(conn, "GET /p HTTP/1.1\r\nHost: x\r\nX-Foo-Key: l\r\n\r\n")
				recvLoad(t, f)
				conn.Close()
			}
			select {
			case key := <-f.cancels:
				if key != "l" {
					t.Errorf("withdrawn key = %q; want l", key)
				}
			case <-time.After(ondemand.DefaultWait - time.Second):
				t.Fatalf("the wait was not withdrawn within %v of the client leaving", ondemand.DefaultWait-time.Second)
			}
			if d := time.Since(start); d >= ondemand.DefaultWait {
				t.Errorf("withdrawn after %v; want well before the %v bound", d, ondemand.DefaultWait)
			}
			pollUntil(t, func() bool { return e.stat("http.ingress.downstream_rq_active") == 0 }, func() string {
				return fmt.Sprintf("downstream_rq_active = %d; want 0 once the client left", e.stat("http.ingress.downstream_rq_active"))
			})
			if got := e.stat("http.ingress.rq_total"); got != 0 {
				t.Errorf("rq_total = %d; want 0 (the request was never routed)", got)
			}
		})
	}
}

// pollUntil waits for cond, which reads stats the proxy updates on its own goroutines (no
// event tells the test), checking every millisecond until the deadline.
func pollUntil(t *testing.T, cond func() bool, msg func() string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(msg())
		}
		<-time.After(time.Millisecond) // polling a stat, not synchronising
	}
}
