package e2e

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/legateproxy/legate/xds/xdstest"
)

// warmingListenerHCM is an hcmListener body whose routes come over ADS from
// route configuration route, waited for without an initial fetch timeout.
func warmingListenerHCM(route string) string {
	return `      rds:
        route_config_name: ` + route + `
        config_source: {ads: {}, resource_api_version: V3, initial_fetch_timeout: 0s}
      http_filters:
      - name: envoy.filters.http.router
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`
}

// waitRouteRequest waits until xds receives a state-of-the-world request for
// route configuration name.
func waitRouteRequest(t *testing.T, xds *xdstest.Server, name string) {
	t.Helper()
	waitXDS(t, xds, "a request for route configuration "+name, func() bool {
		for _, r := range xds.Requests() {
			if r.GetTypeUrl() == resourcev3.RouteType && slices.Contains(r.GetResourceNames(), name) {
				return true
			}
		}
		return false
	})
}

// initDump is /init_dump's shape.
type initDump struct {
	Dumps []struct {
		Name        string   `json:"name"`
		TargetNames []string `json:"target_names"`
	} `json:"unready_targets_dumps"`
}

// TestListenerWarmingOnRDS covers issue 17's items 11 and 16 on the binary:
// while an LDS listener waits for its route configuration,
// listener_manager.total_listeners_warming is 1 and /init_dump?mask=listener
// names the listener's init manager and its RDS target; once the route
// arrives both clear.
func TestListenerWarmingOnRDS(t *testing.T) {
	xds := xdstest.New(t, xdstest.Options{Node: "e2e-warm", ADS: true})
	set := func(version string, rcs ...types.Resource) {
		xds.Set(version, map[resourcev3.Type][]types.Resource{
			// The kernel picks the port, read back once the listener is warm.
			resourcev3.ListenerType: {hcmListener(t, "warm", 0, warmingListenerHCM("late_route"))},
			resourcev3.RouteType:    rcs,
		})
	}
	set("v1")
	p := launch(t, "-c", writeConfig(t, adsBootstrap("e2e-warm", xds, []string{"lds_config"})))
	p.waitAdminAddr()
	p.waitStat("listener_manager.total_listeners_warming", 1)

	code, _, body := p.get("/init_dump?mask=listener")
	var d initDump
	if err := json.Unmarshal([]byte(body), &d); code != 200 || err != nil {
		t.Fatalf("GET /init_dump?mask=listener = %d %v\n%s", code, err, body)
	}
	name := regexp.MustCompile(`^init manager Listener-local-init-manager warm [0-9]+$`)
	if len(d.Dumps) != 1 || !name.MatchString(d.Dumps[0].Name) ||
		strings.Join(d.Dumps[0].TargetNames, "|") != "target RdsRouteConfigSubscription RDS init late_route" {
		t.Errorf("/init_dump?mask=listener while warming:\n%s\nwant one listener init manager waiting for late_route", body)
	}
	if _, _, all := p.get("/init_dump"); !strings.Contains(all, "Listener-local-init-manager warm") {
		t.Errorf("/init_dump without mask leaves out the warming listener:\n%s", all)
	}

	set("v2", routeTo("late_route", directRoute("warm")))
	p.waitStat("listener_manager.total_listeners_warming", 0)
	p.waitAdmin()
	if _, _, body := p.get("/init_dump?mask=listener"); body != "{}\n" {
		t.Errorf("/init_dump?mask=listener once warm = %q; want {}", body)
	}
	if got, err := getBody(&http.Client{Timeout: 5 * time.Second}, "http://"+p.boundListenerAddr("warm")+"/"); err != nil || got != "warm" {
		t.Errorf("GET through the warmed listener = %q, %v; want %q", got, err, "warm")
	}
}

// TestSignalWhileInitializing is issue 17's item 17: SIGTERM ends a server
// that is still INITIALIZING (its only listener waits for a route that never
// comes) promptly and cleanly.
func TestSignalWhileInitializing(t *testing.T) {
	xds := xdstest.New(t, xdstest.Options{Node: "e2e-init", ADS: true})
	xds.Set("v1", map[resourcev3.Type][]types.Resource{
		resourcev3.ListenerType: {hcmListener(t, "stuck", 0, warmingListenerHCM("never"))},
	})
	p := launch(t, "-c", writeConfig(t, adsBootstrap("e2e-init", xds, []string{"lds_config"})))
	p.waitAdminAddr()
	waitRouteRequest(t, xds, "never")
	if code, _, body := p.get("/ready"); code != 503 || body != "INITIALIZING\n" {
		t.Fatalf("GET /ready = %d %q; want 503 INITIALIZING", code, body)
	}
	p.signal(syscall.SIGTERM)
	if code := p.wait(10 * time.Second); code != 0 {
		t.Errorf("exit code after SIGTERM while initializing = %d; want 0", code)
	}
}

