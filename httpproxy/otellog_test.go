package httpproxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	collogsv1 "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/accesslog/als/alstest"
)

// logsCollector is an OTLP LogsService (grpc-go, the generated OTLP service) on 127.0.0.1 that
// hands over every export it receives.
type logsCollector struct {
	collogsv1.UnimplementedLogsServiceServer
	exports chan *collogsv1.ExportLogsServiceRequest
}

func (c *logsCollector) Export(_ context.Context, req *collogsv1.ExportLogsServiceRequest) (*collogsv1.ExportLogsServiceResponse, error) {
	c.exports <- req
	return &collogsv1.ExportLogsServiceResponse{}, nil
}

func startLogsCollector(t *testing.T) (*logsCollector, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &logsCollector{exports: make(chan *collogsv1.ExportLogsServiceRequest, 64)}
	srv := grpc.NewServer()
	collogsv1.RegisterLogsServiceServer(srv, c)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return c, ln.Addr().String()
}

const otelLogHCM = webHCM + `access_log:
- name: envoy.access_loggers.open_telemetry
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.access_loggers.open_telemetry.v3.OpenTelemetryAccessLogConfig
    common_config:
      log_name: edge
      transport_api_version: V3
      grpc_service: {envoy_grpc: {cluster_name: als}}
      buffer_flush_interval: 0.05s
      custom_tags: [{tag: team, literal: {value: blue}}]
    resource_attributes: {values: [{key: region, value: {string_value: r1}}, {key: log_name, value: {string_value: renamed}}]}
    body: {string_value: "%REQ(:METHOD)% %REQ(:PATH)% %PROTOCOL%"}
    attributes:
      values:
      - {key: code, value: {string_value: "%RESPONSE_CODE%"}}
      - {key: fixed, value: {int_value: 7}}
      - {key: nested, value: {kvlist_value: {values: [{key: ua, value: {string_value: "%REQ(USER-AGENT)%"}}]}}}
      - {key: list, value: {array_value: {values: [{string_value: "%REQ(X-MISSING)%"}]}}}
`

// TestOpenTelemetryAccessLog sends requests through a real listener and checks what a real
// OTLP logs collector receives: one LogRecord per request stamped with the request's start,
// its body and attributes formatted from the request (strings at any depth, other values kept),
// custom tags as attributes, and a Resource with Envoy's built-in labels overridden by
// resource_attributes.
func TestOpenTelemetryAccessLog(t *testing.T) {
	col, addr := startLogsCollector(t)
	up := echo(t, "a")
	var e *env
	m := alstest.RunManager(t, clusterDialer(&e))
	e = newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String()), staticCluster("als", "", addr)},
		hcm:      otelLogHCM,
		als:      m,
	})
	before := time.Now()
	c := e.client()
	for i := range 2 {
		e.get(c, fmt.Sprintf("/p%d", i), "user-agent", "tester")
	}
	var bodies []string
	deadline := time.After(wait)
	for len(bodies) < 2 {
		select {
		case req := <-col.exports:
			rl := req.GetResourceLogs()
			if len(rl) != 1 || len(rl[0].GetScopeLogs()) != 1 {
				t.Fatalf("export = %v; want one ResourceLogs with one ScopeLogs", req)
			}
			res := map[string]string{}
			for _, kv := range rl[0].GetResource().GetAttributes() {
				res[kv.GetKey()] = kv.GetValue().GetStringValue()
			}
			if res["log_name"] != "renamed" || res["node_name"] != "node-1" || res["region"] != "r1" {
				t.Errorf("resource attributes = %v; want log_name renamed (resource_attributes wins), node_name node-1, region r1", res)
			}
			for _, rec := range rl[0].GetScopeLogs()[0].GetLogRecords() {
				bodies = append(bodies, rec.GetBody().GetStringValue())
				if ts := time.Unix(0, int64(rec.GetTimeUnixNano())); ts.Before(before.Add(-time.Second)) || ts.After(time.Now()) {
					t.Errorf("time_unix_nano = %v; want the request's start (after %v)", ts, before)
				}
				attrs := map[string]*commonv1.AnyValue{}
				for _, kv := range rec.GetAttributes() {
					attrs[kv.GetKey()] = kv.GetValue()
				}
				if attrs["code"].GetStringValue() != "200" || attrs["fixed"].GetIntValue() != 7 || attrs["team"].GetStringValue() != "blue" {
					t.Errorf("attributes = %v; want code 200, fixed 7, team blue", rec.GetAttributes())
				}
				if kv := attrs["nested"].GetKvlistValue().GetValues(); len(kv) != 1 || kv[0].GetValue().GetStringValue() != "tester" {
					t.Errorf("nested = %v; want ua tester", attrs["nested"])
				}
				if a := attrs["list"].GetArrayValue().GetValues(); len(a) != 1 || a[0].GetStringValue() != "-" {
					t.Errorf("list = %v; want [\"-\"] (a missing header)", attrs["list"])
				}
			}
		case <-deadline:
			t.Fatalf("received %d records; want 2", len(bodies))
		}
	}
	if bodies[0] != "GET /p0 HTTP/1.1" || bodies[1] != "GET /p1 HTTP/1.1" {
		t.Errorf("bodies = %q; want GET /p0 HTTP/1.1, GET /p1 HTTP/1.1", bodies)
	}
}

