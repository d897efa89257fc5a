package fault

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
)

// TestFaultFilter drives envoy.filters.http.fault through a listener and an upstream: a
// route's fixed abort, header-controlled delays, aborts and response throughput, the
// max_active_faults cap and the fault.* stats (with the downstream cluster's).
func TestFaultFilter(t *testing.T) {
	p := filtertest.StartPolicy(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Write([]byte(strings.Repeat("x", 2048)))
			return
		}
		io.Copy(io.Discard, r.Body)
		w.Write([]byte("ok"))
	}, Register, `    - match: {prefix: "/broken"}
      route: {cluster: web}
      typed_per_filter_config:
        envoy.filters.http.fault:
          "@type": type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault
          abort: {http_status: 503, percentage: {numerator: 100}}
    - match: {prefix: "/"}
      route: {cluster: web}`, `- name: envoy.filters.http.fault
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault
    delay: {header_delay: {}, percentage: {numerator: 100}}
    abort: {header_abort: {}, percentage: {numerator: 100}}
    response_rate_limit: {header_limit: {}, percentage: {numerator: 100}}
    max_active_faults: 1`)
	c := p.Client()
	if resp, body := p.Get(c, "/broken", "x-envoy-downstream-service-cluster", "svc"); resp.StatusCode != 503 || body != "fault filter abort" {
		t.Errorf("GET /broken = %d %q; want 503 fault filter abort", resp.StatusCode, body)
	}
	if resp, body := p.Get(c, "/", "x-envoy-fault-abort-request", "418"); resp.StatusCode != 418 || body != "fault filter abort" {
		t.Errorf("GET / with an abort header = %d %q; want 418 fault filter abort", resp.StatusCode, body)
	}
	start := time.Now()
	if resp, body := p.Get(c, "/", "x-envoy-fault-delay-request", "300"); resp.StatusCode != 200 || body != "ok" {
		t.Errorf("GET / with a delay header = %d %q; want 200 ok", resp.StatusCode, body)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("delayed request answered in %v; want at least 300ms", d)
	}
	start = time.Now()
	if resp, body := p.Get(c, "/big", "x-envoy-fault-throughput-response", "1"); resp.StatusCode != 200 || len(body) != 2048 {
		t.Errorf("GET /big at 1 KiB/s = %d, %d bytes; want 200 and 2048", resp.StatusCode, len(body))
	}
	if d := time.Since(start); d < 1900*time.Millisecond {
		t.Errorf("2 KiB at 1 KiB/s took %v; want about 2s", d)
	}

	// One fault in flight: the next request is not faulted and counts an overflow.
	held := make(chan int, 1)
	go func() {
		resp, _ := p.Get(p.Client(), "/", "x-envoy-fault-delay-request", "3000")
		held <- resp.StatusCode
	}()
	deadline := time.Now().Add(filtertest.Wait)
	for p.Stat("http.ingress.fault.active_faults") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the delayed request never became an active fault")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if resp, body := p.Get(c, "/", "x-envoy-fault-abort-request", "503"); resp.StatusCode != 200 || body != "ok" {
		t.Errorf("GET / with an abort header while a fault is active = %d %q; want 200 ok (max_active_faults 1)", resp.StatusCode, body)
	}
	if code := <-held; code != 200 {
		t.Errorf("held request = %d; want 200", code)
	}
	for name, want := range map[string]uint64{
		"http.ingress.fault.aborts_injected":      2,
		"http.ingress.fault.delays_injected":      2,
		"http.ingress.fault.response_rl_injected": 1,
		"http.ingress.fault.faults_overflow":      1,
		"http.ingress.fault.active_faults":        0,
		"http.ingress.fault.svc.aborts_injected":  1,
	} {
		if got := p.Stat(name); got != want {
			t.Errorf("%s = %d; want %d", name, got, want)
		}
	}
}
