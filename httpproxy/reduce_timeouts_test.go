package httpproxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/legateproxy/legate/overload"
	"github.com/legateproxy/legate/stats/statstest"
)

// reduceTimeoutsManager runs an overload manager, refreshed every 50 ms, whose
// reduce_timeouts action saturates when 3 of its 8 global downstream connections are open,
// scaling the timers to their minimums; it returns the manager and a function that waits
// for the action's scale_percent to reach want.
func reduceTimeoutsManager(t *testing.T, timers [4]overload.TimerMinimum) (*overload.Manager, func(want uint64)) {
	t.Helper()
	st := newStatsStore(t)
	cfg := &overload.Config{
		RefreshInterval: 50 * time.Millisecond,
		Monitors:        []overload.Monitor{{Name: overload.GlobalConnections, MaxConnections: 8}},
		Actions: []overload.Action{{
			Name:     overload.ReduceTimeouts,
			Triggers: []overload.Trigger{{Monitor: overload.GlobalConnections, Scaling: 0.375, Saturation: 0.375}},
			Timers:   timers,
		}},
	}
	ov := overload.New(cfg, st, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ov.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; ov.Close() })
	const stat = "overload.envoy.overload_actions.reduce_timeouts.scale_percent"
	await := func(want uint64) {
		t.Helper()
		for end := time.Now().Add(wait); ; time.Sleep(10 * time.Millisecond) { // polls the refreshes
			if got, _ := statstest.Value(st, stat); got == want {
				return
			}
			if time.Now().After(end) {
				got, _ := statstest.Value(st, stat)
				t.Fatalf("%s = %d; want %d", stat, got, want)
			}
		}
	}
	return ov, await
}

// holdUpstream answers "ok" at once, or, to a request with x-hold, when release is called
// (register it with t.Cleanup after the proxy's, so that it runs before the proxy waits for
// its requests) or the request ends.
func holdUpstream(t *testing.T) (addr string, release func()) {
	held := make(chan struct{})
	up := serveBothProtocols(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("x-hold") != "" {
			select {
			case <-held:
			case <-r.Context().Done():
			}
		}
		io.WriteString(w, "ok")
	}))
	var once sync.Once
	release = func() { once.Do(func() { close(held) }) }
	t.Cleanup(release)
	return up.Listener.Addr().String(), release
}

// reduceTimeoutsEnv is a proxy with the connection manager's extra fields in front of a
// holdUpstream, under a reduceTimeoutsManager with timers; it returns the env and the wait
// for the action's scale_percent.
func reduceTimeoutsEnv(t *testing.T, extra string, timers [4]overload.TimerMinimum) (*env, func(uint64)) {
	t.Helper()
	ov, await := reduceTimeoutsManager(t, timers)
	addr, release := holdUpstream(t)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", addr)},
		hcm:      simpleHCM("web", "") + extra,
		overload: ov.State(),
	})
	t.Cleanup(release)
	return e, await
}

// holdConnections opens n connections whose requests the upstream holds until the test
// ends (no route timeout): active, never idle, they only raise the connection count.
func holdConnections(t *testing.T, e *env, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		rc := dialRaw(t, e.addr)
		rc.c.SetDeadline(time.Time{})
		rc.write("GET / HTTP/1.1\r\nhost: a\r\nx-hold: 1\r\nx-envoy-upstream-rq-timeout-ms: 0\r\n\r\n")
	}
}

// awaitClose waits for the proxy to close rc and returns how long it took from since;
// it fails the test if rc is still open after wait.
func awaitClose(t *testing.T, rc *rawConn, since time.Time) time.Duration {
	t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(wait))
	if !rc.closed() {
		t.Fatalf("connection still open %v after it went idle", time.Since(since))
	}
	return time.Since(since)
}

