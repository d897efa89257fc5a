package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// routeAllConfig is a bootstrap with one HTTP listener routing every path to
// the cluster "backend" at upstream, plus extra top-level YAML.
func routeAllConfig(upstream, extra string) string {
	u, _ := url.Parse(upstream)
	host, port, _ := strings.Cut(u.Host, ":")
	return `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:
  - name: http
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          route_config:
            virtual_hosts:
            - {name: all, domains: ["*"], routes: [{match: {prefix: "/"}, route: {cluster: backend}}]}
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
  clusters:
  - name: backend
    connect_timeout: 1s
    load_assignment:
      cluster_name: backend
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: ` + host + `, port_value: ` + port + `}}}}]}]
` + extra
}

// statusUpstream answers /status/<code> with that code.
func statusUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := 200
		fmt.Sscanf(strings.TrimPrefix(r.URL.Path, "/status/"), "%d", &code)
		w.WriteHeader(code)
		io.WriteString(w, "ok\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestDashboardCountsTraffic(t *testing.T) {
	upstream := statusUpstream(t)
	p := start(t, "-c", writeConfig(t, routeAllConfig(upstream.URL, hystrixSink)))
	listener := "http://" + p.listenerAddr("http")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.admin+"/dashboard_event_stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	// The rolling window starts with the first flush after a client
	// connects; wait for one frame before sending traffic.
	next := func() map[string]any {
		for sc.Scan() {
			l, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || !strings.Contains(l, "\"HystrixCommand\"") || !strings.Contains(l, "\"name\": \"backend\"") {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("frame is not JSON: %v\n%s", err, l)
			}
			return m
		}
		t.Fatalf("stream ended: %v", sc.Err())
		return nil
	}
	next()
	for i := range 10 {
		path := "/status/200"
		if i%4 == 0 {
			path = "/status/503" // three of ten
		}
		r, err := http.Get(listener + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	for {
		m := next()
		if m["requestCount"] == float64(10) {
			if m["errorCount"] != float64(3) || m["rollingCountSuccess"] != float64(7) || m["errorPercentage"] != float64(30) {
				t.Errorf("frame counts = errorCount %v, success %v, errorPercentage %v; want 3, 7, 30", m["errorCount"], m["rollingCountSuccess"], m["errorPercentage"])
			}
			if _, ok := m["latencyExecute"].(map[string]any)["50"]; !ok {
				t.Errorf("latencyExecute lacks the median: %v", m["latencyExecute"])
			}
			return
		}
		if rc, _ := m["requestCount"].(float64); rc > 10 {
			t.Fatalf("requestCount = %v, more than was sent", rc)
		}
	}
}
