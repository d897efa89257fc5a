package httpproxy

import (
	"encoding/hex"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/httpproxy/filters/setmetadata"
	"github.com/legateproxy/legate/tracing"
)

// decoratedHCM is an HCM with OpenTelemetry tracing whose routes are routes (YAML under
// "routes:").
func decoratedHCM(routes, tracingExtra string) string {
	return `stat_prefix: ingress
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
` + routes + `tracing:
  custom_tags:
  - {tag: team, literal: {value: blue}}
  provider:
    name: envoy.tracers.opentelemetry
    typed_config:
      "@type": type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig
      grpc_service: {envoy_grpc: {cluster_name: otel}}
` + tracingExtra
}

// decoratorUpstream answers with the x-envoy-decorator-operation and traceparent it received
// and, when the request asks for it, an x-envoy-decorator-operation of its own.
func decoratorUpstream(t *testing.T) string {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-Operation", r.Header.Get("X-Envoy-Decorator-Operation"))
		w.Header().Set("X-Seen-Traceparent", r.Header.Get("Traceparent"))
		if op := r.Header.Get("X-Answer-Operation"); op != "" {
			w.Header().Set("X-Envoy-Decorator-Operation", op)
		}
	}))
	t.Cleanup(s.Close)
	return s.Listener.Addr().String()
}

func decoratedEnv(t *testing.T, hcm string, dir corev3.TrafficDirection) (*env, *traceCollector) {
	col, addr := startTraceCollector(t)
	var e *env
	e = newEnv(t, envOptions{
		clusters:  []string{staticCluster("web", "", decoratorUpstream(t)), staticCluster("otel", "", addr)},
		hcm:       hcm,
		runtime:   flushEachSpan,
		tracing:   tracing.Deps{Dial: clusterDialer(&e), NodeID: "node-1"},
		direction: dir,
	})
	return e, col
}

const decoratedRoutes = `    - match: {prefix: "/checkout"}
      route: {cluster: web}
      decorator: {operation: checkout}
    - match: {prefix: "/quiet"}
      route: {cluster: web}
      decorator: {operation: quiet, propagate: false}
    - match: {prefix: "/"}
      route: {cluster: web}
`

// TestTraceDecoratorIngress checks route.decorator on an ingress listener, as Envoy applies
// it: the decorator's operation names the span and goes back to the client in
// x-envoy-decorator-operation (unless propagate is false); a request's own
// x-envoy-decorator-operation names the span instead, is not forwarded and suppresses the
// response header.
func TestTraceDecoratorIngress(t *testing.T) {
	e, col := decoratedEnv(t, decoratedHCM(decoratedRoutes, ""), corev3.TrafficDirection_UNSPECIFIED)
	c := e.client()
	for _, tc := range []struct {
		path, reqOp  string
		span, respOp string
	}{
		{"/checkout", "", "checkout", "checkout"},
		{"/quiet", "", "quiet", ""},
		{"/checkout", "from-client", "from-client", ""},
		{"/other", "", "ingress", ""},
	} {
		hdr := []string{"x-envoy-force-trace", "1"}
		if tc.reqOp != "" {
			hdr = append(hdr, "x-envoy-decorator-operation", tc.reqOp)
		}
		resp, _ := e.get(c, tc.path, hdr...)
		sp := awaitSpan(t, col)
		if sp.GetName() != tc.span || sp.GetKind() != tracev1.Span_SPAN_KIND_SERVER {
			t.Errorf("%s %q: span %q kind %v; want %q SERVER", tc.path, tc.reqOp, sp.GetName(), sp.GetKind(), tc.span)
		}
		if got := resp.Header.Get("X-Envoy-Decorator-Operation"); got != tc.respOp {
			t.Errorf("%s %q: response x-envoy-decorator-operation = %q; want %q", tc.path, tc.reqOp, got, tc.respOp)
		}
		if got := resp.Header.Get("X-Seen-Operation"); got != "" {
			t.Errorf("%s %q: the upstream got x-envoy-decorator-operation %q on an ingress listener", tc.path, tc.reqOp, got)
		}
	}
}

