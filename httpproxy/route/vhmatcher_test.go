package route

import (
	"strings"
	"testing"
)

func headerInput(name string) string {
	return `{name: h, typed_config: {"@type": type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput, header_name: "` + name + `"}}`
}

// TestVirtualHostMatcher selects routes through a virtual host's matcher: an exact map on a
// request header whose action is a Route (whose own match must also match), a prefix map on
// :path whose action is a RouteList tried in order, and on_no_match.
func TestVirtualHostMatcher(t *testing.T) {
	tbl := mustCompile(t, `
virtual_hosts:
- name: v
  domains: ["*"]
  matcher:
    matcher_tree:
      input: `+headerInput("x-tenant")+`
      exact_match_map:
        map:
          blue:
            action:
              name: route
              typed_config:
                "@type": type.googleapis.com/envoy.config.route.v3.Route
                name: blue
                match: {prefix: /api}
                route: {cluster: blue}
    on_no_match:
      matcher:
        matcher_tree:
          input: `+headerInput(":path")+`
          prefix_match_map:
            map:
              /static:
                action:
                  name: routes
                  typed_config:
                    "@type": type.googleapis.com/envoy.config.route.v3.RouteList
                    routes:
                    - {name: css, match: {safe_regex: {regex: '.*[.]css'}}, route: {cluster: css}}
                    - {name: static, match: {prefix: /}, route: {cluster: static}}
        on_no_match:
          action:
            name: route
            typed_config: {"@type": type.googleapis.com/envoy.config.route.v3.Route, name: fallback, match: {prefix: /}, direct_response: {status: 404}}
`, Options{})
	tests := []struct {
		name string
		r    *Request
		want string
	}{
		{"header selects the route", req("a", "/api/x", "X-Tenant", "blue"), "v/blue"},
		{"the route's own match must match too", req("a", "/other", "X-Tenant", "blue"), ""},
		{"route list: first matching route", req("a", "/static/site.css"), "v/css"},
		{"route list: later route", req("a", "/static/logo.png"), "v/static"},
		{"on_no_match", req("a", "/anything", "X-Tenant", "red"), "v/fallback"},
	}
	for _, tc := range tests {
		if got := routeName(tbl.Route(tc.r)); got != tc.want {
			t.Errorf("%s: Route() = %q; want %q", tc.name, got, tc.want)
		}
	}
}

// TestVirtualHostMatcherErrors checks what a virtual host matcher refuses at compile time.
func TestVirtualHostMatcherErrors(t *testing.T) {
	vh := func(rest string) string {
		return "virtual_hosts:\n- name: v\n  domains: [\"*\"]\n" + rest
	}
	tests := []struct{ name, src, want string }{
		{"routes and matcher", vh(`  routes: [{match: {prefix: /}, route: {cluster: c}}]
  matcher: {on_no_match: {action: {name: r, typed_config: {"@type": type.googleapis.com/envoy.config.route.v3.Route, match: {prefix: /}, route: {cluster: c}}}}}`),
			"virtual_hosts[0].matcher: set with routes"},
		{"unknown input", vh(`  matcher: {matcher_tree: {input: {name: i, typed_config: {"@type": type.googleapis.com/envoy.type.matcher.v3.HttpResponseHeaderMatchInput, header_name: x}}, exact_match_map: {map: {a: {action: {name: r, typed_config: {"@type": type.googleapis.com/envoy.config.route.v3.Route, match: {prefix: /}, route: {cluster: c}}}}}}}}`),
			`virtual_hosts[0].matcher.matcher_tree.input.typed_config: type "type.googleapis.com/envoy.type.matcher.v3.HttpResponseHeaderMatchInput" (name "i"): not implemented by Legate`},
		{"unknown action", vh(`  matcher: {on_no_match: {action: {name: r, typed_config: {"@type": type.googleapis.com/google.protobuf.StringValue, value: x}}}}`),
			`virtual_hosts[0].matcher.on_no_match.action.typed_config: type "type.googleapis.com/google.protobuf.StringValue" (name "r"): not implemented by Legate`},
		{"bad route in an action", vh(`  matcher: {on_no_match: {action: {name: r, typed_config: {"@type": type.googleapis.com/envoy.config.route.v3.Route, match: {safe_regex: {regex: "("}}, route: {cluster: c}}}}}`),
			`virtual_hosts[0].matcher.on_no_match.action.typed_config.match.safe_regex`},
		{"refused field in a RouteList", vh(`  matcher: {on_no_match: {action: {name: r, typed_config: {"@type": type.googleapis.com/envoy.config.route.v3.RouteList, routes: [{match: {prefix: /}, route: {cluster: c, append_x_forwarded_host: true}}]}}}}`),
			`virtual_hosts[0].matcher.on_no_match.action.typed_config.routes[0].route.append_x_forwarded_host: not implemented by Legate`},
	}
	for _, tc := range tests {
		_, err := Compile(parseConfig(t, tc.src), Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Compile error = %v; want it to contain %q", tc.name, err, tc.want)
		}
	}
}
