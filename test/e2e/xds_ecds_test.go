package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tapdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/tap/v3"
	healthcheckv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/health_check/v3"
	tapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/tap/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/xds/xdstest"
)

const tapTypeURL = "type.googleapis.com/envoy.extensions.filters.http.tap.v3.Tap"

// ecdsTapListener is an LDS listener on port whose connection manager discovers its tap
// filter ("tap", type_urls: the tap filter only) over ECDS and routes to cluster backend.
func ecdsTapListener(t *testing.T, port int) *listenerv3.Listener {
	return hcmListener(t, "tapped", port, fmt.Sprintf(`      route_config:
        virtual_hosts:
        - name: all
          domains: ["*"]
          routes: [{match: {prefix: "/"}, route: {cluster: backend}}]
      http_filters:
      - name: tap
        config_discovery:
          config_source: {ads: {}, resource_api_version: V3}
          type_urls: [%s]
      - name: envoy.filters.http.router
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`, tapTypeURL))
}

// TestXDSECDSTapAndNACK runs the binary against go-control-plane's server: the tap filter's
// configuration arrives over ECDS, and an admin /tap session sees the request and response
// bodies of a proxied request. Then configurations the filter cannot take — a type outside
// its type_urls, a tap configuration the filter refuses — are NACKed with an error_detail
// naming the configuration and the rule, update_rejected and config_fail count them, the
// config dump shows the error_state, and the last good configuration keeps tapping.
func TestXDSECDSTapAndNACK(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "echo %s", b)
	}))
	defer upstream.Close()
	xds := xdstest.New(t, xdstest.Options{Node: "e2e-ecds", ADS: true})
	cfg := adsBootstrap("e2e-ecds", xds, []string{"lds_config"}, clusterYAML("backend", upstream.Listener.Addr().String(), false))
	listener := ecdsTapListener(t, 0) // the kernel picks the port; read back below
	push := func(version string, tc proto.Message) {
		t.Helper()
		a, err := anypb.New(tc)
		if err != nil {
			t.Fatal(err)
		}
		xds.Set(version, map[resourcev3.Type][]types.Resource{
			resourcev3.ListenerType:        {listener},
			resourcev3.ExtensionConfigType: {&corev3.TypedExtensionConfig{Name: "tap", TypedConfig: a}},
		})
	}
	var adminTap tapv3.Tap
	fromYAMLProto(t, `common_config: {admin_config: {config_id: ecds}}`, &adminTap)
	push("v1", &adminTap)
	p := start(t, "-c", writeConfig(t, cfg))
	addr := p.boundListenerAddr("tapped")

	client := &http.Client{Timeout: 5 * time.Second}
	post := func(path, body string) (int, string) {
		resp, err := client.Post("http://"+addr+path, "text/plain", strings.NewReader(body))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	eventually(t, "the LDS listener with its tap filter", func() bool { s, _ := post("/warmup", "x"); return s == 200 })

	// tapBodies attaches a /tap session, sends body to path and returns the tapped request
	// and response bodies.
	tapBodies := func(path, body string) []string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		const session = `{config_id: ecds, tap_config: {match: {any_match: true}, output_config: {sinks: [{format: JSON_BODY_AS_STRING, streaming_admin: {}}]}}}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.admin+"/tap", strings.NewReader(session))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("POST /tap = %d %s", resp.StatusCode, b)
		}
		if s, b := post(path, body); s != 200 || b != "echo "+body {
			t.Errorf("POST %s = %d %q; want 200 %q", path, s, b, "echo "+body)
		}
		var raw json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
			t.Fatalf("reading the tap stream: %v", err)
		}
		var tw tapdatav3.TraceWrapper
		if err := protojson.Unmarshal(raw, &tw); err != nil {
			t.Fatalf("trace is not a TraceWrapper: %v\n%s", err, raw)
		}
		tr := tw.GetHttpBufferedTrace()
		return []string{tr.GetRequest().GetBody().GetAsString(), tr.GetResponse().GetBody().GetAsString()}
	}
	if got := tapBodies("/first", "hello"); got[0] != "hello" || got[1] != "echo hello" {
		t.Errorf("tapped bodies = %q; want [hello, echo hello]", got)
	}
	waitDetached(t, p)

	const prefix = "extension_config_discovery.http_filter.tap."
	hc := &healthcheckv3.HealthCheck{PassThroughMode: wrapperspb.Bool(false)}
	refused := proto.Clone(&adminTap).(*tapv3.Tap)
	refused.RecordDownstreamConnection = true
	for i, tc := range []struct {
		name   string
		config proto.Message
		want   string
	}{
		{"type not in type_urls", hc, `extension config "tap": typed_config type "type.googleapis.com/envoy.extensions.filters.http.health_check.v3.HealthCheck" is not one of config_discovery.type_urls ["` + tapTypeURL + `"]`},
		{"refused by the filter", refused, `extension config "tap": http_connection_manager "tapped": http_filters "tap": envoy.filters.http.tap: record_downstream_connection = true: not implemented`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			version := fmt.Sprintf("bad%d", i)
			push(version, tc.config)
			nackOf(t, xds, tc.want)
			p.waitStatAtLeast(prefix+"update_rejected", uint64(i+1))
			p.waitStatAtLeast(prefix+"config_fail", uint64(i+1))
			if v, _ := p.stat(prefix + "config_reload"); v != 1 {
				t.Errorf("%sconfig_reload = %d; want 1 (v1 only)", prefix, v)
			}
			_, _, dump := p.get("/config_dump?resource=ecds_filters")
			for _, want := range []string{`"version_info": "v1"`, `"error_state"`, `"version_info": "` + version + `"`} {
				if !strings.Contains(dump, want) {
					t.Errorf("/config_dump?resource=ecds_filters lacks %s:\n%s", want, dump)
				}
			}
			if got := tapBodies("/after-"+version, "again"); got[0] != "again" || got[1] != "echo again" {
				t.Errorf("tapped bodies after the rejection = %q; want [again, echo again] (v1 still taps)", got)
			}
			waitDetached(t, p)
		})
	}
}