// TestTraceDecoratorEgress checks an OUTBOUND listener: the downstream span is a CLIENT span
// named "egress <host>" by default or by the decorator, whose operation goes to the upstream
// in x-envoy-decorator-operation when it propagates; the upstream's answer in that header
// renames the span and is not passed to the client.
func TestTraceDecoratorEgress(t *testing.T) {
	e, col := decoratedEnv(t, decoratedHCM(decoratedRoutes, ""), corev3.TrafficDirection_OUTBOUND)
	c := e.client()
	for _, tc := range []struct {
		path, answer string
		span, seen   string
	}{
		{"/checkout", "", "checkout", "checkout"},
		{"/quiet", "", "quiet", ""},
		{"/other", "", "egress " + e.addr, ""},
		{"/other", "remote-op", "remote-op", ""},
	} {
		hdr := []string{"x-envoy-force-trace", "1"}
		if tc.answer != "" {
			hdr = append(hdr, "x-answer-operation", tc.answer)
		}
		resp, _ := e.get(c, tc.path, hdr...)
		sp := awaitSpan(t, col)
		if sp.GetName() != tc.span || sp.GetKind() != tracev1.Span_SPAN_KIND_CLIENT {
			t.Errorf("%s: span %q kind %v; want %q CLIENT", tc.path, sp.GetName(), sp.GetKind(), tc.span)
		}
		if got := resp.Header.Get("X-Seen-Operation"); got != tc.seen {
			t.Errorf("%s: upstream saw x-envoy-decorator-operation %q; want %q", tc.path, got, tc.seen)
		}
		if got := resp.Header.Get("X-Envoy-Decorator-Operation"); got != "" {
			t.Errorf("%s: the client got x-envoy-decorator-operation %q on an egress listener", tc.path, got)
		}
	}
}

// TestRouteTracing checks route.tracing: a route's sampling replaces the connection manager's
// (random_sampling 0 there, 100 % on the route) and its custom tags join the connection
// manager's, winning on a shared name. Unsampled requests still carry an unsampled context.
func TestRouteTracing(t *testing.T) {
	routes := `    - match: {prefix: "/traced"}
      route: {cluster: web}
      tracing:
        random_sampling: {numerator: 100}
        custom_tags:
        - {tag: team, literal: {value: red}}
        - {tag: shard, request_header: {name: x-shard, default_value: none}}
    - match: {prefix: "/"}
      route: {cluster: web}
`
	e, col := decoratedEnv(t, decoratedHCM(routes, "  random_sampling: {value: 0}\n"), corev3.TrafficDirection_UNSPECIFIED)
	c := e.client()
	resp, _ := e.get(c, "/plain")
	if tp := resp.Header.Get("X-Seen-Traceparent"); len(tp) != 55 || !strings.HasSuffix(tp, "-00") {
		t.Errorf("unsampled request: upstream traceparent %q; want an unsampled context", tp)
	}
	resp, _ = e.get(c, "/traced", "x-shard", "s9")
	sp := awaitSpan(t, col)
	if want := "00-" + hex.EncodeToString(sp.GetTraceId()) + "-" + hex.EncodeToString(sp.GetSpanId()) + "-01"; resp.Header.Get("X-Seen-Traceparent") != want {
		t.Errorf("traced route: upstream traceparent %q; want %q", resp.Header.Get("X-Seen-Traceparent"), want)
	}
	tags := map[string]string{}
	for _, kv := range sp.GetAttributes() {
		tags[kv.GetKey()] = kv.GetValue().GetStringValue()
	}
	if tags["team"] != "red" || tags["shard"] != "s9" || tags["http.url"] != "http://"+e.addr+"/traced" {
		t.Errorf("tags %v; want team red (the route's), shard s9 and the /traced url", tags)
	}
	if got := e.stat("http.ingress.tracing.random_sampling"); got != 1 {
		t.Errorf("random_sampling = %d; want 1 (the /traced request)", got)
	}
}

