package e2e

import (
	"strings"
	"testing"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

const secretAndRoutes = `
  secrets:
  - name: server_cert
    tls_certificate:
      certificate_chain: {inline_string: "not a real cert"}
      private_key: {inline_string: "very secret key"}
  listeners:
  - name: ingress
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress_http
          route_config:
            name: local_route
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {prefix: "/"}
                route: {cluster: backend}
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
`

func TestConfigDumpSections(t *testing.T) {
	p := start(t, "-c", writeConfig(t, minimalConfig+secretAndRoutes))
	code, _, body := p.get("/config_dump")
	if code != 200 {
		t.Fatalf("GET /config_dump = %d\n%s", code, body)
	}
	var d adminv3.ConfigDump
	strict(t, body, &d)
	var types []string
	for _, c := range d.Configs {
		types = append(types, strings.TrimPrefix(c.GetTypeUrl(), "type.googleapis.com/envoy.admin.v3."))
	}
	// Envoy's order: tracker keys sorted (bootstrap, clusters, listeners,
	// route_scopes, routes, secrets); every section this server has.
	wantOrder := []string{"BootstrapConfigDump", "ScopedRoutesConfigDump", "RoutesConfigDump", "SecretsConfigDump"}
	for i, j := 0, 0; i < len(wantOrder); i++ {
		for j < len(types) && types[j] != wantOrder[i] {
			j++
		}
		if j == len(types) {
			t.Fatalf("sections %v lack %s in Envoy's order", types, wantOrder[i])
		}
	}
	if strings.Contains(body, "very secret key") {
		t.Error("the private key is printed unredacted")
	}
	for _, c := range d.Configs {
		switch c.GetTypeUrl() {
		case "type.googleapis.com/envoy.admin.v3.SecretsConfigDump":
			var s adminv3.SecretsConfigDump
			if err := c.UnmarshalTo(&s); err != nil {
				t.Fatal(err)
			}
			var sec tlsv3.Secret
			if len(s.StaticSecrets) != 1 || s.StaticSecrets[0].GetSecret().UnmarshalTo(&sec) != nil {
				t.Fatalf("static secrets = %v", s.StaticSecrets)
			}
			if got := sec.GetTlsCertificate().GetPrivateKey().GetInlineString(); got != "[redacted]" {
				t.Errorf("private key = %q, want [redacted]", got)
			}
		case "type.googleapis.com/envoy.admin.v3.RoutesConfigDump":
			var r adminv3.RoutesConfigDump
			c.UnmarshalTo(&r)
			if len(r.StaticRouteConfigs) != 1 {
				t.Errorf("static route configs = %d, want the listener's inline one", len(r.StaticRouteConfigs))
			}
		}
	}

	t.Run("resource", func(t *testing.T) {
		code, _, body := p.get("/config_dump?resource=static_secrets")
		if code != 200 || !strings.Contains(body, "SecretsConfigDump.StaticSecret") {
			t.Errorf("resource=static_secrets = %d\n%s", code, body)
		}
		if code, _, body := p.get("/config_dump?resource=nope"); code != 404 || body != "nope not found in config dump" {
			t.Errorf("resource=nope = %d %q", code, body)
		}
	})
	t.Run("name_regex", func(t *testing.T) {
		_, _, body := p.get("/config_dump?resource=static_route_configs&name_regex=other")
		if strings.Contains(body, "local_route") {
			t.Errorf("name_regex did not filter:\n%s", body)
		}
		if code, _, _ := p.get("/config_dump?name_regex=("); code != 400 {
			t.Errorf("bad name_regex = %d, want 400", code)
		}
	})
}

func TestConfigDumpIncludeEDS(t *testing.T) {
	p := start(t, "-c", writeConfig(t, minimalConfig))
	_, _, plain := p.get("/config_dump")
	if strings.Contains(plain, "EndpointsConfigDump") {
		t.Error("the endpoints section appears without include_eds")
	}
	code, _, body := p.get("/config_dump?include_eds")
	if code != 200 {
		t.Fatalf("GET /config_dump?include_eds = %d\n%s", code, body)
	}
	var d adminv3.ConfigDump
	strict(t, body, &d)
	var types []string
	for _, c := range d.Configs {
		types = append(types, strings.TrimPrefix(c.GetTypeUrl(), "type.googleapis.com/envoy.admin.v3."))
	}
	// Envoy's order puts endpoints between clusters and listeners.
	if got := strings.Join(types, ","); !strings.Contains(got, "ClustersConfigDump,EndpointsConfigDump,ListenersConfigDump") {
		t.Errorf("sections = %s", got)
	}
	for _, c := range d.Configs {
		var e adminv3.EndpointsConfigDump
		if c.UnmarshalTo(&e) != nil {
			continue
		}
		if len(e.StaticEndpointConfigs) != 1 {
			t.Fatalf("static endpoint configs = %v", e.StaticEndpointConfigs)
		}
		var cla endpointv3.ClusterLoadAssignment
		if err := e.StaticEndpointConfigs[0].GetEndpointConfig().UnmarshalTo(&cla); err != nil {
			t.Fatal(err)
		}
		if cla.GetClusterName() != "backend" || cla.GetPolicy().GetOverprovisioningFactor().GetValue() != 140 ||
			cla.GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetPortValue() != 1 {
			t.Errorf("assignment = %v", &cla)
		}
	}
}
