package httpproxy

import (
	"fmt"
	"testing"
)

func healthCheckHCM(passThrough bool, minHealthy string) string {
	return fmt.Sprintf(webHCM+`http_filters:
- name: envoy.filters.http.health_check
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.health_check.v3.HealthCheck
    pass_through_mode: %v
    headers: [{name: ":path", string_match: {exact: /healthz}}]
    %s
- name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`, passThrough, minHealthy)
}

func TestHealthCheckFilter(t *testing.T) {
	up := echo(t, "up")
	tests := []struct {
		name        string
		passThrough bool
		minHealthy  string
		failed      bool
		path        string
		status      int
		body        string
		headers     map[string]string
	}{
		{name: "answered locally", path: "/healthz", status: 200, body: "",
			headers: map[string]string{"X-Envoy-Upstream-Healthchecked-Cluster": "local", "X-Upstream": ""}},
		{name: "other paths routed", path: "/app", status: 200, body: "up /app"},
		{name: "failed", failed: true, path: "/healthz", status: 503, body: ""},
		{name: "failed marks other responses", failed: true, path: "/app", status: 200, body: "up /app",
			headers: map[string]string{"X-Envoy-Immediate-Health-Check-Fail": "true"}},
		{name: "pass through", passThrough: true, path: "/healthz", status: 200, body: "up /healthz"},
		{name: "pass through failed", passThrough: true, failed: true, path: "/healthz", status: 503, body: ""},
		{name: "min healthy met", minHealthy: "cluster_min_healthy_percentages: {web: {value: 100}}", path: "/healthz", status: 200},
		{name: "min healthy missing cluster", minHealthy: "cluster_min_healthy_percentages: {nope: {value: 10}}", path: "/healthz", status: 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOptions{
				clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
				hcm:      healthCheckHCM(tt.passThrough, tt.minHealthy),
			})
			e.failed.Store(tt.failed)
			resp, body := e.get(e.client(), tt.path)
			if resp.StatusCode != tt.status {
				t.Errorf("status = %d; want %d", resp.StatusCode, tt.status)
			}
			if tt.body != "" || tt.status != 200 {
				if body != tt.body {
					t.Errorf("body = %q; want %q", body, tt.body)
				}
			}
			for k, want := range tt.headers {
				if got := resp.Header.Get(k); got != want {
					t.Errorf("header %s = %q; want %q", k, got, want)
				}
			}
		})
	}
}