// TestUpstreamSpanPerAttempt checks that with spawn_upstream_span each attempt of a retried
// request gets a CLIENT span of its own, child of the downstream span, carrying that attempt's
// status, and that each attempt's request carried its own span's context.
func TestUpstreamSpanPerAttempt(t *testing.T) {
	var calls atomic.Int32
	seen := make(chan string, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Traceparent")
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(up.Close)
	col, addr := startTraceCollector(t)
	hcm := decoratedHCM(`    - match: {prefix: "/"}
      route: {cluster: web, retry_policy: {retry_on: 5xx, num_retries: 1}}
`, "  spawn_upstream_span: true\n")
	var e *env
	e = newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String()), staticCluster("otel", "", addr)},
		hcm:      hcm,
		runtime:  flushEachSpan,
		tracing:  tracing.Deps{Dial: clusterDialer(&e), NodeID: "node-1"},
	})
	resp, _ := e.get(e.client(), "/", "x-envoy-force-trace", "1")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d; want 200 after one retry", resp.StatusCode)
	}
	var down *tracev1.Span
	var ups []*tracev1.Span
	for range 3 {
		sp := awaitSpan(t, col)
		if sp.GetKind() == tracev1.Span_SPAN_KIND_SERVER {
			down = sp
		} else {
			ups = append(ups, sp)
		}
	}
	if down == nil || len(ups) != 2 {
		t.Fatalf("got server span %v and %d client spans; want one and two", down != nil, len(ups))
	}
	status := func(sp *tracev1.Span) string {
		for _, kv := range sp.GetAttributes() {
			if kv.GetKey() == "http.status_code" {
				return kv.GetValue().GetStringValue()
			}
		}
		return ""
	}
	if status(ups[0]) != "503" || ups[0].GetStatus().GetCode() != tracev1.Status_STATUS_CODE_ERROR || status(ups[1]) != "200" {
		t.Errorf("attempt spans' statuses %s, %s (first error %v); want 503 (error) then 200", status(ups[0]), status(ups[1]), ups[0].GetStatus().GetCode())
	}
	for i, sp := range ups {
		if string(sp.GetParentSpanId()) != string(down.GetSpanId()) || string(sp.GetTraceId()) != string(down.GetTraceId()) {
			t.Errorf("attempt %d: parent %x trace %x; want the downstream span %x", i, sp.GetParentSpanId(), sp.GetTraceId(), down.GetSpanId())
		}
		want := "00-" + hex.EncodeToString(sp.GetTraceId()) + "-" + hex.EncodeToString(sp.GetSpanId()) + "-01"
		if got := <-seen; got != want {
			t.Errorf("attempt %d: upstream traceparent %q; want its span's %q", i, got, want)
		}
	}
	if string(ups[0].GetSpanId()) == string(ups[1].GetSpanId()) {
		t.Errorf("both attempts have span %x; want one each", ups[0].GetSpanId())
	}
}

// TestZipkinUnsampledContext checks that an unsampled request carries B3 context with
// x-b3-sampled 0 (Envoy's Zipkin driver makes a span for every request) and exports nothing:
// the first span the receiver gets is the forced request's that follows.
func TestZipkinUnsampledContext(t *testing.T) {
	e, spans := newZipkinEnv(t, zipkinHCM("  random_sampling: {value: 0}\n"))
	c := e.client()
	resp, _ := e.get(c, "/quiet")
	if resp.Header.Get("X-Seen-X-B3-Sampled") != "0" || len(resp.Header.Get("X-Seen-X-B3-Traceid")) != 16 || len(resp.Header.Get("X-Seen-X-B3-Spanid")) != 16 {
		t.Errorf("unsampled B3 = %s/%s/%s; want ids and sampled 0", resp.Header.Get("X-Seen-X-B3-Traceid"), resp.Header.Get("X-Seen-X-B3-Spanid"), resp.Header.Get("X-Seen-X-B3-Sampled"))
	}
	e.get(c, "/loud", "x-envoy-force-trace", "1")
	if sp := awaitZipkin(t, spans); sp.Tags["http.url"] != "http://"+e.addr+"/loud" {
		t.Errorf("first exported span is %s; want the forced /loud request's", sp.Tags["http.url"])
	}
}

