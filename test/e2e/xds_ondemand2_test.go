package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/legateproxy/legate/xds/xdstest"
)

// TestXDSOnDemand2 runs the binary against go-control-plane's server with LDS listeners that
// exercise on-demand discovery's edges: (a) a listener whose first RDS answer is NACKed
// still comes up (the initial fetch ends), with update_rejected counted and nothing left in
// /init_dump; (b) a VHDS answer to an on-demand request shows in /config_dump as the route
// configuration's virtual host with the VHDS version, and in the VHDS stats; (c) an LDS
// update whose inline scoped route configuration does not compile is NACKed (update_rejected,
// error_state) while the previous listener keeps serving; (d) a POST to a host that becomes
// known on demand reaches the upstream with its body.
func TestXDSOnDemand2(t *testing.T) {
	xds := xdstest.New(t, xdstest.Options{Node: "e2e-ondemand2"})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %d:%s", r.Method, len(b), b)
	}))
	t.Cleanup(up.Close)
	cfg := adsBootstrap("e2e-ondemand2", xds, []string{"lds_config"}, clusterYAML("echo", up.Listener.Addr().String(), false))
	// The listeners bind ports the kernel picks, read back from /listeners.
	nackListener := hcmListener(t, "nacked", 0, rdsOverADS("bad")+onDemandFilters)
	vhdsListener := hcmListener(t, "od2", 0, rdsOverADS("r2")+onDemandFilters)
	inline := func(body string, domains string) *listenerv3.Listener {
		return hcmListener(t, "inl", 0, inlineScope("inl", domains, body, onDemandFilters))
	}
	goodInline := inline("inline-v1", `["*"]`)
	badInline := inline("inline-v2", `["x.example", "x.example"]`) // duplicate domains: does not compile

	var bad routev3.RouteConfiguration
	fromYAMLProto(t, `
name: bad
virtual_hosts:
- {name: a, domains: [dup.example], routes: [{match: {prefix: /}, direct_response: {status: 200}}]}
- {name: b, domains: [dup.example], routes: [{match: {prefix: /}, direct_response: {status: 200}}]}
`, &bad)
	r2 := vhdsRouteConfig(t, "r2")
	echoHost := func(name, domain string) *routev3.VirtualHost { return virtualHost(name, domain, clusterRoute("echo")) }
	set := func(version string, inl *listenerv3.Listener, vhosts ...types.Resource) {
		t.Helper()
		xds.Set(version, map[resourcev3.Type][]types.Resource{
			resourcev3.ListenerType:    {nackListener, vhdsListener, inl},
			resourcev3.RouteType:       {&bad, r2},
			resourcev3.VirtualHostType: vhosts,
		})
	}
	set("v1", goodInline, echoHost("r2/other", "other.example"))
	p := start(t, "-c", writeConfig(t, cfg))
	nport, vport, iport := p.boundListenerPort("nacked"), p.boundListenerPort("od2"), p.boundListenerPort("inl")

	client := &http.Client{Timeout: 15 * time.Second}
	send := func(method string, port int, hostHeader, scope, body string) (int, string) {
		return scopedRequest(client, method, fmt.Sprintf("http://127.0.0.1:%d/", port), hostHeader, scope, body)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		s1, _ := send("GET", nport, "dup.example", "", "")
		s2, _ := send("GET", vport, "base.example", "", "")
		s3, _ := send("GET", iport, "x", "i", "")
		if s1 == 404 && s2 == 200 && s3 == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listeners not serving: nacked %d (want 404), od2 %d, inl %d", s1, s2, s3)
		}
		<-time.After(50 * time.Millisecond) // polling the binary's listeners
	}

	t.Run("nacked first RDS answer", func(t *testing.T) {
		if _, _, body := p.get("/init_dump"); body != "{}\n" {
			t.Errorf("GET /init_dump = %q; want {}\\n (the rejected answer ended the initial fetch)", body)
		}
		if v, ok := p.stat("http.nacked.rds.bad.update_rejected"); !ok || v < 1 {
			t.Errorf("http.nacked.rds.bad.update_rejected = %d (present %v); want >= 1", v, ok)
		}
	})

	t.Run("post body to a host known on demand", func(t *testing.T) {
		body := strings.Repeat("payload-", 4096) // 32 KiB
		res := make(chan response, 1)
		go func() {
			s, b := send("POST", vport, "Post.Example", "", body)
			res <- response{s, b}
		}()
		waitSubscription(t, xds, "r2/post.example", res)
		timeout := time.After(20 * time.Second)
		set("v2", goodInline, echoHost("r2/other", "other.example"), echoHost("r2/post.example", "post.example"))
		select {
		case r := <-res:
			want := fmt.Sprintf("POST %d:%s", len(body), body)
			if r.status != 200 || r.body != want {
				t.Errorf("POST post.example = %d %.40q (%d bytes); want 200 %.40q (%d bytes)", r.status, r.body, len(r.body), want, len(want))
			}
		case <-timeout:
			t.Fatal("no response after the VHDS answer")
		}
	})

	t.Run("vhds config dump and stats", func(t *testing.T) {
		_, _, raw := p.get("/config_dump?resource=dynamic_route_configs")
		var cd adminv3.ConfigDump
		if err := protojson.Unmarshal([]byte(raw), &cd); err != nil {
			t.Fatalf("decoding /config_dump?resource=dynamic_route_configs: %v\n%s", err, raw)
		}
		dump := &adminv3.RoutesConfigDump{}
		for _, a := range cd.GetConfigs() {
			d := &adminv3.RoutesConfigDump_DynamicRouteConfig{}
			if err := a.UnmarshalTo(d); err != nil {
				t.Fatalf("configs entry %s: %v", a.GetTypeUrl(), err)
			}
			dump.DynamicRouteConfigs = append(dump.DynamicRouteConfigs, d)
		}
		var found bool
		for _, d := range dump.GetDynamicRouteConfigs() {
			rc := &routev3.RouteConfiguration{}
			if err := d.GetRouteConfig().UnmarshalTo(rc); err != nil || rc.GetName() != "r2" {
				continue
			}
			found = true
			var names []string
			for _, vh := range rc.GetVirtualHosts() {
				names = append(names, vh.GetName())
			}
			if got := strings.Join(names, ","); got != "base,r2/other,r2/post.example" {
				t.Errorf("r2 virtual hosts = %s; want base,r2/other,r2/post.example", got)
			}
			if d.GetVersionInfo() != "v2" {
				t.Errorf("r2 version_info = %q; want v2 (the VHDS answer's)", d.GetVersionInfo())
			}
		}
		if !found {
			t.Errorf("no dynamic route config r2 in:\n%s", raw)
		}
		// The full dump decodes strictly too, its routes entry as a RoutesConfigDump.
		_, _, full := p.get("/config_dump")
		var all adminv3.ConfigDump
		if err := protojson.Unmarshal([]byte(full), &all); err != nil {
			t.Fatalf("decoding /config_dump: %v", err)
		}
		var routes *adminv3.RoutesConfigDump
		for _, a := range all.GetConfigs() {
			r := &adminv3.RoutesConfigDump{}
			if a.UnmarshalTo(r) == nil {
				routes = r
			}
		}
		if routes == nil || len(routes.GetDynamicRouteConfigs()) < 2 {
			t.Errorf("/config_dump RoutesConfigDump = %v; want the dynamic route configs bad and r2", routes)
		}
		for _, name := range []string{"config_reload", "update_success"} {
			if v, ok := p.stat("http.od2.rds.vhds.r2." + name); !ok || v < 1 {
				t.Errorf("http.od2.rds.vhds.r2.%s = %d (present %v); want >= 1", name, v, ok)
			}
		}
		if _, _, st := p.get("/stats?filter=^http.od2.rds.vhds.r2.version_text$"); st != "http.od2.rds.vhds.r2.version_text: \"v2\"\n" {
			t.Errorf("/stats version_text = %q; want http.od2.rds.vhds.r2.version_text: \"v2\"", st)
		}
	})

	t.Run("inline scope that does not compile is NACKed", func(t *testing.T) {
		set("v3", badInline, echoHost("r2/other", "other.example"), echoHost("r2/post.example", "post.example"))
		deadline := time.Now().Add(20 * time.Second)
		for {
			if v, _ := p.stat("listener_manager.lds.update_rejected"); v >= 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("listener_manager.lds.update_rejected never counted the bad listener")
			}
			<-time.After(50 * time.Millisecond) // polling the binary's stats
		}
		if s, b := send("GET", iport, "x", "i", ""); s != 200 || b != "inline-v1" {
			t.Errorf("GET inl = %d %q; want 200 inline-v1 (the previous listener)", s, b)
		}
		_, _, raw := p.get("/config_dump?resource=dynamic_listeners")
		var cd adminv3.ConfigDump
		if err := protojson.Unmarshal([]byte(raw), &cd); err != nil {
			t.Fatalf("decoding the listeners dump: %v\n%s", err, raw)
		}
		var state *adminv3.UpdateFailureState
		for _, a := range cd.GetConfigs() {
			d := &adminv3.ListenersConfigDump_DynamicListener{}
			if a.UnmarshalTo(d) == nil && d.GetName() == "inl" {
				state = d.GetErrorState()
			}
		}
		if state == nil || !strings.Contains(state.GetDetails(), "si") || state.GetVersionInfo() != "v3" {
			t.Errorf("inl error_state = %v; want details naming scope si, version_info v3", state)
		}
	})
}
