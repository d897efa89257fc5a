package httpproxy

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/legateproxy/legate/internal/clock/clocktest"
	"github.com/legateproxy/legate/stats"
)

// TestStreamIdleTimerOnTestClock checks that the stream idle timer stays on the system clock
// when the connection manager's clock (Deps.Now) is a test's: the timer takes its stamps from
// the stream's readings of Deps.Now only when those carry the system's monotonic clock
// (shared.monotonic). A response whose head comes 1.2 s after the request and whose body's
// end comes 1.2 s later never leaves the stream idle for the 2 s timeout, so it is served
// whole. Stamped from a test clock an hour behind (wall time only, as clocktest.Fake's
// readings), the head's arrival would lie an hour in the past and the timer would reset the
// stream at 2 s.
func TestStreamIdleTimerOnTestClock(t *testing.T) {
	const gap = 1200 * time.Millisecond
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(gap) // the pacing under test
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush() // the head alone
		time.Sleep(gap)
		io.WriteString(w, "ab")
	}))
	t.Cleanup(up.Close)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		// The connection's idle deadline is a socket deadline on Deps.Now: a long idle
		// timeout keeps it ahead of the system clock.
		hcm: twoRouteHCM("/", "web", "web", "stream_idle_timeout: 2s\ncommon_http_protocol_options: {idle_timeout: 36000s}"),
		now: func() time.Time { return time.Now().Round(0).Add(-time.Hour) },
	})
	rc := dialRaw(t, e.addr)
	rc.write("GET / HTTP/1.1\r\nhost: a\r\nx-envoy-upstream-rq-timeout-ms: 0\r\n\r\n") // no deadline on the test clock
	resp, body := rc.response()
	if resp.StatusCode != http.StatusOK || body != "ab" {
		t.Errorf("got %d %q; want 200 \"ab\" (the stream was never idle for 2 s)", resp.StatusCode, body)
	}
	if got := e.stat("http.ingress.downstream_rq_idle_timeout"); got != 0 {
		t.Errorf("downstream_rq_idle_timeout = %d; want 0", got)
	}
}

// TestDurationsFromSharedReadings checks the durations the stream takes from its shared
// readings of the clock (the head's arrival also starts the attempt; the response head's also
// stamps the idle timer): an upstream that answers 300 ms after the request and sends its
// body 300 ms later gives x-envoy-upstream-service-time, %RESPONSE_DURATION% and %DURATION%
// of at least 300, 300 and 600 ms, and less than a second more.
func TestDurationsFromSharedReadings(t *testing.T) {
	const gap = 300 * time.Millisecond
	e, path := loggedEnv(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/next" {
			return
		}
		time.Sleep(gap) // the pacing under test
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		time.Sleep(gap)
		io.WriteString(w, "ab")
	}, "stream_idle_timeout: 5s\n", "%RESPONSE_DURATION% %DURATION%\n", nil)
	rc := dialRaw(t, e.addr)
	sent := time.Now()
	rc.write("GET / HTTP/1.1\r\nhost: a\r\n\r\n")
	resp, body := rc.response()
	// Every duration the proxy measures lies within what the client saw, from before its
	// request was written to after an answer that follows the proxy's reading: that is the
	// upper bound, so that a loaded machine's late wake-ups stretch both alike instead of
	// failing a fixed window. The proxy rounds to the millisecond, hence the 1.
	seen := func() int { return int(time.Since(sent).Milliseconds()) + 1 }
	headSeen := seen() // x-envoy-upstream-service-time was set before the head was sent
	if resp.StatusCode != http.StatusOK || body != "ab" {
		t.Fatalf("got %d %q; want 200 \"ab\"", resp.StatusCode, body)
	}
	inRange := func(what string, got, min, max int) {
		t.Helper()
		if got < min || got > max {
			t.Errorf("%s = %d ms; want [%d, %d]: at least the upstream's pacing, at most what the client saw", what, got, min, max)
		}
	}
	st, err := strconv.Atoi(resp.Header.Get("x-envoy-upstream-service-time"))
	if err != nil {
		t.Fatalf("x-envoy-upstream-service-time = %q: %v", resp.Header.Get("x-envoy-upstream-service-time"), err)
	}
	inRange("x-envoy-upstream-service-time", st, 300, headSeen)
	// The stream's log line is written before its connection reads the next request.
	rc.write("GET /next HTTP/1.1\r\nhost: a\r\n\r\n")
	if resp, _ := rc.response(); resp.StatusCode != http.StatusOK {
		t.Fatalf("next request: got %d; want 200", resp.StatusCode)
	}
	logSeen := seen() // the first stream ended before this answer
	lines := e.readLog(t, path)
	if len(lines) == 0 {
		t.Fatal("access log is empty; want the first request's line")
	}
	var rd, d int
	if _, err := fmt.Sscanf(lines[0], "%d %d", &rd, &d); err != nil {
		t.Fatalf("access log line %q: %v", lines[0], err)
	}
	inRange("%RESPONSE_DURATION%", rd, 300, logSeen)
	inRange("%DURATION%", d, 600, logSeen)
}