// TestZipkinCollectorService checks Zipkin's collector_service: reports go to its http_uri's
// path through its cluster, with the URI's host and the configured headers.
func TestZipkinCollectorService(t *testing.T) {
	type report struct{ path, host, key string }
	got := make(chan report, 8)
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- report{r.URL.Path, r.Host, r.Header.Get("X-Api-Key")}
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(rx.Close)
	hcm := webHCM + `tracing:
  provider:
    name: envoy.tracers.zipkin
    typed_config:
      "@type": type.googleapis.com/envoy.config.trace.v3.ZipkinConfig
      collector_service:
        http_uri: {uri: "http://zipkin.example:9411/api/v2/spans", cluster: zipkin, timeout: 2s}
        request_headers_to_add: [{header: {key: x-api-key, value: k1}}]
`
	var e *env
	e = newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", echoTraceparent(t)), staticCluster("zipkin", "", rx.Listener.Addr().String())},
		hcm:      hcm,
		runtime: func(key string, def uint64) uint64 {
			return flushEachSpan(strings.Replace(key, "zipkin", "opentelemetry", 1), def)
		},
		tracing: tracing.Deps{Dial: clusterDialer(&e), NodeID: "node-1", LocalCluster: "front"},
	})
	e.get(e.client(), "/", "x-envoy-force-trace", "1")
	select {
	case r := <-got:
		if r.path != "/api/v2/spans" || r.host != "zipkin.example:9411" || r.key != "k1" {
			t.Errorf("report to %s host %s key %q; want /api/v2/spans, zipkin.example:9411, k1", r.path, r.host, r.key)
		}
	case <-time.After(wait):
		t.Fatal("no report reached the Zipkin receiver")
	}
}

// TestVerboseSpanEvents checks tracing.verbose: the span carries Envoy's timing events in
// time order, from the request's last byte to the response's.
func TestVerboseSpanEvents(t *testing.T) {
	e, col := newTraceEnv(t, otelTraceHCM("  verbose: true\n"), flushEachSpan)
	e.get(e.client(), "/", "x-envoy-force-trace", "1")
	sp := awaitSpan(t, col)
	var names []string
	var last uint64
	for _, ev := range sp.GetEvents() {
		names = append(names, ev.GetName())
		if ev.GetTimeUnixNano() < last || ev.GetTimeUnixNano() < sp.GetStartTimeUnixNano() || ev.GetTimeUnixNano() > sp.GetEndTimeUnixNano() {
			t.Errorf("event %s at %d out of order or outside the span [%d, %d]", ev.GetName(), ev.GetTimeUnixNano(), sp.GetStartTimeUnixNano(), sp.GetEndTimeUnixNano())
		}
		last = ev.GetTimeUnixNano()
	}
	want := "last_downstream_rx_byte_received first_upstream_tx_byte_sent first_upstream_rx_byte_received last_downstream_tx_byte_sent"
	if strings.Join(names, " ") != want {
		t.Errorf("events %v; want %s", names, want)
	}
}

// TestMetadataCustomTags checks custom_tags metadata of kinds request (the dynamic metadata a
// filter wrote: set_metadata), route (Route.metadata), cluster (the cluster's metadata) and
// host (the endpoint's envoy.lb metadata), with paths into structs, numbers as Envoy prints
// them, and the default when the path leads nowhere.
func TestMetadataCustomTags(t *testing.T) {
	col, addr := startTraceCollector(t)
	var e *env
	e = newEnv(t, envOptions{
		clusters: []string{webWithMetadata(echoTraceparent(t)), staticCluster("otel", "", addr)},
		filters:  filtersOf(t, nil, setmetadata.Register),
		runtime:  flushEachSpan,
		tracing:  tracing.Deps{Dial: clusterDialer(&e), NodeID: "node-1"},
		hcm: `stat_prefix: ingress
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: {prefix: "/"}
      route: {cluster: web}
      metadata: {filter_metadata: {acme: {owner: {team: red}, weight: 2.5}}}
http_filters:
- name: envoy.filters.http.set_metadata
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.set_metadata.v3.Config
    metadata: [{metadata_namespace: req, value: {tier: gold, count: 3}}]
- name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
tracing:
  custom_tags:
  - {tag: tier, metadata: {kind: {request: {}}, metadata_key: {key: req, path: [{key: tier}]}}}
  - {tag: count, metadata: {kind: {request: {}}, metadata_key: {key: req, path: [{key: count}]}}}
  - {tag: team, metadata: {kind: {route: {}}, metadata_key: {key: acme, path: [{key: owner}, {key: team}]}}}
  - {tag: weight, metadata: {kind: {route: {}}, metadata_key: {key: acme, path: [{key: weight}]}}}
  - {tag: absent, metadata: {kind: {route: {}}, metadata_key: {key: acme, path: [{key: nope}]}, default_value: dflt}}
  - {tag: owner, metadata: {kind: {cluster: {}}, metadata_key: {key: acme, path: [{key: owner}]}}}
  - {tag: canary, metadata: {kind: {host: {}}, metadata_key: {key: envoy.lb, path: [{key: canary}]}}}
  provider:
    name: envoy.tracers.opentelemetry
    typed_config:
      "@type": type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig
      grpc_service: {envoy_grpc: {cluster_name: otel}}
`,
	})
	e.get(e.client(), "/", "x-envoy-force-trace", "1")
	sp := awaitSpan(t, col)
	tags := map[string]string{}
	for _, kv := range sp.GetAttributes() {
		tags[kv.GetKey()] = kv.GetValue().GetStringValue()
	}
	for k, v := range map[string]string{"tier": "gold", "count": "3", "team": "red", "weight": "2.5", "absent": "dflt", "owner": "payments", "canary": "true"} {
		if tags[k] != v {
			t.Errorf("tag %s = %q; want %q", k, tags[k], v)
		}
	}
}

