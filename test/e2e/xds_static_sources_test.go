package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/tap/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/legateproxy/legate/xds/xdstest"
)

// TestStaticListenersDiscoverWithoutDynamicResources is issue 17's item 18:
// a bootstrap without dynamic_resources whose static listeners take their
// routes over RDS and a filter's configuration over ECDS, each from a gRPC
// api_config_source (not ADS), loads and serves, as in Envoy.
func TestStaticListenersDiscoverWithoutDynamicResources(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "upstream") }))
	defer upstream.Close()
	xds := xdstest.New(t, xdstest.Options{Node: "e2e-static-xds"})
	var adminTap tapv3.Tap
	fromYAMLProto(t, `common_config: {admin_config: {config_id: static}}`, &adminTap)
	xds.Set("v1", map[resourcev3.Type][]types.Resource{
		resourcev3.RouteType:           {routeTo("by_rds", clusterRoute("backend"))},
		resourcev3.ExtensionConfigType: {&corev3.TypedExtensionConfig{Name: "tap", TypedConfig: mustAny(t, &adminTap)}},
	})
	const grpcSource = `{resource_api_version: V3, api_config_source: {api_type: GRPC, transport_api_version: V3, grpc_services: [{envoy_grpc: {cluster_name: xds}}]}}`
	const router = `
      - name: envoy.filters.http.router
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}`
	byRDS := hcmListener(t, "by_rds", 0, `      rds: {route_config_name: by_rds, config_source: `+grpcSource+`}
      http_filters:`+router)
	byECDS := hcmListener(t, "by_ecds", 0, `      route_config:
        virtual_hosts: [{name: all, domains: ["*"], routes: [{match: {prefix: "/"}, route: {cluster: backend}}]}]
      http_filters:
      - name: tap
        config_discovery: {config_source: `+grpcSource+`, type_urls: [`+tapTypeURL+`]}`+router)
	cfg := `
node: {id: e2e-static-xds, cluster: e2e}
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners: [` + protojson.Format(byRDS) + `, ` + protojson.Format(byECDS) + `]
  clusters:
` + clusterYAML("backend", upstream.Listener.Addr().String(), false) + xdsCluster(xds)
	p := start(t, "-c", writeConfig(t, cfg))
	client := &http.Client{Timeout: 5 * time.Second}
	for _, name := range []string{"by_rds", "by_ecds"} { // on ports the kernel picked
		if got, err := getBody(client, "http://"+p.boundListenerAddr(name)+"/"); err != nil || got != "upstream" {
			t.Errorf("GET through listener %s = %q, %v; want the upstream's answer", name, got, err)
		}
	}
	if v, _ := p.stat("extension_config_discovery.http_filter.tap.config_reload"); v != 1 {
		t.Errorf("extension_config_discovery.http_filter.tap.config_reload = %d; want 1 (the ECDS configuration applied)", v)
	}
}
