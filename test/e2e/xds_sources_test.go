package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	runtimesvc "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/xds/xdstest"
)

// e2eIdentifier is the control_plane.identifier the sources server sends.
const e2eIdentifier = "e2e-control-plane"

// newSourcesServer is the management server for node, not in ADS mode (LDS and RDS come over
// separate streams), naming itself e2eIdentifier in every response.
func newSourcesServer(t *testing.T, node string) *xdstest.Server {
	return xdstest.New(t, xdstest.Options{Node: node, Identifier: e2eIdentifier})
}

// rdsListener is a listener on 127.0.0.1:port whose connection manager (stat_prefix ingress)
// loads route configuration route from source.
func rdsListener(t *testing.T, port int, route string, source *corev3.ConfigSource) *listenerv3.Listener {
	t.Helper()
	l := ldsListener(t, port, route)
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix:     "ingress",
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{RouteConfigName: route, ConfigSource: source}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{
			TypedConfig: mustAny(t, &routerv3.Router{}),
		}}},
	}
	l.FilterChains[0].Filters[0].ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, hcm)}
	return l
}

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// apiSource is an api_config_source of type api on the bootstrap cluster xds.
func apiSource(api corev3.ApiConfigSource_ApiType) *corev3.ConfigSource {
	a := &corev3.ApiConfigSource{ApiType: api, TransportApiVersion: corev3.ApiVersion_V3}
	if api == corev3.ApiConfigSource_REST {
		a.ClusterNames = []string{"xds"}
		a.RefreshDelay = durationpb.New(100 * time.Millisecond)
	} else {
		a.GrpcServices = []*corev3.GrpcService{{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
			EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "xds"},
		}}}
	}
	return &corev3.ConfigSource{ResourceApiVersion: corev3.ApiVersion_V3, ConfigSourceSpecifier: &corev3.ConfigSource_ApiConfigSource{ApiConfigSource: a}}
}

// pathSource is a path_config_source for path, watching dir when it is not empty.
func pathSource(path, dir string) *corev3.ConfigSource {
	pcs := &corev3.PathConfigSource{Path: path}
	if dir != "" {
		pcs.WatchedDirectory = &corev3.WatchedDirectory{Path: dir}
	}
	return &corev3.ConfigSource{ResourceApiVersion: corev3.ApiVersion_V3, ConfigSourceSpecifier: &corev3.ConfigSource_PathConfigSource{PathConfigSource: pcs}}
}

// responseJSON is a DiscoveryResponse file holding resources at version.
func responseJSON(t *testing.T, version string, resources []types.Resource) []byte {
	t.Helper()
	resp := &discoveryv3.DiscoveryResponse{VersionInfo: version}
	for _, r := range resources {
		resp.Resources = append(resp.Resources, mustAny(t, r))
	}
	b, err := protojson.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// replaceFile writes data next to path and renames it into place, as an atomic config
// push does.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// configMapDir is a directory laid out as Kubernetes mounts a ConfigMap: each version of the
// files in its own ..<n> directory, ..data pointing at the current one, and each file a
// symlink through ..data. publish adds a version by renaming a new symlink over ..data.
type configMapDir struct {
	t       *testing.T
	root    string
	version int
}

func (d *configMapDir) publish(files map[string][]byte) {
	d.t.Helper()
	d.version++
	dir := fmt.Sprintf("..%d", d.version)
	if err := os.Mkdir(filepath.Join(d.root, dir), 0o755); err != nil {
		d.t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(d.root, dir, name), data, 0o644); err != nil {
			d.t.Fatal(err)
		}
	}
	tmp := filepath.Join(d.root, "..data_tmp")
	if err := os.Symlink(dir, tmp); err != nil {
		d.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(d.root, "..data")); err != nil {
		d.t.Fatal(err)
	}
	if d.version == 1 {
		for name := range files {
			if err := os.Symlink(filepath.Join("..data", name), filepath.Join(d.root, name)); err != nil {
				d.t.Fatal(err)
			}
		}
		return
	}
	if err := os.RemoveAll(filepath.Join(d.root, fmt.Sprintf("..%d", d.version-1))); err != nil {
		d.t.Fatal(err)
	}
}