// TestOpenTelemetryAccessLogOverHTTP checks http_service: records reach a real net/http
// OTLP/HTTP collector as a protobuf ExportLogsServiceRequest POSTed to the URI's path, under
// a Resource with the built-in labels and the static resource detector's attributes.
func TestOpenTelemetryAccessLogOverHTTP(t *testing.T) {
	got := make(chan *collogsv1.ExportLogsServiceRequest, 8)
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req collogsv1.ExportLogsServiceRequest
		if r.URL.Path != "/v1/logs" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(b, &req) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		got <- &req
	}))
	t.Cleanup(col.Close)
	up := echo(t, "a")
	var e *env
	m := alstest.RunManager(t, clusterDialer(&e))
	e = newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String()), staticCluster("als", "", col.Listener.Addr().String())},
		hcm: webHCM + `access_log:
- name: envoy.access_loggers.open_telemetry
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.access_loggers.open_telemetry.v3.OpenTelemetryAccessLogConfig
    log_name: edge
    buffer_flush_interval: 0.05s
    http_service: {http_uri: {uri: "http://collector:4318/v1/logs", cluster: als, timeout: 2s}}
    resource_detectors:
    - name: envoy.tracers.opentelemetry.resource_detectors.static_config
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.tracers.opentelemetry.resource_detectors.v3.StaticConfigResourceDetectorConfig
        attributes: {region: r2}
    body: {string_value: "%REQ(:METHOD)% %REQ(:PATH)%"}
`,
		als: m,
	})
	e.get(e.client(), "/over-http")
	select {
	case req := <-got:
		rl := req.GetResourceLogs()
		if len(rl) != 1 || len(rl[0].GetScopeLogs()) != 1 || len(rl[0].GetScopeLogs()[0].GetLogRecords()) != 1 {
			t.Fatalf("export = %v; want one record", req)
		}
		if b := rl[0].GetScopeLogs()[0].GetLogRecords()[0].GetBody().GetStringValue(); b != "GET /over-http" {
			t.Errorf("body %q; want GET /over-http", b)
		}
		res := map[string]string{}
		for _, kv := range rl[0].GetResource().GetAttributes() {
			res[kv.GetKey()] = kv.GetValue().GetStringValue()
		}
		if res["log_name"] != "edge" || res["region"] != "r2" {
			t.Errorf("resource %v; want log_name edge and region r2", res)
		}
	case <-time.After(wait):
		t.Fatal("no OTLP/HTTP logs export reached the collector")
	}
}