// webWithMetadata is cluster web at addr with cluster metadata acme.owner and an endpoint
// whose envoy.lb metadata says canary.
func webWithMetadata(addr string) string {
	h, p, _ := net.SplitHostPort(addr)
	return `name: web
type: STATIC
connect_timeout: 1s
metadata: {filter_metadata: {acme: {owner: payments}}}
load_assignment:
  cluster_name: web
  endpoints:
  - lb_endpoints:
    - endpoint: {address: {socket_address: {address: ` + h + `, port_value: ` + p + `}}}
      metadata: {filter_metadata: {envoy.lb: {canary: true}}}
`
}

// TestRouterConfig checks the router's typed_config: suppress_envoy_headers keeps the
// router's x-envoy-* headers off the upstream request and the response; a field Legate does
// not implement, and an upstream filter chain with more than the codec, fail the load with
// their path.
func TestRouterConfig(t *testing.T) {
	hcm := func(router string) string {
		return webHCM + `http_filters:
- name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router` + router + `}
`
	}
	seen := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-Expected", r.Header.Get("X-Envoy-Expected-Rq-Timeout-Ms"))
	}))
	t.Cleanup(seen.Close)
	for _, tc := range []struct {
		router   string
		suppress bool
	}{
		{"", false},
		{`, suppress_envoy_headers: true, upstream_http_filters: [{name: envoy.filters.http.upstream_codec, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.upstream_codec.v3.UpstreamCodec}}]`, true},
	} {
		e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", seen.Listener.Addr().String())}, hcm: hcm(tc.router)})
		resp, _ := e.get(e.client(), "/")
		if got := resp.Header.Get("X-Envoy-Upstream-Service-Time") != "" || resp.Header.Get("X-Seen-Expected") != ""; got == tc.suppress {
			t.Errorf("router %q: service time %q, upstream's expected timeout %q; want them absent exactly when suppressed", tc.router, resp.Header.Get("X-Envoy-Upstream-Service-Time"), resp.Header.Get("X-Seen-Expected"))
		}
	}
	for _, bad := range []string{
		`, dynamic_stats: false`,
		`, upstream_log: [{name: envoy.access_loggers.stdout, typed_config: {"@type": type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog}}]`,
		`, strict_check_headers: [x-envoy-max-retries]`,
		`, upstream_http_filters: [{name: envoy.filters.http.cors, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors}}, {name: envoy.filters.http.upstream_codec, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.upstream_codec.v3.UpstreamCodec}}]`,
		`, upstream_http_filters: [{name: envoy.filters.http.buffer, is_optional: true, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer, max_request_bytes: 10}}, {name: envoy.filters.http.upstream_codec, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.upstream_codec.v3.UpstreamCodec}}]`,
	} {
		var pb hcmv3.HttpConnectionManager
		fromYAML(t, hcm(bad), &pb)
		if _, err := config.HTTPConnectionManagerFromProto(&pb); err == nil || !strings.Contains(err.Error(), "http_filters[0].typed_config") || !strings.Contains(err.Error(), "not implemented by Legate") {
			t.Errorf("router %q: err = %v; want its path and not implemented by Legate", bad, err)
		}
	}
}