// nameServer answers every request with its name.
func nameServer(t *testing.T, name string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, name) }))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return port
}

// sourcesBootstrap takes lds_config from lds and has clusters a and b (at the given ports) and
// xds (the sources server).
func sourcesBootstrap(t *testing.T, node string, lds *corev3.ConfigSource, aPort, bPort string, xds *xdstest.Server) string {
	t.Helper()
	ldsJSON, err := protojson.Marshal(lds)
	if err != nil {
		t.Fatal(err)
	}
	return `
node: {id: ` + node + `, cluster: e2e}
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
dynamic_resources:
  lds_config: ` + string(ldsJSON) + `
static_resources:
  clusters:
` + clusterYAML("a", loopback(aPort), false) + clusterYAML("b", loopback(bPort), false) + xdsCluster(xds)
}

// steadyClient requests url in a loop until stop, or until 30 s or 20,000 requests have
// passed, counting failures (errors and non-200 answers).
type steadyClient struct {
	stop     chan struct{}
	done     chan struct{}
	requests atomic.Int64
	failures atomic.Int64
	lastErr  atomic.Value
}

func startSteadyClient(url string) *steadyClient {
	c := &steadyClient{stop: make(chan struct{}), done: make(chan struct{})}
	client := &http.Client{Timeout: 5 * time.Second}
	go func() {
		defer close(c.done)
		deadline := time.Now().Add(30 * time.Second)
		for i := 0; i < 20000 && time.Now().Before(deadline); i++ {
			select {
			case <-c.stop:
				return
			default:
			}
			c.requests.Add(1)
			if _, err := getBody(client, url); err != nil {
				c.failures.Add(1)
				c.lastErr.Store(err.Error())
			}
		}
	}()
	return c
}

// waitRequests waits until the client has sent n more requests than it had when called.
func (c *steadyClient) waitRequests(t *testing.T, n int64) {
	t.Helper()
	target := c.requests.Load() + n
	eventually(t, fmt.Sprintf("%d requests of the steady client", n), func() bool {
		select {
		case <-c.done:
			return true // the loop ended at its bound; finish reports what it did
		default:
		}
		return c.requests.Load() >= target
	})
}

// finish stops the loop and returns the number of requests and failures and the last error.
func (c *steadyClient) finish() (requests, failures int64, last any) {
	close(c.stop)
	<-c.done
	return c.requests.Load(), c.failures.Load(), c.lastErr.Load()
}

func getBody(client *http.Client, url string) (string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return string(b), nil
}

// eventually polls cond every 5 ms for up to 20 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-time.After(5 * time.Millisecond)
	}
}

// statLine returns /stats' line for the stat called name ("" when absent).
func (p *proc) statLine(name string) string {
	p.t.Helper()
	_, _, body := p.get("/stats?filter=^" + strings.ReplaceAll(name, ".", `\.`) + "$")
	return strings.TrimSpace(body)
}