// loggedEnv is an env whose routes (twoRouteHCM's, with the fields extra) go to an upstream
// serving h, with an access log of format written to the file path; now is Deps.Now (nil: the
// system clock).
func loggedEnv(t *testing.T, h http.HandlerFunc, extra, format string, now func() time.Time) (e *env, path string) {
	t.Helper()
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)
	path = filepath.Join(t.TempDir(), "access.log")
	e = newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm:      twoRouteHCM("/", "web", "web", extra+"access_log:"+fileLogYAML(path, format, "")),
		now:      now,
	})
	return e, path
}

// histogramValues is a stats.HistogramSink that keeps every value recorded, by histogram name.
type histogramValues struct {
	mu     sync.Mutex
	byName map[string][]uint64
}

func (h *histogramValues) Flush(*stats.Snapshot) {}

func (h *histogramValues) OnHistogramComplete(m *stats.Metric, _ stats.Unit, v uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byName == nil {
		h.byName = map[string][]uint64{}
	}
	h.byName[m.Name] = append(h.byName[m.Name], v)
}

func (h *histogramValues) values(name string) []uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.byName[name])
}

// TestDurationsOnTestClock pins every duration of one proxied request to the connection
// manager's clock (Deps.Now), a test clock that moves 300 ms before the upstream's response
// head and 200 ms more before its body: x-envoy-upstream-service-time and %RESPONSE_DURATION%
// are 300, %RESPONSE_TX_DURATION% 200, %DURATION%, downstream_rq_time and upstream_rq_time
// 500. The stream's reading at the response's end also ends the upstream exchange
// (pool.Response.CloseAt): the pool, whose own clock is the system's, reads none, so its
// upstream_rq_time is on the clock its start (pool.Request.Start) was read on.
func TestDurationsOnTestClock(t *testing.T) {
	clk := clocktest.NewFake(time.Now()) // near the system clock: socket deadlines lie ahead
	headSeen := make(chan struct{})
	e, path := loggedEnv(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/next" {
			return
		}
		clk.Advance(300 * time.Millisecond)
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-headSeen: // the client has the head: the stream read the clock for it
		case <-time.After(wait):
			t.Error("the client did not get the response head")
		}
		clk.Advance(200 * time.Millisecond)
		io.WriteString(w, "ab")
	}, "", "%RESPONSE_DURATION% %RESPONSE_TX_DURATION% %DURATION%\n", clk.Now)
	hist := &histogramValues{}
	e.store.AddSink(hist)
	c := e.client()
	c.Transport.(*http.Transport).MaxConnsPerHost = 1
	resp, err := c.Get("http://" + e.addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	close(headSeen)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != "ab" {
		t.Fatalf("got %d %q, %v; want 200 \"ab\"", resp.StatusCode, body, err)
	}
	if got := resp.Header.Get("x-envoy-upstream-service-time"); got != "300" {
		t.Errorf("x-envoy-upstream-service-time = %q; want 300", got)
	}
	e.get(c, "/next") // the first request's log line and histograms are in once this is served
	lines := e.readLog(t, path)
	if len(lines) == 0 || lines[0] != "300 200 500" {
		t.Errorf("access log %q; want first line %q (response, response tx and total durations)", lines, "300 200 500")
	}
	for _, name := range []string{"http.ingress.downstream_rq_time", "cluster.web.upstream_rq_time"} {
		if got := hist.values(name); len(got) == 0 || got[0] != 500 {
			t.Errorf("%s values %v; want 500 first", name, got)
		}
	}
}
