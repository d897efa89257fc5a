package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/legateproxy/legate/xds/xdstest"
)

// Issue 17 item 8: the bootstrap's cluster_manager.upstream_bind_config is the source address
// of the upstream connections of every cluster, static or from CDS, without an
// upstream_bind_config of its own; a cluster's own (even an empty one) overrides it.
func TestBootstrapUpstreamBindConfig(t *testing.T) {
	// The backend answers with the source port of the connection and closes it, so that the
	// bound port is free (TIME_WAIT is on the backend's side) for the next request.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ip, _, _ := net.SplitHostPort(r.RemoteAddr)
		w.Header().Set("Connection", "close")
		io.WriteString(w, ip)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	backend := ln.Addr().(*net.TCPAddr).Port
	// The bootstrap binds upstream connections to 127.0.0.2 (any port): a fixed port would be
	// held in TIME_WAIT by whichever side closed first, and the next connection could not bind.
	const bindIP = "127.0.0.2"

	xds := xdstest.New(t, xdstest.Options{Node: "e2e-bind", ADS: true})
	xds.Set("v1", map[resourcev3.Type][]types.Resource{resourcev3.ClusterType: {staticCluster("dyn", uint32(backend))}})
	endpoint := fmt.Sprintf("load_assignment: {cluster_name: x, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %d}}}}]}]}", backend)
	cfg := `
node: {id: e2e-bind, cluster: e2e}
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
cluster_manager:
  upstream_bind_config: {source_address: {address: ` + bindIP + `, port_value: 0}}
dynamic_resources:
  ads_config: {api_type: GRPC, transport_api_version: V3, grpc_services: [{envoy_grpc: {cluster_name: xds}}]}
  cds_config: {ads: {}, resource_api_version: V3}
static_resources:
  listeners:
  - name: http
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: bind
          route_config:
            validate_clusters: false
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - {match: {prefix: /static}, route: {cluster: static}}
              - {match: {prefix: /dyn}, route: {cluster: dyn}}
              - {match: {prefix: /own}, route: {cluster: own}}
          http_filters: [{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
  clusters:
  - {name: static, connect_timeout: 1s, ` + endpoint + `}
  - {name: own, connect_timeout: 1s, upstream_bind_config: {}, ` + endpoint + `}
` + strings.Replace(xdsCluster(xds), "    connect_timeout: 1s\n", "    connect_timeout: 1s\n    upstream_bind_config: {}\n", 1)
	// The xDS channel goes through the cluster's own dialer, as Envoy's does, so the bootstrap's
	// fixed source port would be held by it for good: the xds cluster binds nothing of its own.
	p := start(t, "-c", writeConfig(t, cfg))
	waitXDS(t, xds, "cluster dyn", func() bool { _, ok := p.stat("cluster.dyn.upstream_cx_total"); return ok })
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	url := "http://" + p.listenerAddr("http")
	want := bindIP
	for _, path := range []string{"/static", "/dyn"} {
		code, body := httpGet(t, client, url+path, nil)
		if code != http.StatusOK || body != want {
			t.Errorf("GET %s: %d, source port %q; want 200 from the bootstrap's address %s", path, code, body, want)
		}
	}
	if code, body := httpGet(t, client, url+"/own", nil); code != http.StatusOK || body == want {
		t.Errorf("GET /own: %d, source port %q; want 200 from another address than %s (its own empty upstream_bind_config)", code, body, want)
	}
}
