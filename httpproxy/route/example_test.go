package route_test

import (
	"fmt"
	"net/http"

	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/legateproxy/legate/httpproxy/route"
)

func Example() {
	js, _ := yaml.YAMLToJSON([]byte(`
name: local
virtual_hosts:
- name: web
  domains: ["example.com", "*.example.com"]
  routes:
  - match: {prefix: "/api/"}
    route:
      prefix_rewrite: "/"
      weighted_clusters:
        clusters: [{name: api-v1, weight: 90}, {name: api-v2, weight: 10}]
  - match: {prefix: "/"}
    route: {cluster: static}
`))
	rc := &routev3.RouteConfiguration{}
	if err := protojson.Unmarshal(js, rc); err != nil {
		panic(err)
	}
	table, err := route.Compile(rc, route.Options{})
	if err != nil {
		panic(err)
	}
	req := &route.Request{Authority: "www.example.com", Path: "/api/users?id=7", Method: "GET", Header: http.Header{}, Random: 95}
	m := table.Route(req)
	path, _ := m.Route.RewritePath(req.Path)
	fmt.Println(m.VirtualHost.Name, m.Cluster, path, m.Route.Timeout)
	// Output: web api-v2 /users?id=7 15s
}