// TestXDSSourcesLDSAndRDS runs the binary with LDS and RDS from each kind of config source:
// REST polling and per-type gRPC streams (state of the world and delta) of go-control-plane's
// server, and files (replaced by rename, or published Kubernetes-style through a watched
// directory). Traffic flows through the discovered listener, and a route update moves it from
// cluster a to cluster b while a steady client sees no failure.
func TestXDSSourcesLDSAndRDS(t *testing.T) {
	aPort, bPort := nameServer(t, "A"), nameServer(t, "B")
	tests := []struct {
		name string
		grpc bool // whether control_plane.* stats apply
		// setup returns the lds_config and rds config source, and how to publish.
		setup func(t *testing.T, xds *xdstest.Server) (lds, rds *corev3.ConfigSource, pub publishFunc)
	}{
		{name: "REST", setup: serverSetup(corev3.ApiConfigSource_REST)},
		{name: "GRPC", grpc: true, setup: serverSetup(corev3.ApiConfigSource_GRPC)},
		{name: "DELTA_GRPC", grpc: true, setup: serverSetup(corev3.ApiConfigSource_DELTA_GRPC)},
		{name: "files", setup: func(t *testing.T, _ *xdstest.Server) (*corev3.ConfigSource, *corev3.ConfigSource, publishFunc) {
			dir := t.TempDir()
			ldsPath, rdsPath := filepath.Join(dir, "lds.json"), filepath.Join(dir, "rds.json")
			return pathSource(ldsPath, ""), pathSource(rdsPath, ""), func(version string, ls, rcs []types.Resource) {
				replaceFile(t, rdsPath, responseJSON(t, version, rcs))
				replaceFile(t, ldsPath, responseJSON(t, version, ls))
			}
		}},
		{name: "watched directory", setup: func(t *testing.T, _ *xdstest.Server) (*corev3.ConfigSource, *corev3.ConfigSource, publishFunc) {
			d := &configMapDir{t: t, root: t.TempDir()}
			return pathSource(filepath.Join(d.root, "lds.json"), d.root), pathSource(filepath.Join(d.root, "rds.json"), d.root),
				func(version string, ls, rcs []types.Resource) {
					d.publish(map[string][]byte{"lds.json": responseJSON(t, version, ls), "rds.json": responseJSON(t, version, rcs)})
				}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			node := "e2e-sources-" + strings.ReplaceAll(strings.ToLower(tc.name), " ", "-")
			xds := newSourcesServer(t, node)
			lds, rds, pub := tc.setup(t, xds)
			listeners := []types.Resource{rdsListener(t, 0, "r1", rds)} // the kernel picks the port
			pub("v1", listeners, []types.Resource{routeTo("r1", clusterRoute("a"))})
			p := start(t, "-c", writeConfig(t, sourcesBootstrap(t, node, lds, aPort, bPort, xds)))
			url := "http://" + p.boundListenerAddr("dyn") + "/"
			client := &http.Client{Timeout: 5 * time.Second}
			eventually(t, "the listener to route to cluster a", func() bool { b, err := getBody(client, url); return err == nil && b == "A" })

			steady := startSteadyClient(url)
			steady.waitRequests(t, 50)
			pub("v2", listeners, []types.Resource{routeTo("r1", clusterRoute("b"))})
			eventually(t, "the route update to send requests to cluster b", func() bool { b, err := getBody(client, url); return err == nil && b == "B" })
			steady.waitRequests(t, 50)
			n, failed, last := steady.finish()
			if failed != 0 {
				t.Errorf("%d of %d requests failed across the route update; last: %v", failed, n, last)
			}
			if n < 100 {
				t.Errorf("the steady client sent %d requests; want at least 100 around the update", n)
			}

			if got, want := p.statLine("http.ingress.rds.r1.version_text"), `http.ingress.rds.r1.version_text: "v2"`; got != want {
				t.Errorf("/stats: %s; want %s", got, want)
			}
			if got := p.statLine("listener_manager.lds.update_success"); got == "" || got == "listener_manager.lds.update_success: 0" {
				t.Errorf("/stats: %q; want listener_manager.lds.update_success > 0", got)
			}
			if got := p.statLine("listener_manager.lds.update_rejected"); got != "listener_manager.lds.update_rejected: 0" {
				t.Errorf("/stats: %q; want no rejected LDS update", got)
			}
			identifier := p.statLine("control_plane.identifier")
			if tc.grpc {
				if want := `control_plane.identifier: "` + e2eIdentifier + `"`; identifier != want {
					t.Errorf("/stats: %s; want %s", identifier, want)
				}
				if got := p.statLine("control_plane.connected_state"); got != "control_plane.connected_state: 1" {
					t.Errorf("/stats: %s; want control_plane.connected_state: 1", got)
				}
			} else if identifier != `control_plane.identifier: ""` {
				t.Errorf("/stats: %s; want an empty identifier without a gRPC source", identifier)
			}
		})
	}
}