// TestStaticListenerInitDump: until the server is LIVE, /init_dump?mask=listener
// has one init manager per static listener, as Envoy's before its workers
// start: the one waiting for its RDS route names that target, the one
// waiting for nothing has no target_names. Once LIVE the dump is {}.
func TestStaticListenerInitDump(t *testing.T) {
	xds := xdstest.New(t, xdstest.Options{Node: "e2e-static-init"})
	const grpcSource = `{resource_api_version: V3, initial_fetch_timeout: 0s, api_config_source: {api_type: GRPC, transport_api_version: V3, grpc_services: [{envoy_grpc: {cluster_name: xds}}]}}`
	waiting := hcmListener(t, "waiting", 0, `      rds: {route_config_name: slow_route, config_source: `+grpcSource+`}
      http_filters:
      - name: envoy.filters.http.router
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`)
	ready := hcmListener(t, "ready", 0, `      route_config: {virtual_hosts: [{name: all, domains: ["*"], routes: [{match: {prefix: "/"}, direct_response: {status: 200}}]}]}
      http_filters:
      - name: envoy.filters.http.router
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`)
	cfg := `
node: {id: e2e-static-init, cluster: e2e}
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners: [` + protojson.Format(waiting) + `, ` + protojson.Format(ready) + `]
  clusters:
` + xdsCluster(xds)
	p := launch(t, "-c", writeConfig(t, cfg))
	p.waitAdminAddr()
	waitRouteRequest(t, xds, "slow_route")
	_, _, body := p.get("/init_dump?mask=listener")
	var d initDump
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatalf("/init_dump?mask=listener: %v\n%s", err, body)
	}
	name := regexp.MustCompile(`^init manager Listener-local-init-manager (waiting|ready) [0-9]+$`)
	if len(d.Dumps) != 2 || !name.MatchString(d.Dumps[0].Name) || !name.MatchString(d.Dumps[1].Name) ||
		!strings.Contains(d.Dumps[0].Name, " waiting ") || strings.Join(d.Dumps[0].TargetNames, "|") != "target RdsRouteConfigSubscription RDS init slow_route" ||
		!strings.Contains(d.Dumps[1].Name, " ready ") || len(d.Dumps[1].TargetNames) != 0 {
		t.Errorf("/init_dump?mask=listener while initializing:\n%s\nwant waiting (with its RDS target) and ready (no targets)", body)
	}
	xds.Set("v1", map[resourcev3.Type][]types.Resource{resourcev3.RouteType: {routeTo("slow_route", directRoute("ok"))}})
	p.waitAdmin()
	if _, _, body := p.get("/init_dump?mask=listener"); body != "{}\n" {
		t.Errorf("/init_dump?mask=listener once LIVE = %q; want {}", body)
	}
}

// TestLDSListenersInInitDumpAtStartup is the rest of issue 17's item 11:
// while the server initializes, /init_dump?mask=listener lists every LDS
// listener's init manager, the one already ready (inline routes, no
// targets) as well as the one waiting for its RDS route, as Envoy dumps its
// active listeners until the workers start; once LIVE the dump is {}.
func TestLDSListenersInInitDumpAtStartup(t *testing.T) {
	xds := xdstest.New(t, xdstest.Options{Node: "e2e-lds-init", ADS: true})
	inline := hcmListener(t, "inline", 0, `      route_config: {virtual_hosts: [{name: all, domains: ["*"], routes: [{match: {prefix: "/"}, direct_response: {status: 200}}]}]}
      http_filters:
      - name: envoy.filters.http.router
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`)
	warm := hcmListener(t, "warm", 0, warmingListenerHCM("late_route"))
	xds.Set("v1", map[resourcev3.Type][]types.Resource{resourcev3.ListenerType: {inline, warm}})
	p := launch(t, "-c", writeConfig(t, adsBootstrap("e2e-lds-init", xds, []string{"lds_config"})))
	p.waitAdminAddr()
	waitRouteRequest(t, xds, "late_route")

	name := regexp.MustCompile(`^init manager Listener-local-init-manager (inline|warm) [0-9]+$`)
	var body string
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, _, body = p.get("/init_dump?mask=listener")
		var d initDump
		if err := json.Unmarshal([]byte(body), &d); err != nil {
			t.Fatalf("/init_dump?mask=listener: %v\n%s", err, body)
		}
		if len(d.Dumps) == 2 && name.MatchString(d.Dumps[0].Name) && name.MatchString(d.Dumps[1].Name) &&
			strings.Contains(d.Dumps[0].Name, " inline ") && len(d.Dumps[0].TargetNames) == 0 &&
			strings.Contains(d.Dumps[1].Name, " warm ") &&
			strings.Join(d.Dumps[1].TargetNames, "|") == "target RdsRouteConfigSubscription RDS init late_route" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/init_dump?mask=listener while initializing:\n%s\nwant inline (no targets) and warm (its RDS target)", body)
		}
		select {
		case <-p.exited:
			t.Fatalf("legate exited:\n%s", p.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	xds.Set("v2", map[resourcev3.Type][]types.Resource{
		resourcev3.ListenerType: {inline, warm},
		resourcev3.RouteType:    {routeTo("late_route", directRoute("warm"))},
	})
	p.waitAdmin()
	if _, _, body := p.get("/init_dump?mask=listener"); body != "{}\n" {
		t.Errorf("/init_dump?mask=listener once LIVE = %q; want {}", body)
	}
}