// TestOverloadReduceTimeoutsClosesIdleSooner checks reduce_timeouts on the connection
// manager's idle_timeout (HTTP_DOWNSTREAM_CONNECTION_IDLE, min_timeout 0.5 s) with a real
// listener under the global connection monitor, raised by real connections: with the
// action off an idle connection outlives the minimum; once three held connections saturate
// it, that connection and an idle HTTP/2 one (GOAWAY, then closed), idle since before, are
// closed at once (Envoy's scaled timers follow the scale while they run), a new idle
// connection lasts the minimum instead of the 30 s idle_timeout, all counted in
// downstream_cx_idle_timeout; the stat shows 100.
func TestOverloadReduceTimeoutsClosesIdleSooner(t *testing.T) {
	e, await := reduceTimeoutsEnv(t, "stream_idle_timeout: 0s\ncommon_http_protocol_options: {idle_timeout: 30s}\n", [4]overload.TimerMinimum{
		overload.ConnectionIdle: {Set: true, Absolute: 500 * time.Millisecond},
	})
	idle := dialRaw(t, e.addr)
	idle.write("GET / HTTP/1.1\r\nhost: a\r\n\r\n")
	if resp, body := idle.response(); resp.StatusCode != http.StatusOK || body != "ok" {
		t.Fatalf("got %d %q; want 200 \"ok\"", resp.StatusCode, body)
	}
	h2c, h2fr := idleH2(t, e.addr)
	idleSince := time.Now()
	idle.c.SetReadDeadline(time.Now().Add(time.Second)) // twice the minimum
	if idle.closed() {
		t.Fatal("idle connection closed before the action was on")
	}
	if got := e.stat("http.ingress.downstream_cx_idle_timeout"); got != 0 {
		t.Fatalf("downstream_cx_idle_timeout = %d with the action off; want 0", got)
	}

	holdConnections(t, e, 3)
	await(100)
	if got := awaitClose(t, idle, idleSince); got > 5*time.Second {
		t.Errorf("idle connection closed %v after it went idle; want soon after the action (30s unscaled)", got)
	}
	if got := awaitGoAway(t, h2c, h2fr, idleSince); got > 5*time.Second {
		t.Errorf("idle HTTP/2 connection closed %v after it went idle; want soon after the action (30s unscaled)", got)
	}
	fresh := dialRaw(t, e.addr)
	opened := time.Now()
	if got := awaitClose(t, fresh, opened); got < 400*time.Millisecond || got > 5*time.Second {
		t.Errorf("new idle connection closed after %v; want about the 0.5s minimum", got)
	}
	if got := e.stat("http.ingress.downstream_cx_idle_timeout"); got != 3 {
		t.Errorf("downstream_cx_idle_timeout = %d; want 3", got)
	}
}

// idleH2 opens an h2c connection to addr, serves one request (with the fields extra) on it and
// returns it idle.
func idleH2(t *testing.T, addr string, extra ...[2]string) (net.Conn, *http2.Framer) {
	t.Helper()
	c := dialRaw(t, addr).c
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	writeRequest(t, fr, 1, "/", extra)
	if got := answer(t, fr, 1); got != "200" {
		t.Fatalf("HTTP/2 request: %s; want 200", got)
	}
	return c, fr
}

// awaitGoAway waits for the proxy to send GOAWAY on c and close it, and returns how long it
// took from since.
func awaitGoAway(t *testing.T, c net.Conn, fr *http2.Framer, since time.Time) time.Duration {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(wait))
	goAway := false
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("HTTP/2 connection still open %v after it went idle", time.Since(since))
			}
			if !goAway {
				t.Errorf("HTTP/2 connection closed without a GOAWAY: %v", err)
			}
			return time.Since(since)
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok && ga.ErrCode == http2.ErrCodeNo {
			goAway = true
		}
	}
}

// TestOverloadReduceTimeoutsStreamIdle checks reduce_timeouts on stream_idle_timeout
// (HTTP_DOWNSTREAM_STREAM_IDLE, min_scale 2 % of 30 s): once held connections saturate the
// action, a request the upstream does not answer gets stream_idle_timeout's 504 after about
// 0.6 s instead of 30 s.
func TestOverloadReduceTimeoutsStreamIdle(t *testing.T) {
	e, await := reduceTimeoutsEnv(t, "stream_idle_timeout: 30s\n", [4]overload.TimerMinimum{
		overload.StreamIdle: {Set: true, Scale: 0.02, IsScale: true},
	})
	holdConnections(t, e, 3) // their streams are scaled too once the action is on
	await(100)
	rc := dialRaw(t, e.addr)
	start := time.Now()
	rc.write("GET / HTTP/1.1\r\nhost: a\r\nx-hold: 1\r\nx-envoy-upstream-rq-timeout-ms: 0\r\n\r\n")
	resp, body := rc.response()
	if resp.StatusCode != http.StatusGatewayTimeout || body != bodyStreamTimeout {
		t.Errorf("got %d %q; want 504 %q", resp.StatusCode, body, bodyStreamTimeout)
	}
	if got := time.Since(start); got < 500*time.Millisecond || got > 5*time.Second {
		t.Errorf("answered after %v; want about 0.6s (2 %% of 30s)", got)
	}
}