// publishFunc publishes version of the LDS and RDS resources.
type publishFunc func(version string, listeners, routes []types.Resource)

// serverSetup takes LDS and RDS from the sources server, each over its own api_config_source
// of type api (for gRPC, two separate streams).
func serverSetup(api corev3.ApiConfigSource_ApiType) func(*testing.T, *xdstest.Server) (*corev3.ConfigSource, *corev3.ConfigSource, publishFunc) {
	return func(t *testing.T, xds *xdstest.Server) (*corev3.ConfigSource, *corev3.ConfigSource, publishFunc) {
		return apiSource(api), apiSource(api), func(version string, ls, rcs []types.Resource) {
			xds.Set(version, map[resourcev3.Type][]types.Resource{resourcev3.ListenerType: ls, resourcev3.RouteType: rcs})
		}
	}
}

// TestRTDSOverADS: a layered_runtime rtds_layer over (delta) ADS. The upstream fails its
// health check, so with the default panic threshold (50%) Legate is in panic mode and
// routes to it anyway; an RTDS layer setting upstream.healthy_panic_threshold to 0 turns panic
// mode off (503, no healthy upstream), an update adds a key, and removing the resource brings
// the default back.
func TestRTDSOverADS(t *testing.T) {
	upstream := statusUpstream(t)
	const node = "e2e-rtds"
	xds := newSourcesServer(t, node)
	setRuntime := func(version string, layer map[string]any) {
		t.Helper()
		res := map[resourcev3.Type][]types.Resource{resourcev3.RuntimeType: nil}
		if layer != nil {
			st, err := structpb.NewStruct(layer)
			if err != nil {
				t.Fatal(err)
			}
			res[resourcev3.RuntimeType] = []types.Resource{&runtimesvc.Runtime{Name: "rt", Layer: st}}
		}
		xds.Set(version, res)
	}
	setRuntime("0", nil)
	cfg := routeAllConfig(upstream.URL, xdsCluster(xds)+`node: {id: `+node+`, cluster: e2e}
dynamic_resources:
  ads_config:
    api_type: DELTA_GRPC
    transport_api_version: V3
    grpc_services: [{envoy_grpc: {cluster_name: xds}}]
layered_runtime:
  layers:
  - name: static
    static_layer: {e2e.base: 1}
  - name: rtds
    rtds_layer:
      name: rt
      rtds_config: {ads: {}, resource_api_version: V3, initial_fetch_timeout: 0.5s}
`)
	// The backend fails its health check (/status/503). The static route names the cluster
	// while it still waits for its first check, which validate_clusters accepts, as in Envoy.
	for _, r := range [][2]string{
		{"    connect_timeout: 1s\n", "    connect_timeout: 1s\n" + `    health_checks:
    - timeout: 1s
      interval: 0.1s
      no_traffic_interval: 0.1s
      unhealthy_threshold: 1
      healthy_threshold: 1
      http_health_check: {path: /status/503}
`},
		// A route taken only as often as the runtime key e2e.frac says (default 0%).
		{`routes: [{match: {prefix: "/"}`, `routes: [{match: {prefix: "/frac", runtime_fraction: {default_value: {numerator: 0}, runtime_key: e2e.frac}}, direct_response: {status: 418}}, {match: {prefix: "/"}`},
	} {
		if !strings.Contains(cfg, r[0]) {
			t.Fatalf("routeAllConfig has no %q", r[0])
		}
		cfg = strings.Replace(cfg, r[0], r[1], 1)
	}
	p := start(t, "-c", writeConfig(t, cfg))
	url := "http://" + p.listenerAddr("http") + "/"
	client := &http.Client{Timeout: 5 * time.Second}
	status := func(path ...string) int {
		resp, err := client.Get(url + strings.Join(path, ""))
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	eventually(t, "the backend to fail its health check", func() bool {
		_, _, body := p.get("/clusters")
		return strings.Contains(body, "backend::"+upstream.Listener.Addr().String()+"::health_flags::/failed_active_hc")
	})
	if got := status(); got != http.StatusOK {
		t.Fatalf("GET in panic mode = %d; want 200 (routed to the unhealthy host)", got)
	}

	runtimeEntry := func(key string) (string, bool) {
		_, _, body := p.get("/runtime")
		var v runtimeView
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatalf("/runtime: %v\n%s", err, body)
		}
		e, ok := v.Entries[key]
		return e.FinalValue, ok
	}
	setRuntime("1", map[string]any{"upstream.healthy_panic_threshold": 0})
	eventually(t, "the RTDS layer in /runtime", func() bool { v, ok := runtimeEntry("upstream.healthy_panic_threshold"); return ok && v == "0" })
	eventually(t, "panic mode off (503)", func() bool { return status() == http.StatusServiceUnavailable })

	if got := status("frac"); got == http.StatusTeapot {
		t.Fatalf("GET /frac with e2e.frac unset = 418; want the catch-all route (default fraction 0%%)")
	}
	setRuntime("2", map[string]any{"upstream.healthy_panic_threshold": 0, "e2e.marker": "two", "e2e.frac": 100})
	eventually(t, "the updated RTDS layer", func() bool { v, ok := runtimeEntry("e2e.marker"); return ok && v == "two" })
	if got := status("frac"); got != http.StatusTeapot {
		t.Errorf("GET /frac with e2e.frac = 100 = %d; want 418 (route runtime_fraction from RTDS)", got)
	}
	if got := status(); got != http.StatusServiceUnavailable {
		t.Errorf("GET after the update = %d; want 503 (threshold still 0)", got)
	}
	if got, want := p.statLine("runtime.version_text"), `runtime.version_text: "2"`; got != want {
		t.Errorf("/stats: %s; want %s", got, want)
	}

	setRuntime("3", nil)
	eventually(t, "the RTDS keys to go", func() bool {
		_, ok1 := runtimeEntry("upstream.healthy_panic_threshold")
		_, ok2 := runtimeEntry("e2e.marker")
		return !ok1 && !ok2
	})
	eventually(t, "panic mode back (200)", func() bool { return status() == http.StatusOK })
	if got := status("frac"); got == http.StatusTeapot {
		t.Errorf("GET /frac after the RTDS layer went = 418; want the catch-all route")
	}
	if v, ok := runtimeEntry("e2e.base"); !ok || v != "1" {
		t.Errorf("/runtime e2e.base = %q, %v; want the static layer's 1", v, ok)
	}

	// The removal is an update like the others (Envoy counts a delta response that only
	// removes resources as a success).
	if got, want := p.statLine("runtime.version_text"), `runtime.version_text: "3"`; got != want {
		t.Errorf("/stats: %s; want %s", got, want)
	}
	for _, name := range []string{"runtime.update_success", "runtime.load_success"} {
		line := p.statLine(name)
		n, err := strconv.Atoi(strings.TrimPrefix(line, name+": "))
		if err != nil || n < 3 {
			t.Errorf("/stats: %q; want %s >= 3 (three RTDS updates)", line, name)
		}
	}
	if got := p.statLine("runtime.update_rejected"); got != "runtime.update_rejected: 0" {
		t.Errorf("/stats: %q; want runtime.update_rejected: 0", got)
	}
	if got, want := p.statLine("runtime.num_layers"), "runtime.num_layers: 2"; got != want {
		t.Errorf("/stats: %s; want %s", got, want)
	}
	if got, want := p.statLine("runtime.num_keys"), "runtime.num_keys: 1"; got != want {
		t.Errorf("/stats: %s; want %s", got, want)
	}
	if got, want := p.statLine("control_plane.identifier"), `control_plane.identifier: "`+e2eIdentifier+`"`; got != want {
		t.Errorf("/stats: %s; want %s", got, want)
	}
}
