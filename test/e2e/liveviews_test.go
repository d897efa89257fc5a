package e2e

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestCrossOriginPostRefused(t *testing.T) {
	p := start(t, "-c", writeConfig(t, minimalConfig))
	post := func(header map[string]string) int {
		req, _ := http.NewRequest(http.MethodPost, p.admin+"/quitquitquit", nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}); code != http.StatusForbidden {
		t.Errorf("cross-origin POST /quitquitquit = %d, want 403", code)
	}
	if code, _, _ := p.get("/ready"); code != 200 {
		t.Fatalf("server not running after a refused cross-origin quit")
	}
	if _, _, body := p.get("/stats?filter=cross_origin_refused"); body != "admin.cross_origin_refused: 1\n" {
		t.Errorf("refusal not counted: %q", body)
	}
	// Same origin (the admin page's own form) works.
	host := strings.TrimPrefix(p.admin, "http://")
	if code := post(map[string]string{"Origin": "http://" + host, "Sec-Fetch-Site": "same-origin"}); code != 200 {
		t.Errorf("same-origin POST /quitquitquit = %d, want 200", code)
	}
	if code := p.wait(20 * time.Second); code != 0 {
		t.Errorf("exit code = %d", code)
	}
}

func TestNonBrowserPostWorks(t *testing.T) {
	p := start(t, "-c", writeConfig(t, minimalConfig))
	if code, _, _ := p.post("/quitquitquit"); code != 200 {
		t.Fatalf("plain POST /quitquitquit = %d", code)
	}
	p.wait(20 * time.Second)
}

const hystrixSink = `
stats_flush_interval: 0.2s
stats_sinks:
- name: envoy.stat_sinks.hystrix
  typed_config:
    "@type": type.googleapis.com/envoy.config.metrics.v3.HystrixSink
    num_buckets: 3
`

// readEvents reads SSE lines from path until n data messages naming the
// backend cluster have arrived.
func readEvents(t *testing.T, url string, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q", ct)
	}
	var msgs []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "data: ") && strings.Contains(l, "\"name\": \"backend\"") {
			msgs = append(msgs, l)
			if len(msgs) == n {
				return msgs
			}
		}
	}
	t.Fatalf("stream ended after %d messages: %v", len(msgs), sc.Err())
	return nil
}

func TestDashboardStream(t *testing.T) {
	p := start(t, "-c", writeConfig(t, minimalConfig+hystrixSink))
	done := make(chan []string, 2)
	for _, path := range []string{"/dashboard_event_stream", "/hystrix_event_stream"} {
		go func() { done <- readEvents(t, p.admin+path, 4) }()
	}
	for range 2 {
		msgs := <-done
		var kinds []string
		for _, m := range msgs {
			switch {
			case strings.Contains(m, "\"type\": \"HystrixCommand\""):
				kinds = append(kinds, "command")
			case strings.Contains(m, "\"type\": \"HystrixThreadPool\""):
				kinds = append(kinds, "pool")
			}
		}
		if len(kinds) != 4 {
			t.Errorf("messages = %v; want HystrixCommand and HystrixThreadPool messages", msgs)
		}
	}
}

func TestDashboardStreamWithoutSink(t *testing.T) {
	p := start(t, "-c", writeConfig(t, minimalConfig))
	if code, _, _ := p.get("/dashboard_event_stream"); code != 404 {
		t.Errorf("GET /dashboard_event_stream without a sink = %d, want 404", code)
	}
}
