package route

import (
	"net/http"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"
)

// parseConfig decodes a YAML RouteConfiguration as the bootstrap does.
func parseConfig(t testing.TB, src string) *routev3.RouteConfiguration {
	t.Helper()
	rc, err := decodeYAML(src)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

func decodeYAML(src string) (*routev3.RouteConfiguration, error) {
	js, err := yaml.YAMLToJSON([]byte(src))
	if err != nil {
		return nil, err
	}
	rc := &routev3.RouteConfiguration{}
	return rc, protojson.Unmarshal(js, rc)
}

func mustCompile(t testing.TB, src string, opts Options) *Table {
	t.Helper()
	tbl, err := Compile(parseConfig(t, src), opts)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return tbl
}

// req builds a request; header pairs are name, value, name, value…
func req(authority, path string, headers ...string) *Request {
	h := http.Header{}
	for i := 0; i+1 < len(headers); i += 2 {
		h.Add(headers[i], headers[i+1])
	}
	return &Request{Authority: authority, Path: path, Method: "GET", Scheme: "http", Header: h}
}

// routeName returns "vhost/route" for a match, or "" for none.
func routeName(m *Match) string {
	if m == nil {
		return ""
	}
	return m.VirtualHost.Name + "/" + m.Route.Name
}

// oneRoute is a configuration with one virtual host for "*" and one route matching "/" whose
// other fields (action, …) are given in YAML flow style.
func oneRoute(fields string) string {
	return "virtual_hosts:\n- name: v\n  domains: [\"*\"]\n  routes:\n  - {match: {prefix: \"/\"}, " + fields + "}\n"
}
